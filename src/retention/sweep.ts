// One retention sweep (CONTRACT §5.1): partitions ahead are created; daily partitions every
// source has outlived are detached and dropped; what shorter-lived or deleted sources leave in
// younger partitions (and the default one) is deleted in bounded statements; dead letters too.
// Invariants: no statement holds a lock a COPY needs for longer than DDL_LOCK_TIMEOUT (DELETEs
// take row locks only; DETACH waits at most that long and is retried); every statement is
// bounded (PAGES_PER_STATEMENT heap pages, via TID range scans), and the AbortSignal is checked
// between them. Row deletes never touch a source_id that is neither a source nor a tombstone
// (a dropped day takes everything in it). What a full search of a day (or, for a deleted source,
// of every day) already cleared is remembered per process (SweepMemory): later sweeps search
// there only rows committed since, i.e. ids of batches with a newer commit seq (BRIN on id).
import type { Sql } from "../store/db";
import { DAY_MS, DDL_LOCK_TIMEOUT, ensurePartitions, listPartitions, PARTITION_LOCK, type Partition } from "../store/partitions";

/** Daily partitions prepared beyond today, so a day never starts in the default partition. */
export const DAYS_AHEAD = 3;
/** A deleted source's events are searched again on every sweep this long, for late arrivals. */
export const TOMBSTONE_GRACE_MS = DAY_MS;
/** Heap pages one DELETE statement looks at (8 KiB each): bounded work and lock time per statement. */
const PAGES_PER_STATEMENT = 1_024;
const DEAD_LETTERS_PER_STATEMENT = 5_000;
/**
 * Share of wall time a sweep spends in DELETE statements: after each it rests (DUTY⁻¹ − 1)× as
 * long. Ingestion shares the machine's CPUs and disk with it; CONTRACT §5.1 wants ≥ 0.9× of
 * ingest throughput during a sweep (bench/storage.ts measures it).
 */
const DUTY = 0.1;
const DETACH_TRIES = 20;
const UNDEFINED_TABLE = "42P01";

export interface SweepResult {
  partitionsCreated: number;
  partitionsDropped: number;
  rowsRemoved: number;
  bytesRemoved: number;
  deadLettersRemoved: number;
  /** Deleted sources whose grace period ended; their tombstones are gone. */
  tombstonesCleared: number;
  partitions: number;
  /** Tables searched page by page (the rest, if any, only for rows committed since the last sweep). */
  fullSearches: number;
  /** Oldest dt still stored (null: no events). */
  oldestEvent: Date | null;
}

/**
 * Kept by the scheduler between sweeps. tombstones: per deleted source, the commit seq read before
 * the last search of every partition for it. days: per daily partition, the seq read before its
 * last full search, when, and each source's cutoff then. Rows committed later belong to
 * flush_batches rows with a larger seq, so only ids from those batches need a look.
 */
export interface SweepMemory {
  tombstones: Map<number, number>;
  days: Map<string, { seq: number; at: number; cutoffs: Map<number, number> }>;
}

/** flush_batches keeps a day: older memories cannot name every batch committed since; search fully. */
const MEMORY_MAX_AGE_MS = 20 * 3_600_000;

const LATE_ROWS_PER_STATEMENT = 10_000;

interface Cutoff {
  sourceId: number;
  /** Rows of this source with dt before this go. */
  before: Date;
}

export async function sweep(sql: Sql, signal: AbortSignal, log: (line: string) => void, now = new Date(), memory?: SweepMemory): Promise<SweepResult> {
  const result: SweepResult = {
    partitionsCreated: 0, partitionsDropped: 0, rowsRemoved: 0, bytesRemoved: 0,
    deadLettersRemoved: 0, tombstonesCleared: 0, partitions: 0, fullSearches: 0, oldestEvent: null,
  };
  result.partitionsCreated = (await ensurePartitions(sql, new Date(now.getTime() - DAY_MS), new Date(now.getTime() + DAYS_AHEAD * DAY_MS), log)).length;

  // Read before any search: a batch that commits after this has a larger seq (its update of the
  // counter row is not visible yet), one that committed before is seen by the searches.
  const [counter] = await sql<{ seq: string }[]>`select value as seq from logpond_counters where name = 'commit_seq'`;
  const seqBefore = Number(counter?.seq ?? 0);
  const sources = await sql<{ id: string; days: number }[]>`select id, logs_retention as days from sources`;
  const tombstones = await sql<{ source_id: string; deleted_at: Date }[]>`select source_id, deleted_at from source_deletions`;
  const cutoffs: Cutoff[] = sources.map((s) => ({ sourceId: Number(s.id), before: new Date(now.getTime() - s.days * DAY_MS) }));
  const deleted = tombstones.map((t) => Number(t.source_id));
  // Searched everywhere by an earlier sweep of this process: only late rows are left to find.
  const known = deleted.filter((id) => memory?.tombstones.has(id));
  const fresh = deleted.filter((id) => !memory?.tombstones.has(id));
  // Everything of every source is older than this in a partition that ends before it. No source
  // at all (a database being set up, a restore): no day is dropped.
  const keepFrom = new Date(cutoffs.length === 0 ? -8.64e15 : Math.min(...cutoffs.map((c) => c.before.getTime())));

  const partitions = await listPartitions(sql);
  for (const partition of partitions) {
    signal.throwIfAborted();
    try {
      if (partition.to.getTime() <= keepFrom.getTime()) {
        if (await dropPartition(sql, partition, result, signal, log)) continue;
      }
      // Sources whose cutoff reaches into this day, and deleted sources (any day).
      const here = cutoffs.filter((c) => c.before.getTime() > partition.from.getTime());
      const day = memory?.days.get(partition.name);
      const recent = day !== undefined && now.getTime() - day.at < MEMORY_MAX_AGE_MS;
      // Sources whose whole day was cleared by the last full search: only later rows can be here.
      const cleared = recent ? here.filter((c) => (day.cutoffs.get(c.sourceId) ?? -Infinity) >= partition.to.getTime()) : [];
      if (fresh.length > 0 || cleared.length < here.length) {
        await deleteRows(sql, partition.name, here, fresh, result, signal);
        memory?.days.set(partition.name, { seq: seqBefore, at: now.getTime(), cutoffs: new Map(here.map((c) => [c.sourceId, c.before.getTime()])) });
      } else if (cleared.length > 0) {
        await deleteLateRows(sql, [partition.name], cleared, day!.seq, result, signal);
        memory!.days.set(partition.name, { ...day!, seq: seqBefore, at: now.getTime() });
      }
    } catch (error) {
      // Dropped meanwhile by a sweep that did not take the scheduler's lock (a tool, a test).
      if ((error as { code?: string }).code !== UNDEFINED_TABLE) throw error;
    }
  }
  await deleteRows(sql, "log_events_default", cutoffs, fresh, result, signal);
  if (known.length > 0) {
    const everywhere = [...partitions.map((p) => p.name), "log_events_default"];
    const gone = known.map((sourceId) => ({ sourceId, before: new Date(8.64e15) }));
    await deleteLateRows(sql, everywhere, gone, Math.min(...known.map((id) => memory!.tombstones.get(id)!)), result, signal);
  }
  await deleteDeadLetters(sql, deleted, result, signal, now);
  if (memory) {
    memory.tombstones = new Map(deleted.map((id) => [id, seqBefore]));
    for (const name of memory.days.keys()) if (!partitions.some((p) => p.name === name)) memory.days.delete(name);
  }

  // Every partition was searched for the deleted sources: those past their grace period are done.
  const cleared = await sql`
    delete from source_deletions
    where deleted_at < ${new Date(now.getTime() - TOMBSTONE_GRACE_MS).toISOString()}::timestamptz and source_id = any(${pgArray(deleted)}::bigint[])`;
  result.tombstonesCleared = cleared.count;

  result.partitions = (await listPartitions(sql)).length + 1;
  result.oldestEvent = await oldestEvent(sql);
  return result;
}

/**
 * Expired rows (per `cutoffs`) committed after `seqSince`: their ids are at least the smallest
 * first_id of the batches committed since, so a table is searched through BRIN on id (old days
 * hold no such ids and cost a few index pages), in statements of bounded size.
 */
async function deleteLateRows(sql: Sql, tables: string[], cutoffs: Cutoff[], seqSince: number, result: SweepResult, signal: AbortSignal): Promise<void> {
  const [since] = await sql<{ first: string | null }[]>`select min(first_id) as first from flush_batches where seq > ${seqSince}`;
  if (since?.first == null) return;
  const ids = pgArray(cutoffs.map((c) => c.sourceId));
  const before = pgArray(cutoffs.map((c) => (c.before.getTime() >= 8.64e15 ? "infinity" : c.before.toISOString())));
  for (const table of tables) {
    const size = await tableSize(sql, table).catch((error) => {
      if ((error as { code?: string }).code === UNDEFINED_TABLE) return undefined;
      throw error;
    });
    if (size === undefined) continue;
    for (;;) {
      signal.throwIfAborted();
      const started = performance.now();
      const removed = await sql.unsafe(
        `delete from ${table} t where ctid = any(array(
           select l.ctid from ${table} l join unnest($2::bigint[], $3::timestamptz[]) as c(source_id, before)
             on l.source_id = c.source_id and l.dt < c.before
           where l.id >= $1 limit ${LATE_ROWS_PER_STATEMENT}))`,
        [since.first, ids, before],
      ).catch((error) => {
        if ((error as { code?: string }).code === UNDEFINED_TABLE) return { count: 0 };
        throw error;
      });
      result.rowsRemoved += removed.count;
      result.bytesRemoved += Math.round(removed.count * size.rowBytes);
      await rest(performance.now() - started, signal);
      if (removed.count < LATE_ROWS_PER_STATEMENT) break;
    }
  }
}

/** DETACH (brief ACCESS EXCLUSIVE on log_events, waited for at most DDL_LOCK_TIMEOUT) then DROP. */
async function dropPartition(sql: Sql, partition: Partition, result: SweepResult, signal: AbortSignal, log: (line: string) => void): Promise<boolean> {
  const [size] = await sql<{ rows: string; bytes: string }[]>`
    select reltuples::bigint as rows, pg_total_relation_size(oid) as bytes from pg_class where relname = ${partition.name}`;
  // Never analysed (reltuples -1: fewer rows than autovacuum's threshold, or autovacuum behind):
  // count them, reading at most one statement's worth of pages, so /metrics does not report 0.
  if (size && Number(size.rows) < 0) size.rows = String(await countRows(sql, partition.name));
  for (let attempt = 0; attempt < DETACH_TRIES; attempt++) {
    signal.throwIfAborted();
    try {
      await sql.begin(async (tx) => {
        await tx`select pg_advisory_xact_lock(${PARTITION_LOCK})`;
        const [attached] = await tx`select 1 from pg_class where relname = ${partition.name} and relispartition`;
        if (!attached) throw Object.assign(new Error(`${partition.name} is gone`), { code: UNDEFINED_TABLE });
        await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
        await tx.unsafe(`alter table log_events detach partition ${partition.name}`);
      });
      await sql.unsafe(`drop table ${partition.name}`);
      result.partitionsDropped++;
      result.rowsRemoved += Number(size?.rows ?? 0);
      result.bytesRemoved += Number(size?.bytes ?? 0);
      log(`retention: dropped partition ${partition.name} (every source's retention has passed)`);
      return true;
    } catch (error) {
      if ((error as { code?: string }).code !== "55P03") throw error;
      // COPYs hold log_events: wait for a gap between them rather than queue in front of them.
      await Bun.sleep(50 + Math.random() * 100);
    }
  }
  log(`retention: ${partition.name} could not be detached (log_events busy ${DETACH_TRIES} times); deleting its rows instead`);
  return false;
}

/** One pass over a partition's heap, PAGES_PER_STATEMENT pages per DELETE. */
async function deleteRows(sql: Sql, table: string, cutoffs: Cutoff[], deleted: number[], result: SweepResult, signal: AbortSignal): Promise<void> {
  if (cutoffs.length === 0 && deleted.length === 0) return;
  result.fullSearches++;
  const ids = [...cutoffs.map((c) => c.sourceId), ...deleted];
  const before = [...cutoffs.map((c) => c.before.toISOString()), ...deleted.map(() => "infinity")];
  const { pages, rowBytes } = await tableSize(sql, table);
  for (let first = 0; first < pages; first += PAGES_PER_STATEMENT) {
    signal.throwIfAborted();
    const started = performance.now();
    const removed = await sql.unsafe(
      `delete from ${table} t using unnest($1::bigint[], $2::timestamptz[]) as c(source_id, before)
       where t.ctid >= '(${first},0)'::tid and t.ctid < '(${first + PAGES_PER_STATEMENT},0)'::tid
         and t.source_id = c.source_id and t.dt < c.before`,
      [pgArray(ids), pgArray(before)],
    );
    result.rowsRemoved += removed.count;
    result.bytesRemoved += Math.round(removed.count * rowBytes);
    await rest(performance.now() - started, signal);
  }
}

/**
 * Heap pages, and the average stored size of a row (a sample of 100) for the bytes a delete
 * removes: summing pg_column_size over the deleted rows made each DELETE 25–30% slower (36–39 →
 * 47 ms for 1,024 pages of realistic rows); the table's size over its row estimate counted free
 * space and maps too (1,977 bytes a row for 107-byte rows in a small partition).
 */
async function tableSize(sql: Sql, table: string): Promise<{ pages: number; rowBytes: number }> {
  const [row] = await sql.unsafe<{ pages: number; bytes: number | null }[]>(
    `select ${pagesOf(table)} as pages, (select avg(pg_column_size(t.*))::float8 from (select * from ${table} limit 100) t) as bytes`,
  );
  return { pages: row?.pages ?? 0, rowBytes: row?.bytes ?? 0 };
}

/** SQL for a table's heap pages (TID range statements cover them). */
function pagesOf(table: string): string {
  return `(pg_relation_size('${table}') / current_setting('block_size')::int)::int`;
}

/** Rows of a table: counted in its first PAGES_PER_STATEMENT heap pages, scaled up to all its pages. */
async function countRows(sql: Sql, table: string): Promise<number> {
  const [row] = await sql.unsafe<{ n: number; pages: number }[]>(
    `select count(*)::int as n, ${pagesOf(table)} as pages from ${table} where ctid < '(${PAGES_PER_STATEMENT},0)'::tid`,
  );
  if (!row) return 0;
  return row.pages <= PAGES_PER_STATEMENT ? row.n : Math.round((row.n * row.pages) / PAGES_PER_STATEMENT);
}

/** Sleeps (1/DUTY − 1)× the work just done; wakes at once on abort. */
async function rest(workedMs: number, signal: AbortSignal): Promise<void> {
  const ms = workedMs * (1 / DUTY - 1);
  if (ms < 1) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
  signal.throwIfAborted();
}

/** Arrays go as text literals: postgres.js serialises typed array parameters only in some paths. */
function pgArray(values: readonly (number | string)[]): string {
  return `{${values.join(",")}}`;
}

async function deleteDeadLetters(sql: Sql, deleted: number[], result: SweepResult, signal: AbortSignal, now: Date): Promise<void> {
  for (;;) {
    signal.throwIfAborted();
    const started = performance.now();
    // Dead letters keep the time they failed (their dt may be what was refused): retention counts from it.
    const gone = await sql`
      delete from dead_letters where id = any(array(
        select d.id from dead_letters d left join sources s on s.id = d.source_id
        where d.source_id = any(${pgArray(deleted)}::bigint[])
           or (s.id is not null and d.failed_at < ${now.toISOString()}::timestamptz - make_interval(days => s.logs_retention))
        limit ${DEAD_LETTERS_PER_STATEMENT}))`;
    result.deadLettersRemoved += gone.count;
    if (gone.count < DEAD_LETTERS_PER_STATEMENT) return;
    await rest(performance.now() - started, signal);
  }
}

/** min(dt) of the default partition and of the oldest daily partition holding any row. */
async function oldestEvent(sql: Sql): Promise<Date | null> {
  // As epoch milliseconds, not a timestamptz: drizzle(sql) makes postgres.js return timestamptz
  // as text on the service's client, so `min(dt)` came back a string and every sweep failed.
  const candidates: number[] = [];
  const [inDefault] = await sql<{ ms: number | null }[]>`select (extract(epoch from min(dt)) * 1000)::float8 as ms from log_events_default`;
  if (inDefault?.ms != null) candidates.push(inDefault.ms);
  for (const partition of await listPartitions(sql)) {
    const [row] = await sql.unsafe<{ ms: number | null }[]>(`select (extract(epoch from min(dt)) * 1000)::float8 as ms from ${partition.name}`);
    if (row?.ms != null) {
      candidates.push(row.ms);
      break;
    }
  }
  return candidates.length === 0 ? null : new Date(Math.min(...candidates));
}
