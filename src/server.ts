// Builds a running logpond from a Config, in the order data flows: storage → sources → ring +
// flusher (spilled events replayed) → retention, tail → memory → sealer (its garbage paced) → both listeners. Each
// module builds itself from the Config and registers its own /metrics series; stop.ts stops them.
// `main.ts` adds the banner and signals; tests start it in-process on port 0.
import type { Flusher } from "./buffer/flusher";
import { startFlusher } from "./buffer/flusher";
import { openRing, type Ring } from "./buffer/ring";
import { keepSpillReserve } from "./buffer/reserve";
import { drainOnStop, replayInto, spillFolder, type Spilled } from "./buffer/spill";
import type { Config } from "./config";
import { loadApiToken, type ApiToken } from "./http/apitoken";
import { digest } from "./http/auth";
import { assertPortsFree } from "./http/ports";
import { retentionGraceMs } from "./codec/reception";
import { DecodeWorker } from "./ingest/offload";
import { RateLimiter } from "./ingest/ratelimit";
import { ingestSeries } from "./ingest/series";
import { listenerUrl, listenIngest, listenManagement, publicIngestHost } from "./listeners";
import { startMemory } from "./memory/budget";
import { Metrics } from "./metrics";
import { ensurePartitionsAhead, startRetention, type Retention } from "./retention/scheduler";
import { openSourceCache } from "./sources/cache";
import { createSourceService } from "./sources/service";
import { openStore, type Store } from "./store/db";
import { type Sealer, startSealer } from "./store/sealer";
import { supervisorSeries } from "./store/supervisor";
import { closing, type Service, timeLeft } from "./service";
import { stopAll } from "./stop";
import { within } from "./timers";
import { startTail, type TailHub } from "./tail/hub";
import { openTokens } from "./tokens/service";
import { type UncaughtKind, uncaughtSeries } from "./uncaught";
import { webRoutes } from "./web/routes";

export { ingestApp, managementApp, publicIngestHost } from "./listeners";

export interface Logpond {
  readonly apiUrl: string;
  readonly ingestUrl: string;
  readonly apiToken: ApiToken;
  readonly store: Store;
  readonly flusher: Flusher;
  readonly ring: Ring;
  readonly metrics: Metrics;
  /** logpond_uncaught_errors_total, counted by the handlers main.ts installs (uncaught.ts). */
  readonly uncaughtErrors: { inc(kind: UncaughtKind): void };
  readonly tail: TailHub;
  /** Retention sweeps: at start, every RETENTION_SWEEP_INTERVAL_MS, and after a deletion. */
  readonly retention: Retention;
  /** Moves committed events into compressed blocks every SEAL_INTERVAL_MS. */
  readonly sealer: Sealer;
  /**
   * Stop accepting, drain the buffer, close storage. Resolves true when nothing was left behind;
   * false when some events went to a spill file (`spilled` says how many) or were lost.
   */
  stop(): Promise<boolean>;
  /** After stop(): events written to the spill file, and the file. */
  readonly spilled: Spilled;
}

export async function startLogpond(config: Config, log: (line: string) => void): Promise<Logpond> {
  await assertPortsFree({
    API_PORT: { host: config.apiHost, variable: config.apiHost === config.host ? "HOST" : "API_HOST", port: config.apiPort },
    INGEST_PORT: { host: config.ingestHost, variable: config.ingestHost === config.host ? "HOST" : "INGEST_HOST", port: config.ingestPort },
  });
  const store = await openStore(config, log);
  try {
    return await startOn(store, config, log);
  } catch (error) {
    // The embedded PostgreSQL runs in a process group of its own: a failed start must stop it.
    await store.close();
    throw error;
  }
}

async function startOn(store: Store, config: Config, log: (line: string) => void): Promise<Logpond> {
  const metrics = new Metrics();
  const uncaughtErrors = uncaughtSeries(metrics);
  const sources = await openSourceCache(store, metrics, log);
  await ensurePartitionsAhead(store.sql, log);
  const ring = openRing(config, metrics);
  const flusher = startFlusher(config, store.url, ring, metrics, log);
  await replayInto(config, store.url, ring, flusher, log); // what an earlier stop spilled, before ingestion opens
  keepSpillReserve(config, spillFolder(config.dataDir), metrics, log); // room for the next one, even on a full disk
  if (store.supervisor) {
    supervisorSeries(store.supervisor, metrics);
    store.supervisor.onRestart(() => flusher.retryNow());
  }
  // Past this much failing, nothing more is acknowledged from memory (503) until a flush succeeds.
  const storageDown = () => flusher.failingMs() > config.ingestRefuseAfterFlushFailingMs;
  const unready = async () =>
    (await store.unready()) ??
    (storageDown() ? `Storage is failing: no flush has succeeded for ${(flusher.failingMs() / 1000).toFixed(1)} s; ingestion answers 503` : undefined);
  const retention = startRetention(config, { sql: store.sql, flush: () => flusher.flush(), metrics, log });
  const tail = await startTail(store.sql, config, flusher, metrics, log);
  const decodeWorker = new DecodeWorker();
  const memory = startMemory(config, ring, flusher, metrics, decodeWorker.width);
  const sealer = startSealer(config, {
    sql: store.sql,
    log,
    metrics,
    handled: (bytes) => memory.gcPacer.handled(bytes),
    settled: () => flusher.settled(),
    hold: (bytes) => memory.hold(bytes),
  });

  const apiToken = loadApiToken(config);
  const tokens = await openTokens(store, digest(apiToken.token), tail, log);
  let accepting = true;
  const ingest = listenIngest(config, {
    cache: sources.cache,
    metrics: ingestSeries(metrics, (id) => sources.cache.has(id)), // a deleted source's series go at the next scrape
    ...{ ring, flusher, store, log, decodeWorker, gate: memory.gate, gcPacer: memory.gcPacer },
    limits: {
      maxBodyBytes: config.ingestMaxBodyBytes,
      maxDecompressedBytes: config.ingestMaxDecompressedBytes,
      bodyTimeoutMs: config.ingestBodyTimeoutMs,
      maxEventBytes: config.ingestMaxEventBytes,
      maxDepth: config.ingestMaxDepth,
      maxEventsPerRequest: config.ingestMaxEventsPerRequest,
      bufferMaxEvents: config.bufferMaxEvents,
      ringMaxBytes: ring.maxBytes,
    },
    ackMode: config.ingestAck,
    durableTimeoutMs: config.durableTimeoutMs,
    rateLimiter: new RateLimiter(config.ingestRateLimit),
    accepting: () => accepting,
    eventTimes: { maxFutureMs: config.ingestMaxFutureMs, retentionGraceMs: retentionGraceMs(config.retentionSweepIntervalMs, config.sealIntervalMs) },
    storageDown,
    unready,
  });
  const ingestingHost = publicIngestHost(config, ingest.server!.port!);
  const management = listenManagement(config, {
    store,
    metrics,
    log,
    unready,
    read: { tail, queryTimeoutMs: config.queryTimeoutMs, tailLimits: { maxRows: config.tailQueueMaxRows, maxBytes: config.tailQueueMaxBytes } },
    web: await webRoutes(),
    routes: {
      service: createSourceService(store.db, sources.cache, (id) => {
        retention.kick();
        tail.sourceDeleted(id);
      }),
      authenticate: tokens.authenticate,
      ingestingHost: () => ingestingHost,
    },
    tokens: tokens.service,
  });

  const buffer = drainOnStop(config, { flusher, log });
  // In the order each needs the ones before it; stop.ts stops them in reverse (the ingest listener
  // first, storage last), each within its own share of SHUTDOWN_TIMEOUT_MS.
  const services: Service[] = [
    // A frozen PostgreSQL must not hold the stop past its deadline: an embedded one left running
    // is stopped by the next start.
    { name: "storage", stop: (deadline) => within(store.close(), Math.max(1_000, timeLeft(deadline))).then(() => {}) },
    // Ends before storage stops its postmaster; has no halt(): a postmaster that dies while the buffer drains is started again.
    ...(store.supervisor ? [store.supervisor] : []),
    { name: "flush connections", stop: () => flusher.close(1_000) },
    // Both caches' listeners (sources, token revocations) stop together.
    closing("notifications", () => Promise.all([sources.unlisten(), tokens.unlisten()]).catch(() => {}), 1_000),
    // Halted at the stop's start (between two moves, a move being one statement), waited for once the drain is over.
    job("sealer", sealer),
    job("retention", retention), // halted at the start: a running sweep stops between two statements
    closing("management listener", () => management.server!.stop(true), 1_000),
    closing("tail", () => tail.stop(), 1_000),
    { name: "decode worker", stop: async () => decodeWorker.close() },
    buffer, // drained into PostgreSQL, or into a spill file
    {
      name: "ingest listener",
      halt: () => {
        accepting = false; // 503 from now on
      },
      // In-flight requests get a third of the time to finish (their events land in the ring);
      // then slow uploads are cut off, so a client cannot hold the stop.
      async stop() {
        if (await within(ingest.server!.stop(false), config.shutdownTimeoutMs / 3)) return;
        log("shutdown: requests still uploading were cut off");
        await within(ingest.server!.stop(true), 1_000);
      },
    },
  ];
  return {
    ...{ apiToken, store, flusher, ring, metrics, uncaughtErrors, tail, retention, sealer, spilled: buffer.spilled },
    apiUrl: listenerUrl(config.apiHost, management.server!.port),
    ingestUrl: listenerUrl(config.ingestHost, ingest.server!.port),
    stop: () => stopAll(services, config.shutdownTimeoutMs).then(() => buffer.drained),
  };
}

/** A background job (periodic.ts) in the stop: halted with the rest, then waited for until a second before the deadline (0.1 s at least). */
function job(name: string, periodic: { halt(): void; stop(deadline: number): Promise<void> }): Service {
  return {
    name,
    halt: periodic.halt,
    stop: (deadline) => periodic.stop(performance.now() + Math.max(100, timeLeft(deadline) - 1_000)),
  };
}
