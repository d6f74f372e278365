// One retention sweep (docs/storage.md) over the sealed tier: block partitions ahead are created;
// daily block partitions every source has outlived are detached and dropped (store/partitions.ts);
// the blocks of shorter-lived sources and of deleted sources are deleted, then the search filters
// none of whose blocks is left, and a deleted source's events still in the hot tier
// (store/expire.ts); dead letters and key orders (store/key-orders.ts) too. Expired hot rows need
// no sweep: the sealer does not seal rows that are expired or of deleted sources (store/sealer.ts).
// A block goes when its newest event has expired, so an event may outlive its retention by the
// time span of its block (seconds to minutes at a steady rate; docs/storage.md). A day past whose
// space is mostly that of deleted blocks is then rebuilt (store/rebuild.ts), so the disk gets it back.
// Invariants: no statement holds a lock a COPY or a seal needs for longer than DDL_LOCK_TIMEOUT;
// every DELETE is bounded (BLOCKS_PER_STATEMENT) and the AbortSignal is checked between them.
// Deletes never touch a source_id that is neither a source nor a tombstone (a dropped day takes
// everything in it).
import type { Sql } from "../store/db";
import { deleteDeadLetters } from "../store/dead-letters";
import { clearTombstones, sourceRetentions, sourceTombstones } from "../store/sources";
import { BLOCKS_PER_STATEMENT, deleteBlocks, deleteHotEvents, deleteOrphanFilters, hotLeaves, oldestBlockTime, pgArray } from "../store/expire";
import { forgetKeyOrders } from "../store/key-orders";
import { DAY_MS, dropPartition, ensurePartitions, listPartitions, type Partition, partitionSize } from "../store/partitions";
import { dropReplaced, partitionSpace, rebuildPartition } from "../store/rebuild";

/** Daily partitions prepared beyond today, so a day never starts in the default partition. */
export const DAYS_AHEAD = 3;
/** A deleted source's events are searched again on every sweep this long, for late arrivals. */
export const TOMBSTONE_GRACE_MS = DAY_MS;
const DEAD_LETTERS_PER_STATEMENT = 5_000;
/**
 * Share of wall time a sweep spends in DELETE statements: after each it rests (DUTY⁻¹ − 1)× as
 * long. Ingestion shares the machine's CPUs and disk with it and keeps ≥ 0.9× of
 * its throughput during a sweep (bench/storage.ts measures it).
 */
const DUTY = 0.1;
const DETACH_TRIES = 20;
/**
 * A day is rebuilt when this much of its space on disk, at least, is not its blocks' (deleted
 * blocks' space is reused only by blocks of the same day, which rarely come once it is past)...
 */
export const REBUILD_MIN_BYTES = 64 * 1024 * 1024;
/** ...and that is at least this share of it (a rebuild copies the rest). */
const REBUILD_MIN_SHARE = 0.5;
/**
 * Only a day that ended this long ago is rebuilt: yesterday still gets late events, whose seals
 * would wait for the rebuild's copy and make it give way (and today's blocks are being written).
 */
const REBUILD_AFTER_MS = DAY_MS;
/** Key orders are kept this many days past the longest retention (store/key-orders.ts). */
const KEY_ORDER_MARGIN_DAYS = 7;
const UNDEFINED_TABLE = "42P01";

export interface SweepResult {
  partitionsCreated: number;
  partitionsDropped: number;
  /** Days rebuilt to give deleted blocks' space back, and the bytes they shrank by. */
  partitionsRebuilt: number;
  bytesReturned: number;
  /** Events removed (in dropped partitions and deleted blocks). */
  rowsRemoved: number;
  bytesRemoved: number;
  deadLettersRemoved: number;
  /** Deleted sources whose grace period ended; their tombstones are gone. */
  tombstonesCleared: number;
  partitions: number;
  /** Oldest dt still stored in a block (null: none). */
  oldestEvent: Date | null;
}

interface Cutoff {
  sourceId: number;
  /** Blocks of this source whose newest dt is before this go. */
  before: Date;
}

export async function sweep(
  sql: Sql,
  signal: AbortSignal,
  log: (line: string) => void,
  now = new Date(),
  rebuildMinBytes = REBUILD_MIN_BYTES,
): Promise<SweepResult> {
  const result: SweepResult = {
    partitionsCreated: 0,
    partitionsDropped: 0,
    partitionsRebuilt: 0,
    bytesReturned: 0,
    rowsRemoved: 0,
    bytesRemoved: 0,
    deadLettersRemoved: 0,
    tombstonesCleared: 0,
    partitions: 0,
    oldestEvent: null,
  };
  result.partitionsCreated = (await ensurePartitions(sql, new Date(now.getTime() - DAY_MS), new Date(now.getTime() + DAYS_AHEAD * DAY_MS), log)).length;

  const sources = await sourceRetentions(sql);
  const tombstones = await sourceTombstones(sql);
  const cutoffs: Cutoff[] = sources.map((s) => ({ sourceId: Number(s.id), before: new Date(now.getTime() - s.days * DAY_MS) }));
  const deleted = tombstones.map((t) => Number(t.source_id));
  // Everything of every source is older than this in a partition that ends before it. No source
  // at all (a database being set up, a restore): no day is dropped.
  const keepFrom = new Date(cutoffs.length === 0 ? -8.64e15 : Math.min(...cutoffs.map((c) => c.before.getTime())));

  for (const partition of await listPartitions(sql)) {
    signal.throwIfAborted();
    try {
      if (partition.to.getTime() <= keepFrom.getTime()) await dropDay(sql, partition, result, signal, log);
    } catch (error) {
      // Dropped meanwhile by a sweep that did not take the scheduler's lock (a tool, a test).
      if ((error as { code?: string }).code !== UNDEFINED_TABLE) throw error;
    }
  }
  const gone = [...cutoffs, ...deleted.map((sourceId) => ({ sourceId, before: new Date(8.64e15) }))];
  for (const cutoff of gone) await expireBlocks(sql, cutoff, result, signal);
  await expireFilters(sql, cutoffs, deleted, result, signal);
  await expireHotEvents(sql, deleted, result, signal);
  await expireDeadLetters(sql, deleted, result, signal, now);
  await rebuildDays(sql, rebuildMinBytes, now, result, signal, log);
  // The key orders of events every source's retention has passed (by commit time: an event's dt is
  // within INGEST_MAX_FUTURE_MS of its reception, a day by default; the margin covers a week).
  const longest = Math.max(0, ...sources.map((s) => s.days));
  if (sources.length > 0) await forgetKeyOrders(sql, new Date(now.getTime() - (longest + KEY_ORDER_MARGIN_DAYS) * DAY_MS), signal);

  // Every block of the deleted sources is gone: those past their grace period are done.
  result.tombstonesCleared = await clearTombstones(sql, pgArray(deleted), new Date(now.getTime() - TOMBSTONE_GRACE_MS));

  result.partitions = (await listPartitions(sql)).length + 1;
  result.oldestEvent = await oldestBlockTime(sql);
  return result;
}

/** A day every source has outlived, dropped whole; its blocks are deleted instead when the day cannot be detached. */
async function dropDay(sql: Sql, partition: Partition, result: SweepResult, signal: AbortSignal, log: (line: string) => void): Promise<boolean> {
  const size = await partitionSize(sql, partition);
  for (let attempt = 0; attempt < DETACH_TRIES; attempt++) {
    signal.throwIfAborted();
    try {
      await dropPartition(sql, partition);
      result.partitionsDropped++;
      result.rowsRemoved += Number(size?.rows ?? 0);
      result.bytesRemoved += Number(size?.bytes ?? 0);
      log(`retention: dropped partition ${partition.name} (every source's retention has passed)`);
      return true;
    } catch (error) {
      if ((error as { code?: string }).code !== "55P03") throw error;
      // Readers and the sealer hold the blocks' table: wait for a gap rather than queue in front of them.
      await Bun.sleep(50 + Math.random() * 100);
    }
  }
  log(`retention: ${partition.name} could not be detached (log_blocks busy ${DETACH_TRIES} times); deleting its blocks instead`);
  return false;
}

/** Days whose space is mostly deleted blocks', each rebuilt (store/partitions.ts); a busy one is left for the next sweep. */
async function rebuildDays(sql: Sql, minBytes: number, now: Date, result: SweepResult, signal: AbortSignal, log: (line: string) => void): Promise<void> {
  await dropReplaced(sql);
  for (const partition of await listPartitions(sql)) {
    signal.throwIfAborted();
    if (partition.to.getTime() > now.getTime() - REBUILD_AFTER_MS) continue;
    const before = await partitionSpace(sql, partition, minBytes);
    if (!before) continue;
    const dead = before.total - before.live;
    if (dead < minBytes || dead < before.total * REBUILD_MIN_SHARE) continue;
    const started = performance.now();
    try {
      if (!(await rebuildPartition(sql, partition, DETACH_TRIES))) continue;
    } catch (error) {
      // Busy, a writer came, or PostgreSQL chose it to end a deadlock: rolled back, nothing changed.
      const code = (error as { code?: string }).code;
      if (code !== "55P03" && code !== "40P01") throw error;
      log(`retention: ${partition.name} not rebuilt this time (a lock stayed busy); the next sweep tries again`);
      continue;
    }
    const after = (await partitionSpace(sql, partition)) ?? before;
    result.partitionsRebuilt++;
    result.bytesReturned += Math.max(0, before.total - after.total);
    log(
      `retention: rebuilt ${partition.name}, ${before.total} → ${after.total} bytes on disk, in ${((performance.now() - started) / 1000).toFixed(1)} s (its deleted blocks' space given back)`,
    );
    await rest(performance.now() - started, signal);
  }
}

/**
 * A deleted source's events not sealed yet, at once rather than at the next seal (the sealer drops
 * them too): one DELETE per hot partition, which holds a minute or so of events; row locks only.
 */
async function expireHotEvents(sql: Sql, deleted: number[], result: SweepResult, signal: AbortSignal): Promise<void> {
  if (deleted.length === 0) return;
  for (const leaf of await hotLeaves(sql)) {
    signal.throwIfAborted();
    result.rowsRemoved += await deleteHotEvents(sql, leaf, deleted);
  }
}

/** A source's blocks whose newest event is before its cutoff, BLOCKS_PER_STATEMENT at a time. */
async function expireBlocks(sql: Sql, cutoff: Cutoff, result: SweepResult, signal: AbortSignal): Promise<void> {
  for (;;) {
    signal.throwIfAborted();
    const started = performance.now();
    const removed = await deleteBlocks(sql, cutoff.sourceId, cutoff.before);
    result.rowsRemoved += removed.events;
    result.bytesRemoved += removed.bytes;
    if (removed.blocks < BLOCKS_PER_STATEMENT) return;
    await rest(performance.now() - started, signal);
  }
}

/** Filters orphaned by the blocks just deleted: those of rows before the latest cutoff, or of a deleted source. */
async function expireFilters(sql: Sql, cutoffs: Cutoff[], deleted: number[], result: SweepResult, signal: AbortSignal): Promise<void> {
  const latest = cutoffs.length === 0 ? null : new Date(Math.max(...cutoffs.map((c) => c.before.getTime())));
  for (;;) {
    signal.throwIfAborted();
    const started = performance.now();
    const removed = await deleteOrphanFilters(sql, latest, deleted);
    result.bytesRemoved += removed.bytes;
    if (removed.filters < BLOCKS_PER_STATEMENT) return;
    await rest(performance.now() - started, signal);
  }
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

async function expireDeadLetters(sql: Sql, deleted: number[], result: SweepResult, signal: AbortSignal, now: Date): Promise<void> {
  for (;;) {
    signal.throwIfAborted();
    const started = performance.now();
    // Dead letters keep the time they failed (their dt may be what was refused): retention counts from it.
    const gone = await deleteDeadLetters(sql, pgArray(deleted), now, DEAD_LETTERS_PER_STATEMENT);
    result.deadLettersRemoved += gone;
    if (gone < DEAD_LETTERS_PER_STATEMENT) return;
    await rest(performance.now() - started, signal);
  }
}
