// What ingestion knows of sources: token → { id, paused, retention }. Filled from the database at start and
// kept current two ways: this process's own changes apply at once (the service calls `put` and
// `drop`), and every instance hears the others through PostgreSQL LISTEN/NOTIFY on one channel
// (the id of the changed source), re-reading that row within milliseconds.
// Invariant: a read never undoes a newer change. Every change and every read takes a ticket (a
// generation number) when it begins; a source remembers the ticket of what it shows, and a read
// applies to it only with a later ticket. So a rotated token never comes back from a snapshot read
// before the rotation, and of two reads finishing out of order the one begun later wins (it saw
// the database at least as new: a NOTIFY is sent at commit, and its reload begins after it).
import { eq } from "drizzle-orm";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { closing, type Service } from "../service";
import type { Db, Sql } from "../store/db";
import { sources } from "../store/schema";

export const SOURCES_CHANNEL = "logpond_sources";
/** How long a token not found is refused without a read; how many such tokens are kept. */
const MISSING_TOKEN_MS = 1_000;
const MISSING_TOKENS_KEPT = 10_000;
const COLUMNS = { id: sources.id, token: sources.token, ingestingPaused: sources.ingestingPaused, logsRetention: sources.logsRetention };

export interface SourceContext {
  readonly id: number;
  readonly paused: boolean;
  /** logs_retention: ingestion keeps no event that retention would delete at once (codec/reception.ts). */
  readonly retentionDays: number;
}

export interface SourceRow {
  id: number;
  token: string;
  ingestingPaused: boolean;
  logsRetention: number;
}

/**
 * The service's cache: every source loaded, other instances' changes followed (until the stop,
 * waited for 1 s at most), its gauge registered.
 */
export async function startSources(
  config: Config,
  { store, metrics, log }: { store: { sql: Sql; db: Db }; metrics: Registry; log: (line: string) => void },
): Promise<Service & { cache: SourceCache }> {
  const cache = new SourceCache();
  // An ingest process hears of a source made through another process's API by NOTIFY, a moment
  // after its creation answered: a token it does not know yet is looked up before it is refused.
  if (config.role === "ingest") cache.readMissing(store.db);
  await cache.loadAll(store.db);
  const following = await cache.follow(store.sql, store.db, log);
  metrics.gauge("logpond_sources", "Sources known to ingestion.", () => cache.size);
  return { ...closing("sources' notifications", () => following.unlisten().catch(() => {}), 1_000), cache };
}

export class SourceCache {
  private byToken = new Map<string, SourceContext>();
  private tokenById = new Map<number, string>();
  /** The last ticket given; `changedAt` holds the ticket of what each source's entry shows. */
  private generation = 0;
  private readonly changedAt = new Map<number, number>();

  lookup(token: string): SourceContext | undefined {
    return this.byToken.get(token);
  }

  private missingFrom: Db | undefined;
  /** Tokens looked up and not found, until when (performance.now() ms) they are refused unread. */
  private readonly notFound = new Map<string, number>();

  /** From now on `lookupMissing` reads a token this cache does not know from `db`. */
  readMissing(db: Db): void {
    this.missingFrom = db;
  }

  /**
   * A token `lookup` did not know, read from the database (when `readMissing` was called): a
   * token not found there is refused unread for MISSING_TOKEN_MS, so wrong tokens cost one read each.
   */
  async lookupMissing(token: string): Promise<SourceContext | undefined> {
    const db = this.missingFrom;
    if (db === undefined || token.length > 256) return undefined;
    const now = performance.now();
    if ((this.notFound.get(token) ?? 0) > now) return undefined;
    const ticket = ++this.generation;
    const [row] = await db.select(COLUMNS).from(sources).where(eq(sources.token, token));
    if (row === undefined) {
      if (this.notFound.size >= MISSING_TOKENS_KEPT) this.notFound.clear();
      this.notFound.set(token, now + MISSING_TOKEN_MS);
      return undefined;
    }
    if (this.take(row.id, ticket)) this.set(row);
    return this.byToken.get(token);
  }

  put(row: SourceRow): void {
    this.changedAt.set(row.id, ++this.generation);
    this.set(row);
  }

  drop(id: number): void {
    this.changedAt.set(id, ++this.generation);
    this.unset(id);
  }

  /** Whether the source still exists as far as this process knows (deleted sources are dropped). */
  has(id: number): boolean {
    return this.tokenById.has(id);
  }

  get size(): number {
    return this.byToken.size;
  }

  async loadAll(db: Db): Promise<void> {
    const ticket = ++this.generation;
    const rows = await this.readAll(db);
    const seen = new Set<number>();
    for (const row of rows) {
      seen.add(row.id);
      if (this.take(row.id, ticket)) this.set(row);
    }
    for (const id of [...this.tokenById.keys()]) {
      if (!seen.has(id) && this.take(id, ticket)) this.unset(id);
    }
  }

  async reload(db: Db, id: number): Promise<void> {
    const ticket = ++this.generation;
    const row = await this.readOne(db, id);
    if (!this.take(id, ticket)) return; // a change or a read begun later already applied
    if (row) this.set(row);
    else this.unset(id);
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

  /** The reads, separate so a test can hold a real snapshot back and apply it late. */
  protected readAll(db: Db): Promise<SourceRow[]> {
    return db.select(COLUMNS).from(sources);
  }

  protected async readOne(db: Db, id: number): Promise<SourceRow | undefined> {
    const [row] = await db.select(COLUMNS).from(sources).where(eq(sources.id, id));
    return row;
  }

  /** Whether a read with this ticket may apply to the source (then it is stamped with it). */
  private take(id: number, ticket: number): boolean {
    if ((this.changedAt.get(id) ?? 0) > ticket) return false;
    this.changedAt.set(id, ticket);
    return true;
  }

  private set(row: SourceRow): void {
    this.unset(row.id);
    this.byToken.set(row.token, { id: row.id, paused: row.ingestingPaused, retentionDays: row.logsRetention });
    this.tokenById.set(row.id, row.token);
  }

  private unset(id: number): void {
    const token = this.tokenById.get(id);
    if (token !== undefined) this.byToken.delete(token);
    this.tokenById.delete(id);
  }
}
