// The sealer: moves committed rows from the hot tier (log_hot) into compressed blocks (log_blocks)
// and gives the hot tier's space back by dropping whole partitions (docs/storage.md).
// May touch: log_hot's partitions, log_blocks, logpond_counters 'event_id' (to close a generation).
// Invariants:
// - A closed table is sealed in one transaction (its rows read, their blocks INSERTed, the table
//   TRUNCATEd): a row leaves log_hot in the transaction that writes its block, so a reader, a crash
//   or a restart sees it exactly once. TRUNCATE is not MVCC-safe for a snapshot taken before it and
//   used after, so reads take their snapshot after their locks (one statement each; the SQL
//   functions of drizzle/0005 are inlined into it).
// - Generations: log_hot is partitioned by id. The open generation (log_hot_g<first id>, the one
//   with the highest ids) takes new batches; closing it attaches the next one and moves the id
//   counter there, so ids keep increasing but skip. A closed generation is sealed (chunk by chunk
//   within the one transaction), then dropped once empty (checked under its lock). A
//   batch that reserved ids before a close writes into its closed generation: before it first
//   seals a generation (whichever instance closed it) the sealer waits (SETTLE_WAIT_MS at most) for
//   this process's batches being written, so theirs go in before the seal's lock; a batch that
//   comes later still (a retry, another instance's) waits while that generation is sealed, or
//   writes into log_hot_default once it is gone, sealed the same way.
// - Rows of deleted sources and rows past their source's retention are not sealed (dropped).
// - DDL waits at most DDL_LOCK_TIMEOUT for a lock (and so holds up a COPY at most that long).
import { type Block, buildBlocks, type Filter, LEVEL_MAX_CHARS } from "./blocks";
import { writeBlocks } from "./blocks-sql";
import { splitCarry } from "./seal-carry";
import type { Config } from "../config";
import type { Sql } from "./db";
import { DDL_LOCK_TIMEOUT } from "./partitions";
import { compactRows, decodeRows, defaultSealWorkers, type Finished, type ReadRow, readRow, SealPool, type SealPoolStats } from "./seal-pool";
import { type HandedBatch, Staging, type Stager } from "./staging";
import { chunkRows } from "./chunks";
import type { PgMicros } from "../codec/time";
import type { Registry } from "../metrics";
import { periodic } from "../periodic";
import { untilAborted, within } from "../timers";

/** Ids per generation: more than any ingest rate reaches between two closes (2^53 lasts 2^25 closes). */
export const GENERATION_IDS = 2 ** 28;
/** Events per block, at most (docs/storage.md: 1,000 measured against 4,000). */
export const BLOCK_EVENTS = 1_000;
const DT_TEXT = `to_char(m.dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
/**
 * Text a seal holds here at once, about (rows fetched until it is passed, then made into blocks):
 * bounded memory in this process, and blocks of a sparse source as full as a chunk allows. With
 * seals under load (bench/rss.ts logtail-gzip-msgpack-1000 realistic 8 3, SEAL_INTERVAL_MS=3000,
 * interleaved) 16 MiB chunks left unpaced peaked at 376/498/427 MiB (564 through the drain), 8 MiB
 * paced by the GC pacer (below) at 363/424/440 (450): the aim is 456.
 */
const CHUNK_BYTES = 8 * 1024 * 1024;
/** What a chunk leaves behind per byte of its rows' text: the rows, the blocks' bodies, the INSERTs' messages. */
const GARBAGE_PER_TEXT_BYTE = 3;
/**
 * What a seal holds here at its peak, kept out of the requests' memory while it runs: a chunk's
 * text and what it leaves behind. A stranger's mix of big bodies peaked 15–20 MiB past the aim in
 * 3 of 10 runs, each time in the seconds the first seal ran beside a full gate.
 */
export const SEAL_HELD_BYTES = CHUNK_BYTES * (1 + GARBAGE_PER_TEXT_BYTE);
/**
 * Text a seal carries from one chunk into the next, at most (store/seal-carry.ts): past it, groups
 * are built though the next chunk may still hold older events of theirs. The flush streams
 * (FLUSH_STREAMS, 2) write their batches (FLUSH_MAX_EVENTS, 20,000) into a partition at once, so
 * its physical order interleaves two batches' stretches of time: while one is read, the rows of
 * the other wait here. At half a chunk, a load at full speed (bench/scale.ts, 88–99 k events/s)
 * left days whose blocks overlapped at chunk edges, and the merges rewrote a quarter of 2 M events
 * (7 % of 20 M); a chunk's worth left 1.7 % to them, two chunks none but with RSS peaks past the
 * memory aim in bench/rss.ts (docs/storage.md, "The carry's size").
 */
const CARRY_BYTES = CHUNK_BYTES;
/** Besides the chunks in flight, a seal holds the chunk read before the one it reads, and what that carried (not yet built: no garbage yet). */
const SEAL_PENDING_BYTES = CHUNK_BYTES + CARRY_BYTES;
/** What a seal holds here at its peak with `threads` seal threads: kept out of the requests' memory while it runs. */
export const sealHeldBytes = (threads: number) => SEAL_HELD_BYTES * sealDepth(threads) + SEAL_PENDING_BYTES;
/** Text one FETCH brings, about (by the average row so far); the first FETCH takes FIRST_FETCH rows. */
const FETCH_BYTES = 2 * 1024 * 1024;
const FIRST_FETCH = 64;
/** The seal cursor's column that says whether a row is kept (after MovedRow's six). */
const KEEP = 6;
const MAX_FETCH = 10_000;
/** A partition bigger than this is not read under log_hot's lock to see that it is empty (a later pass, after VACUUM). */
const DROP_CHECK_MAX_PAGES = 64;
const SEAL_LOCK = 73_615_404;
const GENERATION = /^log_hot_g(\d+)$/;
const LOCK_NOT_AVAILABLE = "55P03";
const UNDEFINED_TABLE = "42P01";
const DROP_TRIES = 10;
const BUSY_TRIES = 3;
/** How long a seal waits for readers to let go of its table before it DELETEs the rows instead of a TRUNCATE. */
const TRUNCATE_PATIENCE_MS = 10_000;
/** How long a pass waits, after a close, for the batches being written to end (startSealer's `settled`): longer than a flush takes, short against an outage. */
const SETTLE_WAIT_MS = 5_000;
/** Inside a seal, after its SHARE lock: waits for other locks (a log_blocks partition being attached or dropped). */
const READ_LOCK_TIMEOUT = "10s";

export interface SealStats {
  /** Rows taken out of log_hot. */
  moved: number;
  /** Of those, rows written into blocks (the others were expired or of deleted sources). */
  sealed: number;
  blocks: number;
  /** Hot partitions dropped (or the default one truncated). */
  dropped: number;
  /** Closes that did not get their locks in time (retried at the next pass). */
  closesBusy: number;
  /** Of `moved`, events whose blocks the memory path had built (none read back: store/staging.ts). */
  fromMemory: number;
}

interface Part {
  name: string;
  /** Has no partitions of its own. */
  leaf: boolean;
  children: number;
}

async function parts(sql: Sql): Promise<Part[]> {
  return sql<Part[]>`
    select c.relname as name, t.isleaf as leaf,
      (select count(*)::int from pg_inherits i where i.inhparent = t.relid) as children
    from pg_partition_tree('log_hot') t join pg_class c on c.oid = t.relid where t.level > 0`;
}

/**
 * The chunk journal's partition (drizzle/0015) that holds the same generation as a log_hot
 * partition: log_chunks_g<N> for log_hot_g<N>, log_chunks_default for log_hot_default; none for
 * the daily partitions of an upgrade's log_hot_legacy. Sealed, truncated and dropped with it.
 * Undefined too when it does not exist (`twins`: log_chunks' partitions): a generation an earlier
 * logpond opened beside this one is sealed from its rows alone, not left for ever.
 */
function chunksOf(table: string, twins: ReadonlySet<string>): string | undefined {
  const generation = GENERATION.exec(table);
  const twin = generation ? `log_chunks_g${generation[1]}` : table === "log_hot_default" ? "log_chunks_default" : undefined;
  return twin && twins.has(twin) ? twin : undefined;
}

/** log_chunks' partitions now. */
async function chunkParts(sql: Sql): Promise<Set<string>> {
  const rows = await sql<{ name: string }[]>`
    select c.relname as name from pg_partition_tree('log_chunks') t join pg_class c on c.oid = t.relid where t.isleaf`;
  return new Set(rows.map((row) => row.name));
}

/** The table and its twin in the chunk journal, as a list for LOCK, TRUNCATE and VACUUM. */
const withTwin = (table: string, twin: string | undefined) => (twin ? `${table}, ${twin}` : table);

/** The first id of the generation new batches go to (the highest one), or undefined when none. */
function openStart(all: Part[]): number | undefined {
  let open: number | undefined;
  for (const part of all) {
    const match = GENERATION.exec(part.name);
    if (match && (open === undefined || Number(match[1]) > open)) open = Number(match[1]);
  }
  return open;
}

/**
 * Closes the open generation when it holds rows (or `force`): attaches the next one and moves the
 * id counter to its first id. "busy": a lock was not granted within DDL_LOCK_TIMEOUT (ATTACH
 * re-checks the default partition under ACCESS EXCLUSIVE; a long transaction that read log_hot
 * holds it off), tried again at the next pass.
 */
export async function closeGeneration(sql: Sql, force = false, opening?: (start: number) => void | Promise<void>): Promise<"closed" | "empty" | "busy"> {
  try {
    return await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${SEAL_LOCK})`;
      const open = openStart(await parts(tx as unknown as Sql));
      if (open !== undefined && !force) {
        const twin = chunksOf(`log_hot_g${open}`, await chunkParts(tx as unknown as Sql));
        const rows = await tx.unsafe(`(select 1 from log_hot_g${open} limit 1)${twin ? ` union all (select 1 from ${twin} limit 1)` : ""}`);
        if (rows.length === 0) return "empty";
      }
      const [counter] = await tx<{ value: string }[]>`select value::text as value from logpond_counters where name = 'event_id'`;
      if (!counter) throw new Error("logpond_counters has no 'event_id' row (migrations not applied?)");
      const next = Math.max(open === undefined ? 0 : open + GENERATION_IDS, Number(counter.value));
      await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
      await tx.unsafe(`create table log_hot_g${next} (like log_hot including defaults including constraints)`);
      // SHARE UPDATE EXCLUSIVE on log_hot (COPY goes on); the default partition is re-checked.
      await tx.unsafe(`alter table log_hot attach partition log_hot_g${next} for values from (${next}) to (${next + GENERATION_IDS})`);
      // Its twin in the chunk journal (drizzle/0015), made and dropped with it.
      await tx.unsafe(`create table log_chunks_g${next} (like log_chunks including defaults including constraints including storage)`);
      await tx.unsafe(`alter table log_chunks attach partition log_chunks_g${next} for values from (${next}) to (${next + GENERATION_IDS})`);
      await tx`update logpond_counters set value = greatest(value, ${next}::bigint) where name = 'event_id'`;
      // Told before the commit: no batch can take an id of the new generation until then.
      await opening?.(next);
      return "closed";
    });
  } catch (error) {
    if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return "busy";
    throw error;
  }
}

/** What the sealer's timer does around each table's seal (startSealer): `seal` runs inside it. */
export type AroundSeal = (table: string, seal: () => Promise<"truncated" | "deleted" | "busy">) => Promise<"truncated" | "deleted" | "busy">;

/**
 * Seals every closed generation and the default partition, dropping what it emptied. Counts into
 * `stats` as it goes, so what a failed or stopped pass did is counted too.
 */
export async function sealClosed(
  sql: Sql,
  signal?: AbortSignal,
  log: (line: string) => void = () => {},
  stats: SealStats = { moved: 0, sealed: 0, blocks: 0, dropped: 0, closesBusy: 0, fromMemory: 0 },
  handled?: (bytes: number) => void,
  around: AroundSeal = (_table, seal) => seal(),
  pool?: SealPool,
  staging?: Stager,
): Promise<SealStats> {
  const all = await parts(sql);
  const twins = await chunkParts(sql);
  const open = openStart(all);
  staging?.known(all.flatMap((part) => (GENERATION.test(part.name) ? [Number(GENERATION.exec(part.name)![1])] : [])));
  let failure: unknown;
  for (const part of all) {
    if (!part.leaf || part.name === `log_hot_g${open}`) continue;
    signal?.throwIfAborted();
    // One table's failure (a lock, a row PostgreSQL refuses to turn into a block) must not hold up
    // the others: it is logged, the rest are sealed, and the pass fails at its end.
    try {
      // "busy": a batch is writing into it right now (a straggler); a few tries, then the next pass.
      const twin = chunksOf(part.name, twins);
      const seal = () => sealTable(sql, part.name, twin, stats, signal, handled, pool, staging, log);
      for (let tries = 1; (await around(part.name, seal)) === "busy" && tries < BUSY_TRIES; tries++) await Bun.sleep(100);
      if (await dropIfEmpty(sql, part.name, twin, signal)) stats.dropped++;
    } catch (error) {
      if (signal?.aborted) throw error;
      if ((error as { code?: string }).code === UNDEFINED_TABLE) continue; // sealed and dropped by another instance
      log(`sealer: ${part.name}: ${(error as Error).message}`);
      failure ??= error;
    }
  }
  // Upgraded layouts: log_hot_legacy once its daily partitions are gone.
  for (const part of await parts(sql)) {
    if (!part.leaf && part.children === 0 && (await dropIfEmpty(sql, part.name, undefined, signal))) stats.dropped++;
  }
  if (failure) throw failure;
  return stats;
}

/** Closes the open generation and seals everything: all committed rows are in blocks after it. */
export async function sealAll(sql: Sql): Promise<SealStats> {
  const closed = await closeGeneration(sql);
  const stats = await sealClosed(sql);
  if (closed === "busy") stats.closesBusy++;
  return stats;
}

/**
 * Seals one closed table in one transaction: SHARE lock (a straggling batch waits; readers go on),
 * its rows read through a cursor and written as blocks chunk by chunk, then the table TRUNCATEd — its
 * space back at COMMIT, no dead row, no VACUUM. TRUNCATE needs the table to itself: readers hold
 * it off, so it is tried for TRUNCATE_PATIENCE_MS, then the rows are DELETEd instead (VACUUM and a
 * later drop give that space back). "busy": the SHARE lock was not granted (a batch is writing
 * into it now); the next pass tries again. If anything fails, everything rolls back: still hot.
 */
async function sealTable(
  sql: Sql,
  table: string,
  /** Its twin in the chunk journal (chunksOf). */
  twin: string | undefined,
  stats: SealStats,
  signal: AbortSignal | undefined,
  handled: ((bytes: number) => void) | undefined,
  pool: SealPool | undefined,
  staging: Stager | undefined,
  log: (line: string) => void = () => {},
): Promise<"truncated" | "deleted" | "busy"> {
  const match = GENERATION.exec(table);
  const generation = match ? Number(match[1]) : undefined;
  // The memory path's blocks of this generation, written by now (a retry after "busy" finds none: sealed from its rows).
  const staged = generation !== undefined && staging ? await staging.finish(generation) : undefined;
  let done: { moved: number; sealed: number; blocks: number; truncated: boolean; fromMemory: number };
  try {
    done = await sql.begin(async (tx) => {
      await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
      await tx.unsafe(`lock table ${withTwin(table, twin)} in share mode`);
      await tx.unsafe(`set local lock_timeout = '${READ_LOCK_TIMEOUT}'`);
      const read = (ranges?: Ranges) => sealRows(tx as unknown as Sql, table, twin, signal, handled, pool, ranges);
      let moved: { moved: number; sealed: number; blocks: number; fromMemory: number } | undefined;
      if (generation !== undefined) {
        // Without its chunk twin (a generation an earlier logpond opened), its batches' chunks went to
        // log_chunks_default, sealed with it: staged blocks of them would be a second copy.
        if (typeof staged === "object" && twin) moved = await publishStaged(tx as unknown as Sql, generation, staged, read);
        if (!moved) await dropStaged(tx as unknown as Sql, generation);
      }
      moved ??= { ...(await read()), fromMemory: 0 };
      const done = { ...moved, truncated: false };
      if (done.moved === 0) return done;
      done.truncated = await truncate(tx as unknown as Sql, withTwin(table, twin), signal);
      if (!done.truncated) {
        await tx.unsafe(`delete from ${table}`);
        if (twin) await tx.unsafe(`delete from ${twin}`);
      }
      return done;
    });
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === LOCK_NOT_AVAILABLE) return "busy";
    if (code === UNDEFINED_TABLE) return "truncated"; // sealed and dropped by another instance
    throw error;
  }
  // Why a generation with events was read back (the memory path could not vouch for it).
  if (typeof staged === "string" && done.moved > 0) log(`sealer: ${table} read back from its rows (${staged})`);
  stats.moved += done.moved;
  stats.sealed += done.sealed;
  stats.blocks += done.blocks;
  stats.fromMemory += done.fromMemory;
  if (done.truncated) return "truncated";
  // Rows an older snapshot still sees stay until a later pass.
  await sql.unsafe(`vacuum (truncate true) ${withTwin(table, twin)}`).catch((error) => {
    if ((error as { code?: string }).code !== UNDEFINED_TABLE) throw error;
  });
  return "deleted";
}

/** Batches' id ranges: the rows of a hot table a seal reads back (none: all of them). */
export interface Ranges {
  first: number[];
  last: number[];
}

/**
 * The memory path's staged blocks of `generation` made visible, under the table's SHARE lock (no
 * other batch can commit into it now): they must cover only batches flush_batches holds for the
 * generation; the batches they do not cover (another process's, one committed while too much
 * waited for the seal threads) have no staged block and are read back (`readBack`). Blocks of
 * sources being deleted, or wholly past their source's retention, are deleted instead.
 * Undefined: a staged batch that flush_batches does not hold (sealed from its rows).
 */
async function publishStaged(
  tx: Sql,
  generation: number,
  staged: Finished,
  readBack: (ranges: Ranges) => Promise<{ moved: number; sealed: number; blocks: number }>,
): Promise<{ moved: number; sealed: number; blocks: number; fromMemory: number } | undefined> {
  const stored = await tx<{ seq: string; first_id: string; last_id: string }[]>`
    select seq::text as seq, first_id::text as first_id, last_id::text as last_id from flush_batches
    where seq is not null and first_id >= ${generation} and first_id < ${generation + GENERATION_IDS}`;
  const built = new Set(staged.seqs);
  const missing: Ranges = { first: [], last: [] };
  for (const batch of stored) {
    if (built.delete(Number(batch.seq))) continue;
    missing.first.push(Number(batch.first_id));
    missing.last.push(Number(batch.last_id));
  }
  if (built.size > 0) return undefined;
  const gone = await tx<{ n: number; filter_id: string | null }[]>`
    delete from log_blocks b where b.generation = ${generation} and (
      exists (select 1 from source_deletions d where d.source_id = b.source_id)
      or exists (select 1 from sources s where s.id = b.source_id and b.max_dt < now() - make_interval(secs => s.logs_retention * 86400)))
    returning b.n, b.filter_id::text as filter_id`;
  const filters = [...new Set(gone.flatMap((block) => (block.filter_id === null ? [] : [block.filter_id])))];
  if (filters.length > 0)
    await tx`delete from log_filters f where f.id = any(${filters}::bigint[]) and not exists (select 1 from log_blocks b where b.filter_id = f.id and b.generation = ${generation})`;
  // Counted from what the statements did: a table sealed again (its drop was busy) publishes nothing twice.
  const published = await tx<{ n: number }[]>`update log_blocks set generation = null where generation = ${generation} returning n`;
  const events = (blocks: { n: number }[]) => blocks.reduce((sum, block) => sum + block.n, 0);
  const read = missing.first.length > 0 ? await readBack(missing) : { moved: 0, sealed: 0, blocks: 0 };
  return {
    moved: events(published) + events(gone) + read.moved,
    sealed: events(published) + read.sealed,
    blocks: published.length + read.blocks,
    fromMemory: events(published) + events(gone),
  };
}

/** A generation sealed from its rows: whatever the memory path staged of it is deleted first (a crash's leftovers too). */
async function dropStaged(tx: Sql, generation: number): Promise<void> {
  // Looked for first (a read: it waits for no writer of log_blocks); nearly always there is none.
  if ((await tx`select 1 from log_blocks where generation = ${generation} limit 1`).length === 0) return;
  await tx`delete from log_filters where id in (select filter_id from log_blocks where generation = ${generation} and filter_id is not null)`;
  await tx`delete from log_blocks where generation = ${generation}`;
}

/** TRUNCATE of `tables` (a hot table and its twin) under a savepoint, retried while readers hold them: whether it was done. */
async function truncate(tx: Sql, tables: string, signal: AbortSignal | undefined): Promise<boolean> {
  await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
  const giveUpAt = performance.now() + TRUNCATE_PATIENCE_MS;
  do {
    signal?.throwIfAborted();
    try {
      await (tx as unknown as { savepoint(work: (sp: Sql) => Promise<unknown>): Promise<unknown> }).savepoint((sp) => sp.unsafe(`truncate ${tables}`));
      return true;
    } catch (error) {
      if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
      // A reader holds it: wait for a gap rather than queue in front of the next ones.
      await Bun.sleep(50 + Math.random() * 100);
    }
  } while (performance.now() < giveUpAt);
  return false;
}

/** Ranges sorted, those that touch or overlap made one. */
export function mergeRanges(ranges: Ranges): Ranges {
  const order = ranges.first.map((_, i) => i).sort((a, b) => ranges.first[a]! - ranges.first[b]!);
  const merged: Ranges = { first: [], last: [] };
  for (const i of order) {
    const at = merged.last.length - 1;
    if (at >= 0 && ranges.first[i]! <= merged.last[at]! + 1) merged.last[at] = Math.max(merged.last[at]!, ranges.last[i]!);
    else {
      merged.first.push(ranges.first[i]!);
      merged.last.push(ranges.last[i]!);
    }
  }
  return merged;
}

/**
 * The events of `table` and of its chunk twin (both locked by the caller's transaction): its rows
 * through one server-side cursor (rowReader), then its chunks through another (chunkReader), in
 * chunks of about CHUNK_BYTES of text — the rows' bytes are held here while their blocks are built —
 * each made into blocks on a seal thread (store/seal-pool.ts; without a pool, here) while the next
 * ones are fetched, up to one chunk per thread in flight, and written in the order they were read.
 * A chunk is built once the next one has been read, less the events it carries into that one
 * (store/seal-carry.ts): a source-day's blocks then do not overlap at the chunks' edges.
 * Events of deleted sources and past their source's retention are counted, not sealed.
 */
async function sealRows(
  tx: Sql,
  table: string,
  twin: string | undefined,
  signal: AbortSignal | undefined,
  handled: ((bytes: number) => void) | undefined,
  pool: SealPool | undefined,
  ranges?: Ranges,
): Promise<{ moved: number; sealed: number; blocks: number }> {
  const merged = ranges ? mergeRanges(ranges) : undefined;
  // Only these batches' rows and chunks: each range joined (the BRIN indexes on id and first_id find
  // their pages; a chunk lies inside one batch's range), adjacent ones merged; numbers, inlined
  // (DECLARE takes no parameters).
  const within = merged ? `unnest('{${merged.first.join(",")}}'::bigint[], '{${merged.last.join(",")}}'::bigint[]) r(f, l) join ` : "";
  // In the tables' own order: PostgreSQL would start a sequential scan of a big table where another
  // backend's scan of it is and wrap around at the end, and the chunk holding the end and the start
  // would make a block spanning hours (test/integration/seal-order.test.ts).
  await tx.unsafe("set local synchronize_seqscans = off");
  const readers = [rowReader(tx, merged ? `${within}${table} m on m.id between r.f and r.l` : `${table} m`)];
  if (twin) readers.push(chunkReader(tx, merged ? `${within}${twin} c on c.first_id between r.f and r.l` : `${twin} c`, pool));
  const done = { moved: 0, sealed: 0, blocks: 0 };
  let chunk: ReadRow[] = [];
  let chunkBytes = 0;
  const building: Promise<(Block | Filter)[]>[] = [];
  // One chunk fetched or written here while each thread builds one.
  const depth = pool ? sealDepth(pool.size) : 1;
  const writeOldest = async () => {
    for (const item of await building.shift()!) {
      await writeBlocks(tx, [item]);
      if (item.kind === "filter") continue;
      done.sealed += item.n;
      done.blocks++;
    }
  };
  // Read, not yet built: the chunk before the one being read, and what it carried.
  let pending: ReadRow[] = [];
  const build = async (rows: ReadRow[], bytes: number) => {
    if (rows.length === 0) return;
    const built = pool ? pool.build(rows, BLOCK_EVENTS) : Promise.resolve().then(() => buildBlocks(decodeRows(rows), BLOCK_EVENTS));
    built.catch(() => {}); // awaited in order below; a failure while an earlier chunk is written must not go unhandled
    building.push(built);
    // Garbage now: the rows' bytes, the copy handed to the thread, the payloads, postgres.js's buffers (the GC pacer).
    handled?.(GARBAGE_PER_TEXT_BYTE * bytes);
    while (building.length >= depth) await writeOldest();
  };
  // The chunk just read: what it lets of the one before be built is built; the rest waits for the next.
  const flush = async () => {
    const split = splitCarry(pending, chunk, BLOCK_EVENTS, CARRY_BYTES);
    pending = compactRows(split.carry).concat(chunk);
    chunk = [];
    chunkBytes = 0;
    await build(split.build, split.buildBytes);
  };
  for (const read of readers) {
    for (;;) {
      signal?.throwIfAborted();
      const fetched = await read();
      for (const row of fetched.kept) {
        chunk.push(row);
        chunkBytes += row.size;
      }
      done.moved += fetched.events;
      if (chunkBytes >= CHUNK_BYTES || (fetched.end && chunk.length > 0)) await flush();
      if (fetched.end) break;
    }
  }
  // The last chunk: everything.
  await build(
    pending,
    pending.reduce((sum, row) => sum + row.size, 0),
  );
  pending = [];
  while (building.length > 0) await writeOldest();
  return done;
}

/** One FETCH of a seal's cursor: the rows it keeps, the events it read (kept or not), whether the cursor is done (and closed). */
interface Fetched {
  kept: ReadRow[];
  events: number;
  end: boolean;
}

/**
 * A seal's reader of log_hot's rows (`from`: the table or its batches' ranges, as `m`), each row's
 * text, shape and level made by PostgreSQL from its jsonb. A fetch takes as many rows as the
 * average row so far says fit in FETCH_BYTES (events run up to a few MB): the first takes FIRST_FETCH.
 */
function rowReader(tx: Sql, from: string): () => Promise<Fetched> {
  let fetched = 0;
  let fetchedBytes = 0;
  return async () => {
    if (fetched === 0)
      await tx.unsafe(
        `declare seal_rows no scroll cursor for
         select m.id::text as id, m.source_id::text as source_id, ${DT_TEXT} as dt, m.raw::text as line,
           case jsonb_typeof(m.raw) when 'object' then (select coalesce(string_agg(key, ','), '') from jsonb_object_keys(m.raw) key) else '' end as shape,
           nullif(lower(left(m.raw->>'level', ${LEVEL_MAX_CHARS})), '') as level,
           (d.source_id is null and (s.id is null or m.dt >= now() - make_interval(secs => s.logs_retention * 86400))) as keep
         from ${from} left join sources s on s.id = m.source_id left join source_deletions d on d.source_id = m.source_id`,
      );
    const count = fetched === 0 ? FIRST_FETCH : Math.max(1, Math.min(MAX_FETCH, Math.floor(FETCH_BYTES / (fetchedBytes / fetched))));
    // Bytes, not strings: the fields go to the seal thread as PostgreSQL sent them (store/seal-pool.ts ReadRow).
    const rows = await tx.unsafe<(Buffer | null)[][]>(`fetch ${count} from seal_rows`).raw();
    const kept: ReadRow[] = [];
    for (const raw of rows) {
      const row = readRow(raw);
      fetchedBytes += row.size;
      // keep: a boolean's text, t or f.
      if (raw[KEEP]![0] === 0x74) kept.push(row);
    }
    fetched += Math.max(1, rows.length);
    const end = rows.length < count;
    if (end) await tx.unsafe(`close seal_rows`);
    return { kept, events: rows.length, end };
  };
}

/** Chunks one FETCH of the chunk journal brings: up to CHUNK_EVENTS events each (store/chunks.ts). */
const CHUNKS_PER_FETCH = 8;
/** The payload's column in chunkReader's cursor (first_id, source_id, min_dt, gone, keep_from, payload). */
const CHUNK_PAYLOAD = 5;
/** Microseconds from the Unix epoch to 2000-01-01, PostgreSQL's (codec/time.ts PgMicros). */
const PG_EPOCH_SECONDS = 946_684_800;

/**
 * A seal's reader of the chunk journal (`from`: the table or its batches' ranges, as `c`): each
 * chunk's payload opened on a seal thread (SealPool.unseal; here without a pool), cut into rows
 * here (store/chunks.ts chunkRows; PostgreSQL only reads its bytes), its lines made jsonb's text on
 * the seal thread that builds them. Kept: the events at or after their source's retention cutoff,
 * none of a deleted source.
 * In time order (by each chunk's least time), not the table's: two flush streams reserve their ids
 * in either order, so a batch of older events can follow, in ids and on disk, a batch of newer ones
 * (20,000 events each), more than the carry reaches back (CARRY_BYTES); read so, the newer batch's
 * blocks were built before the older one was read, and the two overlapped for the merges to rewrite.
 * The sort holds only TOAST pointers (the payload is stored out of line).
 */
function chunkReader(tx: Sql, from: string, pool: SealPool | undefined): () => Promise<Fetched> {
  let declared = false;
  const micros = (text: string): PgMicros => {
    const value = Number(text);
    return Number.isSafeInteger(value) ? value : BigInt(text);
  };
  return async () => {
    if (!declared) {
      declared = true;
      await tx.unsafe(
        `declare seal_chunks binary no scroll cursor for
         select c.first_id::text as first_id, c.source_id::text as source_id,
           ((extract(epoch from c.min_dt) - ${PG_EPOCH_SECONDS}) * 1000000)::bigint::text as min_dt,
           d.source_id is not null as gone,
           case when s.id is not null then ((extract(epoch from now() - make_interval(secs => s.logs_retention * 86400)) - ${PG_EPOCH_SECONDS}) * 1000000)::bigint::text end as keep_from,
           c.payload
         from ${from} left join sources s on s.id = c.source_id left join source_deletions d on d.source_id = c.source_id
         order by c.min_dt, c.first_id`,
      );
    }
    // A binary cursor: a payload comes as its bytes, not as hex text PostgreSQL would encode and this
    // thread decode; a text column's bytes are its UTF-8, a boolean one byte. Each payload is copied
    // out of the socket's buffer when it goes to a seal thread, which a view would send whole.
    const chunks = await tx.unsafe<(Buffer | null)[][]>(`fetch ${CHUNKS_PER_FETCH} from seal_chunks`).raw();
    const payloads = chunks.map((chunk) => (pool ? Buffer.from(chunk[CHUNK_PAYLOAD]!) : chunk[CHUNK_PAYLOAD]!));
    const kept: ReadRow[] = [];
    let events = 0;
    const texts = pool && chunks.length > 0 ? await pool.unseal(payloads) : [];
    for (const [i, [firstId, sourceId, minDt, gone, keepFrom]] of chunks.entries()) {
      const opened = chunkRows({
        text: texts[i],
        firstId: Number(firstId!.toString("latin1")),
        sourceId: sourceId!.toString("latin1"),
        minDt: micros(minDt!.toString("latin1")),
        keepFrom: gone![0] === 1 ? null : keepFrom === null ? -Infinity : micros(keepFrom!.toString("latin1")),
        payload: payloads[i]!,
      });
      for (const row of opened.rows) kept.push(row);
      events += opened.events;
    }
    const end = chunks.length < CHUNKS_PER_FETCH;
    if (end) await tx.unsafe(`close seal_chunks`);
    return { kept, events, end };
  };
}

/**
 * Drops a hot partition that holds no row (truncates the default one), under its lock so no row
 * can arrive in between. Dropping a partition also locks log_hot: waited for at most
 * DDL_LOCK_TIMEOUT, between COPYs, a few times.
 */
async function dropIfEmpty(sql: Sql, table: string, twin: string | undefined, signal: AbortSignal | undefined): Promise<boolean> {
  for (let attempt = 0; attempt < DROP_TRIES; attempt++) {
    signal?.throwIfAborted();
    try {
      return await sql.begin(async (tx) => {
        await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
        await tx.unsafe(`lock table log_hot${twin ? ", log_chunks" : ""} in access exclusive mode`);
        const found = await tx<{ name: string; pages: number }[]>`
          select relname as name, (pg_relation_size(oid) / current_setting('block_size')::int)::int as pages from pg_class
          where relname = ${table} or relname = ${twin ?? table}`;
        // Everything here blocks COPY and readers: read at most a few pages (VACUUM cut the rest).
        if (!found.some((part) => part.name === table) || found.some((part) => part.pages > DROP_CHECK_MAX_PAGES)) return false;
        const tables = found.map((part) => part.name);
        const rows = await tx.unsafe(tables.map((name) => `(select 1 from ${name} limit 1)`).join(" union all "));
        if (rows.length > 0) return false;
        if (table === "log_hot_default") {
          if (found.every((part) => part.pages === 0)) return false;
          await tx.unsafe(`truncate ${tables.join(", ")}`);
        } else {
          await tx.unsafe(`drop table ${tables.join(", ")}`);
        }
        return true;
      });
    } catch (error) {
      if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
      // COPYs hold log_hot: wait for a gap between them rather than queue in front of them.
      await Bun.sleep(50 + Math.random() * 100);
    }
  }
  return false;
}

/** Chunks of one seal in flight with `threads` seal threads: each thread's, and the one read or written here. */
export const sealDepth = (threads: number) => threads + 1;

export interface Sealer {
  /** Closes the open generation and seals everything now (tests, benchmarks, a stop). */
  sealNow(): Promise<SealStats>;
  /** The stop's first phase: aborts what runs, without waiting for it (periodic.ts). */
  halt(): void;
  /** Aborts a pass under way (between two moves; a move is one statement) and waits for it, until `deadline` at most (periodic.ts). */
  stop(deadline?: number): Promise<void>;
  readonly totals: SealStats;
  /** What the seal threads built (store/seal-pool.ts). */
  readonly pool: SealPoolStats;
  /** When the last pass finished (ms since epoch; 0: none yet). */
  readonly lastPassAt: number;
  /**
   * Opens a new generation now, told to the memory path's holders (the open one holds batches from
   * before this start): called by the start (server.ts) before the ingest listener takes an event,
   * or, with `stager` (the ingest workers), once they listen, so the first generation is theirs too.
   */
  openGeneration(): Promise<void>;
}

/** How long opening the memory path's first generation asks again for locks that were busy (startSealer). */
const OPEN_PATIENCE_MS = 5_000;
const OPEN_RETRY_MS = 50;

/**
 * Runs the sealer: every SEAL_INTERVAL_MS the open generation closes (if it has rows), and closed ones
 * are sealed at once. An event is in a block about SEAL_INTERVAL_MS plus one pass after its commit.
 */
export function startSealer(
  config: Pick<Config, "sealIntervalMs"> & Partial<Pick<Config, "sealWorkers" | "sealBuildersMaxBytes">>,
  options: {
    sql: Sql;
    /** The memory path (store/staging.ts): the seal threads' connections, and this process's commits. Without them every generation is read back. */
    url?: string;
    subscribe?: (listener: (batch: HandedBatch) => void) => () => void;
    log: (line: string) => void;
    metrics?: Registry;
    /** Told the bytes of text each chunk made into blocks held here (the GC pacer: memory/gcpace.ts). */
    handled?: (bytes: number) => void;
    /**
     * Before a generation is first sealed here (whichever instance closed it): resolves once this
     * process's batches being written have ended (Flusher.settled), waited for at most
     * SETTLE_WAIT_MS. A batch that took its ids before the close writes into the closed generation;
     * started after the seal took its lock, it waited out the seal.
     */
    settled?: () => Promise<void>;
    /**
     * Keeps what a table's seal holds here (sealHeldBytes) out of the requests' memory while it
     * runs (memory/budget.ts): returns its release.
     */
    hold?: (bytes: number) => () => void;
    /**
     * The memory path held by other processes (the ingest workers' stagings as one, cluster/):
     * asked at each close and seal instead of a Staging of this process's commits.
     */
    stager?: Stager;
  },
): Sealer {
  const { sql, log } = options;
  const intervalMs = config.sealIntervalMs;
  const pool = new SealPool(config.sealWorkers || defaultSealWorkers(), options.url, BLOCK_EVENTS, config.sealBuildersMaxBytes);
  const local = !options.stager && options.url && options.subscribe ? stageCommits(pool, options.subscribe, options.hold) : undefined;
  const staging: Stager | undefined = options.stager ?? local?.staging;
  // The open generation holds batches from before this start: a new one takes the memory path's.
  // A lock not granted within DDL_LOCK_TIMEOUT (a pass sealing the default partition holds it for a
  // moment) is asked again, for OPEN_PATIENCE_MS at most: given up, the batches until the next
  // close are read back (test/integration/workers-memory.test.ts failed so in a full suite run).
  const openGeneration = async () => {
    const until = performance.now() + OPEN_PATIENCE_MS;
    try {
      for (;;) {
        const opened = await closeGeneration(sql, true, (start) => staging?.opening(start));
        if (opened !== "busy") return;
        if (performance.now() >= until) {
          log(`sealer: could not open a generation for the memory path (its locks were busy for ${OPEN_PATIENCE_MS} ms); the next pass does`);
          return;
        }
        await Bun.sleep(OPEN_RETRY_MS);
      }
    } catch (error) {
      log(`sealer: could not open a generation for the memory path (${(error as Error).message}); the next pass does`);
    }
  };
  const totals: SealStats = { moved: 0, sealed: 0, blocks: 0, dropped: 0, closesBusy: 0, fromMemory: 0 };
  let lastPassAt = 0;
  let busyInARow = 0;

  /** The highest generation (its first id) this process has waited for its batches before sealing. */
  let settledThrough = -1;
  const around =
    (signal: AbortSignal): AroundSeal =>
    async (table, seal) => {
      const generation = /^log_hot_g(\d+)$/.exec(table);
      if (generation && Number(generation[1]) > settledThrough && options.settled) {
        settledThrough = Number(generation[1]);
        await settle(options.settled, signal);
      }
      const release = options.hold?.(sealHeldBytes(pool.size));
      try {
        return await seal();
      } finally {
        release?.();
      }
    };
  /** The batches being written, waited for at most SETTLE_WAIT_MS; a stop does not wait (they may wait on a PostgreSQL that is away). */
  const settle = async (settled: () => Promise<void>, signal: AbortSignal) => {
    signal.throwIfAborted();
    const ended = await within(untilAborted(settled(), signal), SETTLE_WAIT_MS);
    signal.throwIfAborted();
    if (!ended) log(`sealer: batches being written did not end within ${SETTLE_WAIT_MS} ms; sealing (a batch with ids in the generation waits for the seal)`);
  };

  const pass = async (signal: AbortSignal): Promise<SealStats> => {
    const stats: SealStats = { moved: 0, sealed: 0, blocks: 0, dropped: 0, closesBusy: 0, fromMemory: 0 };
    try {
      const closed = await closeGeneration(sql, false, (start) => staging?.opening(start));
      if (closed === "busy") {
        stats.closesBusy++;
        if (++busyInARow === 3)
          log("sealer: the open generation could not be closed 3 times in a row (a long transaction holds log_hot?); new events stay hot until it can");
      } else busyInARow = 0;
      await sealClosed(sql, signal, log, stats, options.handled, around(signal), pool, staging);
      lastPassAt = Date.now();
      return stats;
    } finally {
      for (const key of Object.keys(totals) as (keyof SealStats)[]) totals[key] += stats[key];
    }
  };
  const job = periodic({
    intervalMs,
    run: pass,
    failed: (error) => log(`sealer: pass failed: ${error.message} (retried in ${intervalMs} ms)`),
    errors: options.metrics && {
      metrics: options.metrics,
      name: "logpond_sealer_pass_errors_total",
      help: "Sealer passes that failed (retried a SEAL_INTERVAL_MS later).",
    },
  });

  const sealer: Sealer = {
    sealNow: job.runNow,
    openGeneration,
    halt: job.halt,
    async stop(deadline) {
      local?.unsubscribe();
      await job.stop(deadline);
      await pool.close(deadline);
    },
    get totals() {
      return totals;
    },
    get pool() {
      return pool.stats;
    },
    get lastPassAt() {
      return lastPassAt;
    },
  };
  if (options.metrics) registerMetrics(sealer, options.metrics);
  // The memory path's (SEAL_FROM=memory); 0 without it.
  if (options.metrics) {
    options.metrics.counter(
      "logpond_sealer_handoffs_skipped_total",
      "Committed batches not handed to the seal threads (too much waited for them): their rows are read back at the seal.",
      () => local?.staging.totals.skipped ?? 0,
    );
    options.metrics.gauge(
      "logpond_sealer_handoff_pending_bytes",
      "Tuples handed to the seal threads and not yet built.",
      () => local?.staging.pendingBytes ?? 0,
    );
  }
  return sealer;
}

/**
 * The memory path of this process's commits: each batch `subscribe` reports is handed to `pool`'s
 * threads (the sealer's own, or an ingest worker's, whose supervisor asks it over IPC: cluster/).
 */
export function stageCommits(
  pool: SealPool,
  subscribe: (listener: (batch: HandedBatch) => void) => () => void,
  hold?: (bytes: number) => () => void,
): { staging: Staging; unsubscribe: () => void } {
  const staging = new Staging(pool, GENERATION_IDS, hold);
  return { staging, unsubscribe: subscribe((batch) => staging.committed(batch)) };
}

/** Its /metrics series (docs/metrics.md). */
function registerMetrics(sealer: Sealer, metrics: Registry): void {
  metrics.gauge(
    "logpond_sealer_last_pass_timestamp_seconds",
    "When the sealer last finished a pass (Unix seconds; 0: none yet).",
    () => sealer.lastPassAt / 1000,
  );
  metrics.counter("logpond_sealer_events_sealed_total", "Events the sealer moved from the hot tier into compressed blocks.", () => sealer.totals.sealed);
  metrics.counter(
    "logpond_sealer_events_dropped_total",
    "Hot rows the sealer dropped instead (past their source's retention, or of a deleted source).",
    () => sealer.totals.moved - sealer.totals.sealed,
  );
  metrics.counter("logpond_sealer_blocks_written_total", "Blocks the sealer wrote.", () => sealer.totals.blocks);
  metrics.counter(
    "logpond_sealer_events_from_memory_total",
    "Of the events sealed or dropped, those whose blocks were built from what the flusher committed (none read back from the hot tier).",
    () => sealer.totals.fromMemory,
  );
  metrics.counter("logpond_sealer_partitions_dropped_total", "Sealed hot-tier partitions dropped (their space given back).", () => sealer.totals.dropped);
  metrics.counter(
    "logpond_sealer_closes_busy_total",
    "Closes of the open hot generation that did not get their locks in time (a long transaction on log_hot holds them off).",
    () => sealer.totals.closesBusy,
  );
}
