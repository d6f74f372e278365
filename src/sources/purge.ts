// Removes a deleted source's stored events in the background, in chunks, so a DELETE answers at
// once and a big purge never holds one long transaction. The to-do list is the
// source_deletions table, so a purge cut short by a restart resumes at the next start.
import type { Sql } from "../store/db";

const CHUNK_ROWS = 10_000;

export interface Purger {
  kick(): void;
  idle(): Promise<void>;
}

/** `beforePurge` flushes what is still buffered, so no event of the source lands after its purge. */
export function createPurger(sql: Sql, beforePurge: () => Promise<void>, log: (line: string) => void): Purger {
  let running: Promise<void> | undefined;
  let again = false;

  async function run(): Promise<void> {
    do {
      again = false;
      const pending = await sql<{ source_id: string }[]>`select source_id from source_deletions order by deleted_at`;
      if (pending.length === 0) return;
      await beforePurge();
      for (const { source_id } of pending) {
        let removed = 0;
        for (;;) {
          const result = await sql`
            delete from log_events where source_id = ${source_id} and id = any(array(
              select id from log_events where source_id = ${source_id} limit ${CHUNK_ROWS}))`;
          removed += result.count;
          if (result.count < CHUNK_ROWS) break;
        }
        await sql`delete from source_deletions where source_id = ${source_id}`;
        if (removed > 0) log(`purge: source ${source_id}: ${removed} events removed`);
      }
    } while (again);
  }

  return {
    kick() {
      if (running) {
        again = true;
        return;
      }
      running = run()
        .catch((error) => log(`purge: ${error.message} (will retry at the next deletion or start)`))
        .finally(() => {
          running = undefined;
        });
    },
    async idle() {
      while (running) await running;
    },
  };
}
