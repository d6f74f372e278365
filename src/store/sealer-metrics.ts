// The sealer's /metrics series (it lives in sealer.ts's Sealer; registered here until sealer.ts
// registers them itself).
import type { Registry } from "../metrics";
import type { Sealer } from "./sealer";

export function registerSealerMetrics(sealer: Sealer, metrics: Registry): void {
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
  metrics.counter("logpond_sealer_partitions_dropped_total", "Sealed hot-tier partitions dropped (their space given back).", () => sealer.totals.dropped);
  metrics.counter(
    "logpond_sealer_closes_busy_total",
    "Closes of the open hot generation that did not get their locks in time (a long transaction on log_hot holds them off).",
    () => sealer.totals.closesBusy,
  );
}
