// Builds a running logpond from a Config, in the order data flows: storage → sources → ring +
// flusher (spilled events replayed) → retention, tail, tokens → memory → sealer (its garbage paced)
// → both listeners. Each module starts as `start…(config, deps)`, declares its own /metrics series
// and returns a Service; stop.ts stops the list. `main.ts` adds the banner and signals; tests
// start it in-process on port 0. One composition for every kind of process (a Plan): one logpond;
// a supervisor, whose ingest workers (cluster/supervisor.ts) listen instead of it; an ingest node
// (ROLE=ingest, an ingest worker among them), which runs no maintenance and no management listener.
import type { Flusher } from "./buffer/flusher";
import { startFlusher } from "./buffer/flusher";
import { openRing, type Ring } from "./buffer/ring";
import { type Spilled, startBuffer } from "./buffer/spill";
import type { Config } from "./config";
import type { ApiToken } from "./http/apitoken";
import { assertPortsFree } from "./http/ports";
import { startDecodeWorker } from "./ingest/offload";
import { listenerUrl, publicIngestHost, startIngestListener, startManagementListener } from "./listeners";
import { startMemory } from "./memory/budget";
import { Metrics } from "./metrics";
import { ensurePartitionsAhead, startRetention, type Retention } from "./retention/scheduler";
import { background, readiness, type Service } from "./service";
import { startSources } from "./sources/cache";
import { openStore, type Store } from "./store/db";
import { type Merger, startMerger } from "./store/merge";
import { BLOCK_EVENTS, type Sealer, stageCommits, startSealer } from "./store/sealer";
import { SealPool } from "./store/seal-pool";
import { type HandedBatch, type Stager, stagerGroup, type Staging } from "./store/staging";
import { stopAll } from "./stop";
import { startTail, type TailHub } from "./tail/hub";
import { startTokens } from "./tokens/service";
import { type UncaughtKind, uncaughtSeries } from "./uncaught";
import { startWorkers, type Workers } from "./cluster/supervisor";

export { ingestApp, managementApp, publicIngestHost } from "./listeners";

/** What every kind of process has: an ingest listener (or its workers'), a buffer, storage. */
export interface IngestNode {
  readonly ingestUrl: string;
  readonly store: Store;
  readonly flusher: Flusher;
  readonly ring: Ring;
  readonly metrics: Metrics;
  /** logpond_uncaught_errors_total, counted by the handlers main.ts installs (uncaught.ts). */
  readonly uncaughtErrors: { inc(kind: UncaughtKind): void };
  /**
   * Stop accepting, drain the buffer, close storage. Resolves true when nothing was left behind;
   * false when some events went to a spill file (`spilled` says how many) or were lost.
   */
  stop(): Promise<boolean>;
  /** After stop(): events written to the spill file, and the file. */
  readonly spilled: Spilled;
  /** Where this ingest node's listener counts requests and events (cluster/worker.ts reports them). */
  readonly ingested: () => { requests: number; events: number };
  /** An ingest worker's memory path (SEAL_FROM=memory), which its supervisor asks (cluster/worker.ts). */
  readonly staging?: Stager;
}

export interface Logpond extends IngestNode {
  readonly apiUrl: string;
  readonly apiToken: ApiToken;
  readonly tail: TailHub;
  /** Retention sweeps: at start, every RETENTION_SWEEP_INTERVAL_MS, and after a deletion. */
  readonly retention: Retention;
  /** Moves committed events into compressed blocks every SEAL_INTERVAL_MS. */
  readonly sealer: Sealer;
  /** Merges a day's small or overlapping blocks every MERGE_INTERVAL_MS. */
  readonly merger: Merger;
  /** The ingest workers, when INGEST_WORKERS > 1 made this process their supervisor. */
  readonly workers: Workers | undefined;
}

/**
 * Which parts a process runs. `workers` > 1: its ingest listener is that many worker processes'
 * (cluster/supervisor.ts) instead of its own; `maintenance` false: an ingest node, with no
 * migrations, partitions, retention, sealer, tail, tokens nor management listener.
 */
interface Plan {
  maintenance: boolean;
  workers: number;
}

/** One logpond (ROLE=all): with `workers` > 1, the supervisor of that many ingest workers. */
export async function startLogpond(config: Config, log: (line: string) => void, workers = 1): Promise<Logpond> {
  return (await start(config, log, { maintenance: true, workers })) as Logpond;
}

/** An ingest node (ROLE=ingest): DATABASE_URL's, which another logpond maintains; an ingest worker too. */
export function startIngestNode(config: Config, log: (line: string) => void): Promise<IngestNode> {
  return start(config, log, { maintenance: false, workers: 1 });
}

async function start(config: Config, log: (line: string) => void, plan: Plan): Promise<IngestNode & Partial<Logpond>> {
  const ingestPort = { host: config.ingestHost, variable: config.ingestHost === config.host ? "HOST" : "INGEST_HOST", port: config.ingestPort };
  await assertPortsFree({
    ...(plan.maintenance && { API_PORT: { host: config.apiHost, variable: config.apiHost === config.host ? "HOST" : "API_HOST", port: config.apiPort } }),
    // A worker's port is its supervisor's, which checked it, and which the other workers share.
    ...(config.workerIndex === undefined && { INGEST_PORT: ingestPort }),
  });
  const metrics = new Metrics();
  const store = await openStore(config, { metrics, log });
  try {
    return await startOn(store, config, metrics, log, plan);
  } catch (error) {
    // The embedded PostgreSQL runs in a process group of its own: a failed start must stop it.
    await store.close();
    throw error;
  }
}

async function startOn(store: Store, config: Config, metrics: Metrics, log: (line: string) => void, plan: Plan): Promise<IngestNode & Partial<Logpond>> {
  const uncaughtErrors = uncaughtSeries(metrics);
  const supervisor = store.supervisor;
  const sources = await startSources(config, { store, metrics, log });
  if (plan.maintenance) await ensurePartitionsAhead(store.sql, log);
  const ring = openRing(config, metrics);
  const flusher = startFlusher(config, { url: store.url, ring, metrics, log });
  const buffer = await startBuffer(config, { url: store.url, ring, flusher, metrics, log, reserve: plan.workers <= 1 }); // spills replayed, before ingestion opens
  supervisor?.onRestart(() => flusher.retryNow());
  const decodeWorker = startDecodeWorker(config);
  const memory = startMemory(config, { ring, flusher, metrics, lanes: decodeWorker.width });
  if (!plan.maintenance) {
    let services: Service[] = [store, flusher];
    const ready = readiness(() => services);
    // An ingest worker with the memory path builds blocks of what it commits, for its supervisor's sealer (cluster/stagers.ts).
    const staging =
      config.sealFrom === "memory" && config.workerIndex !== undefined ? startWorkerStaging(config, { url: store.url, flusher, memory }) : undefined;
    const ingest = startIngestListener(config, { sources, ring, flusher, memory, decodeWorker, store, metrics, log, ready });
    // Its seal threads stop after the buffer's drain, whose commits they are handed.
    services = [store, flusher, ...(staging ? [staging] : []), sources, decodeWorker, buffer, ingest];
    return {
      ...{ store, flusher, ring, metrics, uncaughtErrors, ingested: ingest.ingested, staging: staging?.staging },
      spilled: buffer.spilled,
      ingestUrl: ingest.url,
      stop: () => stopAll(services, config.shutdownTimeoutMs).then(() => buffer.drained),
    };
  }
  // Before a deletion sweep, what every buffer holds is written: the workers' too, once they run.
  let workers: Workers | undefined;
  const flushAll = () => Promise.all([flusher.flush(), workers?.flush()]).then(() => {});
  const retention = startRetention(config, { sql: store.sql, flush: flushAll, metrics, log });
  const tail = await startTail(config, { sql: store.sql, flusher, metrics, log });
  const tokens = await startTokens(config, { store, tail, log });
  const sealer = startSealer(config, {
    sql: store.sql,
    // The memory path (store/staging.ts): its threads connect, and hear of each commit; with
    // workers, theirs do, and the sealer asks them (cluster/stagers.ts).
    ...(config.sealFrom === "memory" &&
      (plan.workers > 1
        ? { stager: stagerGroup(() => workers?.stagers ?? []) }
        : { url: store.url, subscribe: (listener: (batch: HandedBatch) => void) => flusher.subscribe(listener) })),
    log,
    metrics,
    handled: (bytes) => memory.gcPacer.handled(bytes),
    settled: () => flusher.settled(),
    hold: (bytes) => memory.hold(bytes),
  });
  // The memory path's first generation, opened before this process's ingest listener takes an event
  // (an event before it would be read back at its seal: test/integration/seal-memory.test.ts failed so in CI).
  if (config.sealFrom === "memory" && plan.workers <= 1) await sealer.openGeneration();
  const merger = startMerger(config, { sql: store.sql, log, metrics, hold: (bytes) => memory.hold(bytes) });
  // /ready: the first reason a service gives, in the list's order (storage's, then the flusher's);
  // while the listeners start, before the list is whole, those two are asked.
  let services: Service[] = [store, flusher];
  const ready = readiness(() => services);
  // With workers, this process takes no events itself: they listen on INGEST_PORT, started once
  // the management listener is up (a second logpond on the same ports was refused before storage).
  const ingest = plan.workers > 1 ? undefined : startIngestListener(config, { sources, ring, flusher, memory, decodeWorker, store, metrics, log, ready });
  let ingestPort = ingest?.port ?? config.ingestPort;
  const management = await startManagementListener(config, {
    ...{ store, sources, tokens, tail, retention, metrics, log, ready },
    ingestingHost: () => publicIngestHost(config, ingestPort),
  });
  if (plan.workers > 1) workers = await startWorkers(config, { count: plan.workers, url: store.url, metrics, log });
  // The generation open since the start was opened before any worker listened: theirs is the next.
  if (workers && config.sealFrom === "memory") await sealer.openGeneration();
  if (workers) ingestPort = workers.port;

  // In the order each needs the ones before it; stop.ts halts them all, then stops them in reverse
  // (the ingest listener first, storage last), each within its own share of SHUTDOWN_TIMEOUT_MS.
  services = [
    store,
    // Ended before storage stops its postmaster; no halt(): one that dies while the buffer drains is started again.
    ...(supervisor ? [supervisor] : []),
    flusher, // its connections
    sources, // their notifications, and the tokens'
    tokens,
    // Halted at the stop's start (between two moves, a move being one statement), waited for once the drain is over.
    background("sealer", sealer),
    background("merge", merger), // halted at the start: a running merge stops between two runs (a run is one transaction)
    background("retention", retention), // halted at the start: a running sweep stops between two statements
    management,
    tail,
    decodeWorker,
    buffer, // drained into PostgreSQL, or into a spill file
    ...(ingest ? [ingest] : []),
    // Stopped first: each worker drains its own buffer into PostgreSQL (or its spill folder) while storage still runs.
    ...(workers ? [workers] : []),
  ];
  return {
    ...{ store, flusher, ring, metrics, uncaughtErrors, tail, retention, sealer, merger, workers },
    apiToken: tokens.apiToken,
    spilled: buffer.spilled,
    apiUrl: management.url,
    ingestUrl: ingest?.url ?? listenerUrl(config.ingestHost, ingestPort),
    ingested: ingest?.ingested ?? (() => ({ requests: 0, events: 0 })),
    // Exit 0 only when no worker left anything behind either (each says how many it spilled).
    stop: () => stopAll(services, config.shutdownTimeoutMs).then(() => buffer.drained && !workers?.leftBehind),
  };
}

/** An ingest worker's memory path: its commits handed to seal threads of its own (SEAL_WORKERS of them), stopped as a service. */
function startWorkerStaging(
  config: Config,
  { url, flusher, memory }: { url: string; flusher: Flusher; memory: { hold(bytes: number): () => void } },
): Service & { staging: Staging } {
  const pool = new SealPool(Math.max(1, config.sealWorkers), url, BLOCK_EVENTS, config.sealBuildersMaxBytes);
  const { staging, unsubscribe } = stageCommits(
    pool,
    (listener) => flusher.subscribe(listener),
    (bytes) => memory.hold(bytes),
  );
  return {
    name: "seal threads",
    staging,
    async stop(deadline) {
      unsubscribe();
      await pool.close(deadline);
    },
  };
}
