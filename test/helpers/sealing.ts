// Faults in the middle of a move (store/sealer.ts) and the checks after them. A move (a seal) is
// one transaction: a SHARE lock on a closed hot table, its rows read, INSERTs into log_blocks, a
// TRUNCATE. Holding a SHARE lock on every partition of log_blocks stops the next move at its first
// INSERT: it holds its table and waits. That is the moment a fault is injected (kill -9, SIGTERM, a
// restart of PostgreSQL, its backend terminated), found from pg_stat_activity and pg_locks, not
// from timing.
import postgres from "postgres";
import { waitFor } from "./wait";

/** Matched against pg_stat_activity.query; built so the statement that looks for it does not contain it. */
const MOVE_TEXT = ["insert into log", "_blocks"];

export interface StalledMove {
  /** The backend running the move. */
  pid: number;
  /** Ids of the rows of the hot table it is sealing (it holds that table: no row comes or goes). */
  ids: string[];
}

export interface BlockWrites {
  /** Waits (up to `timeoutMs`, a guard) for a move that holds a hot table with rows and waits for our lock. */
  stalledMove(timeoutMs?: number): Promise<StalledMove>;
  /** Commits the lock's transaction (the move goes on, if its backend still can); idempotent. */
  release(): Promise<void>;
}

/**
 * Locks every partition of log_blocks in SHARE mode on a connection of its own (COPY, readers and
 * the hot tier are untouched; moves and block deletions wait). Returns once the lock is held.
 */
export async function holdBlockWrites(url: string): Promise<BlockWrites> {
  const lockSql = postgres(url, { max: 1, onnotice: () => {}, idle_timeout: 0 });
  const watch = postgres(url, { max: 1, onnotice: () => {} });
  let released = false;
  let finish: () => void = () => {};
  const finished = new Promise<void>((resolve) => (finish = resolve));
  let locked: () => void = () => {};
  let failed: (error: unknown) => void = () => {};
  const holding = new Promise<void>((resolve, reject) => ((locked = resolve), (failed = reject)));
  const transaction = lockSql
    .begin(async (tx) => {
      const leaves = await tx<{ name: string }[]>`
        select c.relname as name from pg_partition_tree('log_blocks') t join pg_class c on c.oid = t.relid where t.isleaf`;
      await tx.unsafe(`lock table ${leaves.map((leaf) => leaf.name).join(", ")} in share mode`);
      locked();
      await finished;
    })
    .catch((error) => failed(error)); // a restart of PostgreSQL ends it: that releases the lock too
  await holding;

  return {
    stalledMove(timeoutMs = 20_000) {
      // (No xid yet: a seal writes nothing before its first block.)
      const probe = async () => {
        const [move] = await watch<{ pid: number }[]>`
          select a.pid from pg_stat_activity a
          where a.pid <> pg_backend_pid() and a.state = 'active' and a.wait_event_type = 'Lock'
            and a.query like ${"%" + MOVE_TEXT.join("") + "%"}`;
        const [held] = move
          ? await watch<{ name: string }[]>`
              select c.relname as name from pg_locks l join pg_class c on c.oid = l.relation
              where l.pid = ${move.pid} and l.granted and l.mode = 'ShareLock' and c.relname like 'log_hot%'`
          : [];
        if (!move || !held) return undefined;
        // The generation's events: its rows, and its chunks' (the chunk journal: drizzle/0015).
        const chunks = held.name.replace(/^log_hot_/, "log_chunks_");
        const rows = await watch.unsafe<{ id: string }[]>(
          `select id::text as id from (select id from ${held.name} union all select e.id from ${chunks} c
           cross join lateral logpond_block_events(c.first_id, c.min_dt, null, null, null, c.payload) e) ids order by id`,
        );
        return rows.length > 0 ? { pid: move.pid, ids: rows.map((r) => r.id) } : undefined;
      };
      return waitFor("a move stalled on the lock of log_blocks", probe, { timeoutMs }) as Promise<StalledMove>;
    },
    async release() {
      if (!released) {
        released = true;
        finish();
        await transaction;
      }
      await Promise.all([lockSql.end({ timeout: 5 }), watch.end({ timeout: 5 })]);
    },
  };
}

/** Waits until a backend is gone: a move whose client died ends when it next talks to it. */
export async function backendGone(sql: postgres.Sql, pid: number): Promise<void> {
  await waitFor(`backend ${pid} to end`, async () => (await sql`select 1 from pg_stat_activity where pid = ${pid}`).length === 0);
}

export interface Tiers {
  /** The source's events in the hot tier (log_hot's rows and log_chunks' chunks). */
  hot: number;
  /** The source's events in blocks (sum of n). */
  sealed: number;
  /** Its blocks. */
  blocks: number;
  /** Distinct ids among the hot rows and the blocks' ids. */
  distinctIds: number;
  /** Blocks whose ids, dts and lines do not all count n. */
  badBlocks: number;
}

/**
 * One source's tiers: hot rows + block lines must equal its distinct ids (no id twice, within a tier
 * or across the two), and every block's arrays and lines must agree with its n. Staged blocks (the
 * memory path's, not yet visible: store/staging.ts) are not a tier: their events are still hot.
 */
export async function tiers(sql: postgres.Sql, sourceId: number): Promise<Tiers> {
  const [row] = await sql<Tiers[]>`
    select (select count(*) from logpond_hot_between(array[${sourceId}::bigint], '-infinity', 'infinity'))::float8 as hot,
      (select coalesce(sum(n), 0) from log_blocks where source_id = ${sourceId} and generation is null)::float8 as sealed,
      (select count(*) from log_blocks where source_id = ${sourceId} and generation is null)::float8 as blocks,
      (select count(distinct id) from (select id from logpond_hot_between(array[${sourceId}::bigint], '-infinity', 'infinity')
        union all select e.id from log_blocks b cross join lateral logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e
        where b.source_id = ${sourceId} and b.generation is null) ids)::float8 as "distinctIds",
      (select count(*) from log_blocks b where source_id = ${sourceId} and not (select count(e.id) = b.n and count(e.dt) = b.n and count(e.line) = b.n
        from logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e))::float8 as "badBlocks"`;
  return row!;
}

/** One source's visible blocks, how many of them overlap another in time, and its hot rows. */
export async function blockLayout(sql: postgres.Sql, sourceId: number): Promise<{ blocks: number; overlapping: number; hot: number }> {
  const [row] = await sql<{ blocks: number; overlapping: number; hot: number }[]>`
    select (select count(*)::int from log_blocks where source_id = ${sourceId} and generation is null) as blocks,
      (select count(*)::int from log_blocks a join log_blocks b on a.source_id = b.source_id and a.min_id < b.min_id
        and a.min_dt < b.max_dt and b.min_dt < a.max_dt where a.source_id = ${sourceId} and a.generation is null and b.generation is null) as overlapping,
      (select count(*)::int from logpond_hot_between(array[${sourceId}::bigint], '-infinity', 'infinity')) as hot`;
  return row!;
}

/** How many times each of these ids is stored, in either tier (log_events_by_id over their range). */
export async function copiesOf(sql: postgres.Sql, ids: string[]): Promise<Map<string, number>> {
  const sorted = [...ids].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  const rows = await sql<{ id: string; n: number }[]>`
    select id::text as id, count(*)::int as n from log_events_by_id(${sorted[0]!}::bigint, ${sorted.at(-1)!}::bigint)
    where id = any(${ids}::bigint[]) group by id`;
  return new Map(rows.map((r) => [r.id, r.n]));
}
