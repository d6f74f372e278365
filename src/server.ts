// Builds a running logpond from a Config: storage → source cache → ring + flusher → both
// listeners. `main.ts` adds the banner and signals; tests start it in-process on port 0.
import { Elysia } from "elysia";
import { Flusher } from "./buffer/flusher";
import { Ring } from "./buffer/ring";
import type { Config } from "./config";
import { loadApiToken } from "./http/apitoken";
import { digest } from "./http/auth";
import { errorHandler } from "./http/errors";
import { health } from "./http/health";
import { acceptRequest, type IngestDeps } from "./ingest/accept";
import { Metrics } from "./metrics";
import { SourceCache } from "./sources/cache";
import { sourceRoutes } from "./sources/routes";
import { createSourceService } from "./sources/service";
import { RateLimiter } from "./ingest/ratelimit";
import { startRetention, type Retention } from "./retention/scheduler";
import { openFlushConnection } from "./store/copy";
import { openStore, type Store } from "./store/db";
import { DAY_MS, ensurePartitions } from "./store/partitions";
import { DAYS_AHEAD } from "./retention/sweep";
import { queryRoutes } from "./query/routes";
import { TailHub } from "./tail/hub";
import { tailRoutes } from "./tail/routes";
import { webRoutes } from "./web/routes";

export interface Logpond {
  readonly apiUrl: string;
  readonly ingestUrl: string;
  readonly apiToken: string;
  readonly apiTokenOrigin: string;
  readonly store: Store;
  readonly flusher: Flusher;
  readonly ring: Ring;
  readonly metrics: Metrics;
  readonly tail: TailHub;
  /** Stop accepting, drain the buffer, close storage. Resolves true when nothing was left behind. */
  stop(): Promise<boolean>;
}

export function managementApp(deps: {
  store: Store;
  metrics: Metrics;
  ring: Ring;
  flusher: Flusher;
  cache: SourceCache;
  retention?: Retention;
  routes: Parameters<typeof sourceRoutes>[0];
  read: { tail: TailHub; queryTimeoutMs: number; tailLimits: { maxRows: number; maxBytes: number } };
  web: Awaited<ReturnType<typeof webRoutes>>;
  log: (line: string) => void;
}) {
  const reading = { sql: deps.store.sql, apiTokenDigest: deps.routes.apiTokenDigest };
  return new Elysia({ name: "logpond/management" })
    .use(errorHandler(deps.log))
    .use(health(() => deps.store.ping()))
    .get(
      "/metrics",
      () =>
        new Response(
          deps.metrics.render({
            logpond_buffer_events: { help: "Events held in memory (waiting or being written).", value: deps.ring.heldEvents },
            logpond_buffer_bytes: { help: "Approximate bytes held in memory.", value: deps.ring.heldBytes },
            logpond_flush_streams_busy: { help: "COPY streams writing now.", value: deps.flusher.streamsBusy },
            logpond_sources: { help: "Sources known to ingestion.", value: deps.cache.size },
            logpond_storage_partitions: { help: "log_events partitions (daily ones and the default), as of the last retention sweep.", value: deps.retention?.last?.partitions ?? 0 },
            logpond_storage_oldest_event_timestamp_seconds: {
              help: "dt of the oldest stored event (Unix seconds; 0: none), as of the last retention sweep.",
              value: (deps.retention?.last?.oldestEvent?.getTime() ?? 0) / 1000,
            },
            logpond_process_resident_bytes: { help: "Resident memory of the process (RSS).", value: process.memoryUsage.rss() },
            logpond_process_heap_bytes: { help: "JavaScript heap in use.", value: process.memoryUsage().heapUsed },
            logpond_tail_streams: { help: "Live-tail streams open.", value: deps.read.tail.size },
            logpond_tail_batches_read_back: { help: "Committed batches the live tail read back from PostgreSQL (another instance's, or ours when its NOTIFY came first).", value: deps.read.tail.readBack },
          }),
          { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } },
        ),
    )
    // The page first: the API plugins' token hooks are scoped, so they apply to routes added after them.
    .use(deps.web)
    .use(tailRoutes({ ...reading, hub: deps.read.tail, limits: deps.read.tailLimits, log: deps.log }))
    .use(sourceRoutes(deps.routes))
    .use(queryRoutes({ ...reading, queryTimeoutMs: deps.read.queryTimeoutMs }));
}

export function ingestApp(deps: IngestDeps & { store: Store; log: (line: string) => void }) {
  return new Elysia({ name: "logpond/ingest" })
    .use(errorHandler(deps.log))
    .use(health(() => deps.store.ping()))
    .post("/", ({ request }) => acceptRequest(request, deps), { parse: "none" });
}

export async function startLogpond(config: Config, log: (line: string) => void): Promise<Logpond> {
  const store = await openStore(config, log);
  const metrics = new Metrics();
  const cache = new SourceCache();
  await cache.loadAll(store.db);
  const following = await cache.follow(store.sql, store.db, log);

  // Today's and the next days' partitions exist before the first COPY (the sweep keeps them ahead).
  await ensurePartitions(store.sql, new Date(Date.now() - DAY_MS), new Date(Date.now() + DAYS_AHEAD * DAY_MS), log);
  const ring = new Ring({ maxEvents: config.bufferMaxEvents, maxBytes: config.bufferMaxBytes });
  const streams = Array.from({ length: config.flushStreams }, () => openFlushConnection(store.url, config.flushTimeoutMs));
  const flusher = new Flusher(ring, streams, {
    intervalMs: config.flushIntervalMs,
    maxEvents: config.flushMaxEvents,
    eager: config.ingestAck === "durable",
    metrics,
    log,
  });
  flusher.start();
  const tail = new TailHub(store.sql, { heartbeatMs: config.tailHeartbeatMs, log, flushing: () => flusher.streamsBusy > 0 });
  await tail.start();
  flusher.subscribe((batch) => tail.committed(batch));
  const retention = startRetention({
    sql: store.sql,
    intervalMs: config.retentionSweepIntervalMs,
    flush: () => flusher.flush(),
    metrics,
    log,
  });

  const { token: apiToken, origin: apiTokenOrigin } = loadApiToken(config);
  let accepting = true;
  let ingestingHost = `${config.host}:${config.ingestPort}`;

  const ingest = ingestApp({
    cache, ring, flusher, metrics, store, log,
    limits: {
      maxBodyBytes: config.ingestMaxBodyBytes,
      maxDecompressedBytes: config.ingestMaxDecompressedBytes,
      maxEventBytes: config.ingestMaxEventBytes,
      maxDepth: config.ingestMaxDepth,
    },
    ackMode: config.ingestAck,
    durableTimeoutMs: config.durableTimeoutMs,
    rateLimiter: new RateLimiter(config.ingestRateLimit),
    accepting: () => accepting,
  }).listen({
    hostname: config.host,
    port: config.ingestPort,
    // Bun's own cap would answer a large Content-Length with a bare 413 before our handler runs;
    // ours (ingest/body.ts) checks the header first and counts streamed bytes, so Bun's is lifted.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
  });
  ingestingHost = `${formatHost(config.host)}:${ingest.server!.port}`;

  const management = managementApp({
    store, metrics, ring, flusher, cache, retention, log,
    read: { tail, queryTimeoutMs: config.queryTimeoutMs, tailLimits: { maxRows: config.tailQueueMaxRows, maxBytes: config.tailQueueMaxBytes } },
    web: await webRoutes(),
    routes: {
      service: createSourceService(store.db, cache, () => retention.kick()),
      apiTokenDigest: digest(apiToken),
      ingestingHost: () => ingestingHost,
    },
  }).listen({ hostname: config.host, port: config.apiPort, maxRequestBodySize: 1024 * 1024 });

  const url = (port: number | undefined) => `http://${formatHost(config.host)}:${port}`;
  return {
    apiUrl: url(management.server!.port),
    ingestUrl: url(ingest.server!.port),
    apiToken,
    apiTokenOrigin,
    store,
    flusher,
    ring,
    metrics,
    tail,
    async stop() {
      accepting = false;
      await retention.stop(); // aborts a running sweep between two statements
      // Finish in-flight requests (their events land in the ring), then write the ring out.
      await ingest.server!.stop(false);
      const drained = await flusher.drain(config.shutdownTimeoutMs);
      if (!drained) log(`shutdown: ${ring.heldEvents} buffered events could not be written before SHUTDOWN_TIMEOUT_MS`);
      await tail.stop();
      await management.server!.stop(true);
      await following.unlisten().catch(() => {});
      await Promise.allSettled(streams.map((stream) => stream.close()));
      await store.close();
      return drained;
    },
  };
}

function formatHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
