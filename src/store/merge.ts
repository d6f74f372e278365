// Merges: a source-day's small or overlapping visible blocks rewritten as few, even,
// non-overlapping ones (docs/storage.md, "Merges"), by a periodic() job.
// May touch: log_blocks and log_filters (visible blocks only: generation IS NULL); reads sources.
// Invariants:
// - A run of blocks (store/merge-plan.ts) is rewritten in ONE transaction: its blocks locked, read,
//   deleted with their filters, and the new blocks and filters INSERTed; every reader sees each
//   event exactly once, in the old blocks before the commit and in the new ones after.
// - Never waits on another writer: the blocks are locked FOR UPDATE SKIP LOCKED (a run any of whose
//   blocks is locked elsewhere — a sweep deleting them, another instance's merge — is skipped until
//   the next pass); staged blocks are never touched, so a seal publishing into the same day goes on.
// - Never brings back what a deletion removed: the source's row is locked FOR KEY SHARE NOWAIT first
//   (a DELETE of the source waits for the merge's commit, and its sweep then finds the new blocks;
//   a source already deleted, or being deleted, is skipped), and a run whose blocks are not all
//   there any more is skipped.
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { periodic } from "../periodic";
import type { Block, Filter } from "./blocks";
import { buildBlocks, LEVEL_MAX_CHARS } from "./blocks";
import { writeBlocks } from "./blocks-sql";
import type { Sql } from "./db";
import { type BlockInfo, planMerges, type Run, sliceOf } from "./merge-plan";
import { DAY_MS, DDL_LOCK_TIMEOUT } from "./partitions";
import { type ReadRow, readRow, SealPool } from "./seal-pool";
import { BLOCK_EVENTS } from "./sealer";

/**
 * Stored bytes (payloads, compressed) one run reads at most, beside MERGE_MAX_EVENTS: its text, 5–10
 * times as much, is held here while its blocks are built (events run up to INGEST_MAX_EVENT_BYTES).
 */
const RUN_MAX_STORED_BYTES = 4 * 1024 * 1024;
/**
 * What a run holds here per stored byte, about: its text (blocks compress 5–8×; JS strings of
 * non-ASCII text take two bytes a character), the rows' copy for the seal thread, the new payloads.
 */
const HELD_PER_STORED_BYTE = 16;
/** A pass rewrites at most this many times MERGE_MAX_EVENTS; the rest waits for the next pass. */
const PASS_RUNS = 4;
/** After its row locks: waits for other locks (a log_blocks partition being attached or detached). */
const WRITE_LOCK_TIMEOUT = "10s";
const LOCK_NOT_AVAILABLE = "55P03";
const DT_TEXT = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export interface MergeStats {
  /** Passes that ran to their end. */
  passes: number;
  /** Runs rewritten (one transaction each). */
  runs: number;
  /** Old blocks rewritten (deleted). */
  blocksMerged: number;
  /** New blocks written in their place. */
  blocksWritten: number;
  /** Events moved from the old blocks into the new ones. */
  events: number;
  /** Runs skipped: a block locked elsewhere, gone meanwhile, or the source deleted. */
  busy: number;
  /** Segments left alone: more than MERGE_MAX_EVENTS events of blocks overlapping in a chain. */
  tooBig: number;
  /** Runs that would come out as many blocks as they are, none overlapping (blocks cut by BLOCK_MAX_BYTES: big events): left, and not tried again by this process. */
  futile: number;
}

export type MergeSettings = Pick<Config, "mergeIntervalMs" | "mergeMaxEvents" | "mergeMinBlocks">;

const newStats = (): MergeStats => ({ passes: 0, runs: 0, blocksMerged: 0, blocksWritten: 0, events: 0, busy: 0, tooBig: 0, futile: 0 });

/**
 * One pass: the source-days that may need a merge (one query), each planned, its runs rewritten,
 * up to PASS_RUNS × maxEvents events. `full`: every day; else yesterday and today (UTC) only.
 * Past days first, oldest first; the current day's runs need `minBlocks` blocks (it still grows:
 * merging every small block at once would rewrite its tail at every pass).
 */
export async function mergePass(
  sql: Sql,
  settings: Pick<MergeSettings, "mergeMaxEvents" | "mergeMinBlocks">,
  build: (rows: ReadRow[]) => Promise<(Block | Filter)[]>,
  options: {
    full: boolean;
    signal?: AbortSignal;
    now?: Date;
    stats?: MergeStats;
    futile?: Set<string>;
    /** Keeps what a run holds here out of the requests' memory while it runs (memory/budget.ts): returns its release. */
    hold?: (bytes: number) => () => void;
  } = { full: true },
): Promise<MergeStats> {
  const stats = options.stats ?? newStats();
  const now = options.now ?? new Date();
  const today = now.toISOString().slice(0, 10);
  const from = options.full ? "-infinity" : new Date(Date.parse(today) - DAY_MS).toISOString();
  const half = Math.ceil(BLOCK_EVENTS / 2);
  // Blocks of one source hold one UTC day each: the day of max_dt. `reach`: the greatest max_dt of
  // the blocks before (by min_dt); a block starting before it overlaps one of them. Expired blocks
  // (retention deletes them) and sources that are gone are not looked at.
  const days = await sql.unsafe<{ source_id: string; day: string }[]>(
    `select source_id::text as source_id, day from (
       select b.source_id, to_char(b.max_dt at time zone 'UTC', 'YYYY-MM-DD') as day, b.n, b.min_dt,
         max(b.max_dt) over (partition by b.source_id, (b.max_dt at time zone 'UTC')::date order by b.min_dt, b.max_dt
           rows between unbounded preceding and 1 preceding) as reach
       from log_blocks b join sources s on s.id = b.source_id
       where b.generation is null and b.max_dt >= $1::text::timestamptz
         and b.max_dt >= $2::text::timestamptz - make_interval(secs => s.logs_retention * 86400)) x
     group by source_id, day
     having (bool_or(min_dt < reach) or count(*) filter (where n < $3::int) >= 2)
       and (day < $4::text or count(*) >= $5::int)
     order by day = $4::text, day, source_id`,
    [from, now.toISOString(), half, today, settings.mergeMinBlocks],
  );
  let budget = PASS_RUNS * settings.mergeMaxEvents;
  for (const { source_id, day } of days) {
    if (budget <= 0) break;
    options.signal?.throwIfAborted();
    const start = `${day}T00:00:00Z`;
    const end = new Date(Date.parse(start) + DAY_MS).toISOString();
    const blocks = await sql.unsafe<BlockInfo[]>(
      `select min_id::text as "minId", ${DT_TEXT("min_dt")} as "minDt", ${DT_TEXT("max_dt")} as "maxDt", n, filter_id::text as "filterId",
         coalesce(pg_column_size(payload), pg_column_size(body), 0)::float8 as bytes
       from log_blocks where source_id = $1::bigint and generation is null and max_dt >= $2::text::timestamptz and max_dt < $3::text::timestamptz`,
      [source_id, start, end],
    );
    const plan = planMerges(blocks, {
      blockEvents: BLOCK_EVENTS,
      maxEvents: settings.mergeMaxEvents,
      maxBytes: RUN_MAX_STORED_BYTES,
      minBlocks: day < today ? 2 : settings.mergeMinBlocks,
    });
    stats.tooBig += plan.tooBig;
    for (const run of plan.runs) {
      if (budget <= 0) break;
      options.signal?.throwIfAborted();
      const key = `${source_id} ${run.blocks.map((block) => block.minId).join(",")}`;
      if (options.futile?.has(key)) continue;
      const release = options.hold?.(HELD_PER_STORED_BYTE * run.blocks.reduce((sum, block) => sum + (block.bytes ?? 0), 0));
      const done = await mergeRun(sql, source_id, start, end, run, build).finally(() => release?.());
      if (done === "busy") {
        stats.busy++;
        continue;
      }
      if (done === "futile") {
        stats.futile++;
        options.futile?.add(key);
        continue;
      }
      budget -= done.events;
      stats.runs++;
      stats.blocksMerged += run.blocks.length;
      stats.blocksWritten += done.blocks;
      stats.events += done.events;
    }
  }
  stats.passes++;
  return stats;
}

/**
 * One run rewritten in one transaction (the module's invariants). "busy": its source is deleted or
 * being deleted, or one of its blocks is locked elsewhere or gone: nothing changed. "futile": its
 * blocks overlap nothing and would come out as many as they are (each cut at BLOCK_MAX_BYTES of
 * big events, not at BLOCK_EVENTS): nothing changed.
 */
export async function mergeRun(
  sql: Sql,
  sourceId: string,
  start: string,
  end: string,
  run: Run,
  build: (rows: ReadRow[]) => Promise<(Block | Filter)[]>,
): Promise<{ blocks: number; events: number } | "busy" | "futile"> {
  const ids = `{${run.blocks.map((block) => block.minId).join(",")}}`;
  // The run's blocks, found by the day's range on (source_id, max_dt) and named by their min_id.
  const where = `b.source_id = $1::bigint and b.generation is null and b.max_dt >= $2::text::timestamptz and b.max_dt < $3::text::timestamptz and b.min_id = any($4::bigint[])`;
  const params = [sourceId, start, end, ids] as never[];
  try {
    return await sql.begin(async (tx) => {
      await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
      const source = await tx.unsafe(`select 1 from sources where id = $1::bigint for key share nowait`, [sourceId] as never[]);
      if (source.length === 0) return "busy" as const;
      const locked = await tx.unsafe<{ n: number }[]>(`select b.n from log_blocks b where ${where} for update skip locked`, params);
      if (locked.length !== run.blocks.length) return "busy" as const;
      await tx.unsafe(`set local lock_timeout = '${WRITE_LOCK_TIMEOUT}'`);
      // Bytes, not strings: the fields go to the seal thread as PostgreSQL sent them (store/seal-pool.ts ReadRow).
      const raw = await tx
        .unsafe<(Buffer | null)[][]>(
          `select e.id::text as id, b.source_id::text as source_id, ${DT_TEXT("e.dt")} as dt, e.line,
           case jsonb_typeof(j.raw) when 'object' then (select coalesce(string_agg(key, ','), '') from jsonb_object_keys(j.raw) key) else '' end as shape,
           nullif(lower(left(j.raw->>'level', ${LEVEL_MAX_CHARS})), '') as level
         from log_blocks b cross join lateral logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e
           cross join lateral (select e.line::jsonb as raw) j
         where ${where}`,
          params,
        )
        .raw();
      const rows = raw.map(readRow);
      const events = locked.reduce((sum, block) => sum + block.n, 0);
      if (rows.length !== events) throw new Error(`merge: source ${sourceId} ${start}: the blocks hold ${rows.length} events, their n says ${events}`);
      const built = await buildRun(rows, run.sliceMinutes, build);
      const blocks = built.filter((item) => item.kind === "block").length;
      if (!run.overlaps && blocks >= run.blocks.length) return "futile" as const;
      const gone = await tx.unsafe<{ filter_id: string | null }[]>(`delete from log_blocks b where ${where} returning b.filter_id::text as filter_id`, params);
      if (gone.length !== run.blocks.length)
        throw new Error(`merge: source ${sourceId} ${start}: deleted ${gone.length} of the run's ${run.blocks.length} blocks`);
      const filters = [...new Set(gone.flatMap((block) => (block.filter_id === null ? [] : [block.filter_id])))];
      // A run takes every block of its filters (merge-plan.ts); checked all the same: a filter with a block left stays.
      if (filters.length > 0)
        await tx.unsafe(`delete from log_filters f where f.id = any($1::bigint[]) and not exists (select 1 from log_blocks b where b.filter_id = f.id)`, [
          `{${filters.join(",")}}`,
        ] as never[]);
      await writeBlocks(tx as unknown as Sql, built);
      return { blocks, events };
    });
  } catch (error) {
    if ((error as { code?: string }).code === LOCK_NOT_AVAILABLE) return "busy";
    throw error;
  }
}

/** A run's new blocks: even blocks of all its events, or (a split) of each slice's events apart, so that each stays inside its slice. */
async function buildRun(rows: ReadRow[], sliceMinutes: number | null, build: (rows: ReadRow[]) => Promise<(Block | Filter)[]>): Promise<(Block | Filter)[]> {
  if (sliceMinutes === null) return build(rows);
  const slices = new Map<number, ReadRow[]>();
  for (const row of rows) {
    const slice = sliceOf(row.dt, sliceMinutes);
    const group = slices.get(slice);
    if (group) group.push(row);
    else slices.set(slice, [row]);
  }
  const built: (Block | Filter)[] = [];
  for (const group of slices.values()) built.push(...(await build(group)));
  return built;
}

export interface Merger {
  /** One pass over every day now (tests, benchmarks). */
  mergeNow(): Promise<MergeStats>;
  halt(): void;
  stop(deadline?: number): Promise<void>;
  readonly totals: MergeStats;
}

/**
 * Every MERGE_INTERVAL_MS (0: never on its own) a pass: the first of the process and the first of
 * each UTC day look at every day (late events in old days, a start after an upgrade), the others at
 * yesterday and today. New blocks are built on a seal thread of the merge's own (store/seal-pool.ts),
 * never on the thread that answers HTTP.
 */
export function startMerger(
  settings: MergeSettings,
  options: { sql: Sql; log: (line: string) => void; metrics?: Registry; hold?: (bytes: number) => () => void },
): Merger {
  const { sql, log } = options;
  const pool = new SealPool(1);
  const build = (rows: ReadRow[]) => pool.build(rows, BLOCK_EVENTS);
  const totals = newStats();
  let fullOn = "";
  /** Runs found futile (mergePass), forgotten at each UTC day's first pass. */
  let futile = new Set<string>();
  /** mergeNow's pass looks at every day. */
  let fullNext = false;
  const pass = async (signal: AbortSignal): Promise<MergeStats> => {
    const today = new Date().toISOString().slice(0, 10);
    const full = fullNext || fullOn !== today;
    fullNext = false;
    if (fullOn !== today) futile = new Set();
    const stats = newStats();
    try {
      await mergePass(sql, settings, build, { full, signal, stats, futile, hold: options.hold });
      fullOn = today;
      if (stats.runs > 0) log(`merge: ${stats.blocksMerged} blocks (${stats.events} events) rewritten as ${stats.blocksWritten} in ${stats.runs} runs`);
      return stats;
    } finally {
      for (const key of Object.keys(totals) as (keyof MergeStats)[]) totals[key] += stats[key];
    }
  };
  const job = periodic({
    intervalMs: settings.mergeIntervalMs > 0 ? settings.mergeIntervalMs : undefined,
    run: pass,
    failed: (error) => log(`merge: pass failed: ${error.message} (retried in ${settings.mergeIntervalMs} ms)`),
    errors: options.metrics && {
      metrics: options.metrics,
      name: "logpond_merge_pass_errors_total",
      help: "Merge passes that failed (retried a MERGE_INTERVAL_MS later).",
    },
  });
  const merger: Merger = {
    mergeNow() {
      fullNext = true;
      return job.runNow();
    },
    halt: job.halt,
    async stop(deadline) {
      await job.stop(deadline);
      await pool.close(deadline);
    },
    get totals() {
      return totals;
    },
  };
  if (options.metrics) {
    const m = options.metrics;
    m.counter("logpond_merge_passes_total", "Merge passes that ran to their end.", () => totals.passes);
    m.counter("logpond_merge_blocks_merged_total", "Blocks a merge rewrote (deleted, their events moved into new blocks).", () => totals.blocksMerged);
    m.counter("logpond_merge_blocks_written_total", "Blocks merges wrote in their place.", () => totals.blocksWritten);
    m.counter("logpond_merge_events_total", "Events merges moved from old blocks into new ones.", () => totals.events);
    m.counter(
      "logpond_merge_runs_skipped_total",
      "Runs of blocks a merge left for a later pass: a block locked elsewhere or gone, or its source deleted.",
      () => totals.busy,
    );
    m.counter(
      "logpond_merge_segments_too_big_total",
      "Stretches of overlapping blocks a pass left alone because they hold more than MERGE_MAX_EVENTS events (counted at each pass that finds them).",
      () => totals.tooBig,
    );
  }
  return merger;
}
