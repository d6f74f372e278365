// The stop sequence: bounded by SHUTDOWN_TIMEOUT_MS whatever clients and PostgreSQL do (CONTRACT §4).
// Ingestion closes, background work is aborted, requests in flight get a third of the time, the
// buffer drains into PostgreSQL (what it cannot write goes to a spill file), then everything else
// closes, each step within its own bound, storage last. The embedded PostgreSQL's supervisor goes on
// restarting a postmaster that died while the buffer drains (the drain needs it); closing storage
// ends the supervisor before it stops PostgreSQL, so nothing is started after that.
import type { Flusher } from "./buffer/flusher";
import { spillHeld, type Spilled } from "./buffer/spill";
import type { Config } from "./config";
import type { Metrics } from "./metrics";
import type { Store } from "./store/db";
import { within } from "./timers";

/** Time kept back from the drain for writing the spill file and closing connections (at most a quarter). */
const SPILL_RESERVE_MS = 2_000;

interface Server {
  stop(force: boolean): Promise<unknown>;
}

/** What the stop closes, in the order it does. */
export interface Running {
  /** Ingestion answers 503 from now on. */
  closeIngestion(): void;
  retention: { stop(): Promise<void> };
  sealer: { stop(): Promise<void> };
  ingest: Server;
  flusher: Flusher;
  decodeWorker: { close(): void };
  tail: { stop(): Promise<void> };
  management: Server;
  sources: { unlisten(): Promise<void> };
  store: Store;
  metrics: Metrics;
}

/**
 * Stops everything; resolves true when nothing was left behind, false when some events went to a
 * spill file (`spilled` says how many) or were lost.
 */
export async function stopAll(running: Running, spilled: Spilled, config: Config, log: (line: string) => void): Promise<boolean> {
  const { flusher, store } = running;
  running.closeIngestion();
  const deadline = Date.now() + config.shutdownTimeoutMs;
  const left = () => Math.max(0, deadline - Date.now());
  const sweepStopped = running.retention.stop(); // aborts a running sweep between two statements
  const sealStopped = running.sealer.stop(); // aborts between two moves; a move is one statement
  // In-flight requests get a third of the time to finish (their events land in the ring);
  // then slow uploads are cut off, so a client cannot hold the stop.
  const finished = await within(running.ingest.stop(false), config.shutdownTimeoutMs / 3);
  if (!finished) {
    log("shutdown: requests still uploading were cut off");
    await within(running.ingest.stop(true), 1_000);
  }
  let drained = await flusher.drain(Math.max(0, left() - Math.min(SPILL_RESERVE_MS, config.shutdownTimeoutMs / 4)));
  if (!drained) {
    const held = flusher.handOver();
    // Nothing held after all (the last batches committed as the deadline came): a clean stop.
    if (held.length === 0) drained = true;
    else spillHeld(config.dataDir, held, spilled, running.metrics, log);
  }
  running.decodeWorker.close();
  await within(running.tail.stop(), 1_000);
  await within(running.management.stop(true), 1_000);
  await within(sweepStopped, Math.max(100, left() - 1_000));
  await within(sealStopped, Math.max(100, left() - 1_000));
  await within(
    running.sources.unlisten().catch(() => {}),
    1_000,
  );
  await flusher.close(1_000);
  // A frozen PostgreSQL must not hold the stop past its deadline: an embedded one left running
  // is stopped by the next start.
  await within(store.close(), Math.max(1_000, left()));
  return drained;
}
