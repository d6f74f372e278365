// What ingestion knows of sources: token → { id, paused }. Filled from the database at start and
// kept current two ways: this process's own changes apply at once (the service calls `put` and
// `drop`), and every instance hears the others through PostgreSQL LISTEN/NOTIFY on one channel
// (the id of the changed source), re-reading that row within milliseconds.
import { eq } from "drizzle-orm";
import type { Db, Sql } from "../store/db";
import { sources } from "../store/schema";

export const SOURCES_CHANNEL = "logpond_sources";

export interface SourceContext {
  readonly id: number;
  readonly paused: boolean;
}

export class SourceCache {
  private byToken = new Map<string, SourceContext>();
  private tokenById = new Map<number, string>();

  lookup(token: string): SourceContext | undefined {
    return this.byToken.get(token);
  }

  put(row: { id: number; token: string; ingestingPaused: boolean }): void {
    this.drop(row.id);
    this.byToken.set(row.token, { id: row.id, paused: row.ingestingPaused });
    this.tokenById.set(row.id, row.token);
  }

  drop(id: number): void {
    const token = this.tokenById.get(id);
    if (token !== undefined) this.byToken.delete(token);
    this.tokenById.delete(id);
  }

  /** Whether the source still exists as far as this process knows (deleted sources are dropped). */
  has(id: number): boolean {
    return this.tokenById.has(id);
  }

  get size(): number {
    return this.byToken.size;
  }

  async loadAll(db: Db): Promise<void> {
    const rows = await db
      .select({ id: sources.id, token: sources.token, ingestingPaused: sources.ingestingPaused })
      .from(sources);
    this.byToken = new Map();
    this.tokenById = new Map();
    for (const row of rows) this.put(row);
  }

  async reload(db: Db, id: number): Promise<void> {
    const [row] = await db
      .select({ id: sources.id, token: sources.token, ingestingPaused: sources.ingestingPaused })
      .from(sources)
      .where(eq(sources.id, id));
    if (row) this.put(row);
    else this.drop(id);
  }

  /** Follows other instances' changes; a (re)connected listener reloads everything it may have missed. */
  async follow(sql: Sql, db: Db, log: (line: string) => void): Promise<{ unlisten(): Promise<void> }> {
    const listening = await sql.listen(
      SOURCES_CHANNEL,
      (payload) => {
        const id = Number(payload);
        if (Number.isSafeInteger(id)) this.reload(db, id).catch((e) => log(`source cache: reload of ${id} failed: ${e.message}`));
      },
      () => {
        this.loadAll(db).catch((e) => log(`source cache: reload failed: ${e.message}`));
      },
    );
    return listening;
  }
}
