// When sweeps run: at start, every RETENTION_SWEEP_INTERVAL_MS, and soon after a source is
// deleted (kick). One sweep at a time per process, and one across instances (a session advisory
// lock; an instance that finds it taken skips that turn). Before a sweep that removes a deleted
// source, this process's buffer is flushed, so its own events of that source are not left behind.
// stop() aborts a running sweep between two statements and waits for it: shutdown stays bounded.
import type { Config } from "../config";
import { BUCKETS, type Registry } from "../metrics";
import type { Sql } from "../store/db";
import { DAY_MS, ensurePartitions } from "../store/partitions";
import { tombstoneCount } from "../store/sources";
import { periodic } from "../periodic";
import { untilAborted, within } from "../timers";
import { DAYS_AHEAD, sweep, type SweepResult } from "./sweep";

const SWEEP_LOCK = 73_615_403;
/** How long the pre-sweep flush may take before the sweep goes ahead anyway (late events are re-swept). */
const FLUSH_WAIT_MS = 5_000;

export interface Retention {
  /** Sweep soon (a source was deleted); coalesces with a sweep already running. */
  kick(): void;
  /** Resolves when no sweep is running or queued. */
  idle(): Promise<void>;
  /** The stop's first phase: aborts what runs, without waiting for it (periodic.ts). */
  halt(): void;
  /** Aborts a running sweep (between two statements) and waits for it, until `deadline` at most (periodic.ts). */
  stop(deadline?: number): Promise<void>;
  /** The last sweep's view of storage, for /metrics. */
  readonly last: SweepResult | undefined;
}

/** At start: yesterday's, today's and the next days' block partitions exist before the first seal (sweeps keep them ahead). */
export async function ensurePartitionsAhead(sql: Sql, log: (line: string) => void): Promise<void> {
  await ensurePartitions(sql, new Date(Date.now() - DAY_MS), new Date(Date.now() + DAYS_AHEAD * DAY_MS), log);
}

export function startRetention(
  config: Pick<Config, "retentionSweepIntervalMs">,
  deps: { sql: Sql; flush: () => Promise<void>; metrics: Registry; log: (line: string) => void },
): Retention {
  const { sql, flush, metrics, log } = deps;
  const intervalMs = config.retentionSweepIntervalMs;
  let last: SweepResult | undefined;
  const swept = retentionSeries(metrics);

  async function once(signal: AbortSignal): Promise<void> {
    const connection = await sql.reserve();
    try {
      const [lock] = await connection<{ got: boolean }[]>`select pg_try_advisory_lock(${SWEEP_LOCK}) as got`;
      if (!lock?.got) return; // another instance is sweeping
      try {
        if ((await tombstoneCount(connection)) > 0) await untilAborted(within(flush(), FLUSH_WAIT_MS), signal);
        signal.throwIfAborted();
        const started = performance.now();
        const result = await sweep(sql, signal, log, new Date());
        last = result;
        swept(result, (performance.now() - started) / 1000);
        if (result.rowsRemoved > 0 || result.partitionsDropped > 0 || result.deadLettersRemoved > 0 || result.partitionsRebuilt > 0) {
          log(
            `retention: ${result.rowsRemoved} events (${result.bytesRemoved} bytes) and ${result.deadLettersRemoved} dead letters removed, ${result.partitionsDropped} partitions dropped, ${result.partitionsRebuilt} rebuilt (${result.bytesReturned} bytes given back), in ${((performance.now() - started) / 1000).toFixed(1)} s`,
          );
        }
      } finally {
        await connection`select pg_advisory_unlock(${SWEEP_LOCK})`.catch(() => {});
      }
    } finally {
      connection.release();
    }
  }

  metrics.gauge(
    "logpond_storage_partitions",
    "log_blocks partitions (daily ones and the default), as of the last retention sweep.",
    () => last?.partitions ?? 0,
  );
  metrics.gauge(
    "logpond_storage_oldest_event_timestamp_seconds",
    "dt of the oldest stored event (Unix seconds; 0: none), as of the last retention sweep.",
    () => (last?.oldestEvent?.getTime() ?? 0) / 1000,
  );
  const job = periodic({
    intervalMs,
    run: once,
    atStart: true,
    fixedRate: true, // an event meets a sweep at most an interval after it is stored (codec/reception.ts)
    failed: (error) => log(`retention: sweep failed: ${error.message} (retried at the next interval or deletion)`),
    errors: { metrics, name: "logpond_retention_sweep_errors_total", help: "Retention sweeps that failed (retried at the next interval)." },
  });

  return {
    kick: job.kick,
    idle: job.idle,
    halt: job.halt,
    stop: job.stop,
    get last() {
      return last;
    },
  };
}

/** Its /metrics series (docs/metrics.md); what counts a completed sweep. */
function retentionSeries(metrics: Registry): (result: SweepResult, seconds: number) => void {
  const sweeps = metrics.counter("logpond_retention_sweeps_total", "Retention sweeps completed.");
  const rows = metrics.counter(
    "logpond_retention_rows_removed_total",
    "Events removed by retention and deleted-source purges (dropped partitions: PostgreSQL's row estimate).",
  );
  const bytes = metrics.counter(
    "logpond_retention_bytes_removed_total",
    "Bytes removed: dropped partitions' size on disk, deleted rows' estimated stored size (their partition's average); a deleted row's space is reused by later rows of that partition only, and returns to the disk when the partition is dropped or rebuilt (logpond_retention_bytes_returned_total).",
  );
  const deadLetters = metrics.counter("logpond_retention_dead_letters_removed_total", "Dead letters removed by retention and deleted-source purges.");
  const partitions = metrics.counter("logpond_retention_partitions_dropped_total", "Daily partitions dropped because every source had outlived them.");
  const rebuilt = metrics.counter(
    "logpond_retention_partitions_rebuilt_total",
    "Daily partitions rebuilt into a new table because most of their space was deleted blocks' (docs/storage.md).",
  );
  const returned = metrics.counter("logpond_retention_bytes_returned_total", "Bytes on disk the rebuilt daily partitions shrank by.");
  const duration = metrics.histogram("logpond_retention_sweep_duration_seconds", "Completed retention sweeps' duration.", BUCKETS.sweep);
  let lastSeconds = 0;
  metrics.gauge("logpond_retention_last_sweep_duration_seconds", "Duration of the last completed retention sweep.", () => lastSeconds);
  return (result, seconds) => {
    sweeps.inc();
    rows.inc(result.rowsRemoved);
    bytes.inc(result.bytesRemoved);
    deadLetters.inc(result.deadLettersRemoved);
    partitions.inc(result.partitionsDropped);
    rebuilt.inc(result.partitionsRebuilt);
    returned.inc(result.bytesReturned);
    duration.observe(seconds);
    lastSeconds = seconds;
  };
}
