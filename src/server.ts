// Builds a running logpond from a Config: storage → source cache → spill replay → ring + flusher →
// both listeners. `main.ts` adds the banner and signals; tests start it in-process on port 0.
// stop() is bounded by SHUTDOWN_TIMEOUT_MS whatever clients and PostgreSQL do (CONTRACT §4).
import { hostname } from "node:os";
import { Elysia } from "elysia";
import { Flusher, type HeldBatch } from "./buffer/flusher";
import { Ring, RING_COST_FACTOR, ringMaxBytes } from "./buffer/ring";
import { replaySpills, writeSpill } from "./buffer/spill";
import type { Config } from "./config";
import { loadApiToken, type ApiToken } from "./http/apitoken";
import { digest } from "./http/auth";
import { errorHandler } from "./http/errors";
import { health } from "./http/health";
import { assertPortsFree, EXCLUSIVE } from "./http/ports";
import { acceptRequest, CORS_ORIGIN, type IngestDeps } from "./ingest/accept";
import { InFlight } from "./ingest/inflight";
import { acceptLoki } from "./ingest/loki";
import { acceptOtlp } from "./ingest/otlp";
import { GcPacer } from "./ingest/gcpace";
import { DecodeWorker, OFFLOAD_FROM_BYTES } from "./ingest/offload";
import { Metrics } from "./metrics";
import { SourceCache } from "./sources/cache";
import { sourceRoutes } from "./sources/routes";
import { createSourceService } from "./sources/service";
import { RateLimiter } from "./ingest/ratelimit";
import { startRetention, type Retention } from "./retention/scheduler";
import { openFlushConnection } from "./store/copy";
import { openFlushStreams } from "./store/flush-thread";
import { openStore, type Store } from "./store/db";
import { DAY_MS, ensurePartitions } from "./store/partitions";
import { type Sealer, startSealer } from "./store/sealer";
import { tupleCount } from "./codec/tuples";
import { DAYS_AHEAD } from "./retention/sweep";
import { queryRoutes } from "./query/routes";
import { TailHub } from "./tail/hub";
import { tailRoutes } from "./tail/routes";
import { webRoutes } from "./web/routes";
import { within } from "./timers";

export interface Logpond {
  readonly apiUrl: string;
  readonly ingestUrl: string;
  readonly apiToken: ApiToken;
  readonly store: Store;
  readonly flusher: Flusher;
  readonly ring: Ring;
  readonly metrics: Metrics;
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
  readonly spilled: { events: number; file?: string };
}

/** CORS preflight for browser clients (@logtail/browser): the token is the credential, so any origin. */
const PREFLIGHT_HEADERS = {
  ...CORS_ORIGIN,
  "access-control-allow-methods": "POST, OPTIONS",
  "access-control-allow-headers": "Authorization, Content-Type, Content-Encoding",
  "access-control-max-age": "86400",
};

/** What the process may use beside a full buffer (issue 10: peak RSS ≤ BUFFER_MAX_BYTES + 200 MiB). */
const HEADROOM_BYTES = 200 * 1024 * 1024;

/**
 * RSS less the ring's free slabs past BUFFER_MAX_BYTES + this → the GC pacer's collections are
 * full ones. Half of the headroom: the other half is for the garbage of the next PACE_BYTES of bodies.
 */
const GC_FULL_ABOVE_BUFFER_BYTES = HEADROOM_BYTES / 2;
/** The whole RSS past BUFFER_MAX_BYTES + this → full collections may come three times as often (gcpace.ts). */
const GC_PRESSED_ABOVE_BUFFER_BYTES = (HEADROOM_BYTES * 3) / 4;
/** How often the GC pacer reads the RSS between requests (admission uses its last reading). */
const RSS_SAMPLE_MS = 50;

export function managementApp(deps: {
  store: Store;
  metrics: Metrics;
  ring: Ring;
  flusher: Flusher;
  cache: SourceCache;
  inFlight?: InFlight;
  retention?: Retention;
  sealer: Sealer;
  routes: Parameters<typeof sourceRoutes>[0];
  read: { tail: TailHub; queryTimeoutMs: number; tailLimits: { maxRows: number; maxBytes: number } };
  web: Awaited<ReturnType<typeof webRoutes>>;
  log: (line: string) => void;
}) {
  const reading = { sql: deps.store.sql, apiTokenDigest: deps.routes.apiTokenDigest };
  return (
    new Elysia({ name: "logpond/management" })
      .use(errorHandler(deps.log))
      .use(health(() => deps.store.ping()))
      .get(
        "/metrics",
        () =>
          new Response(
            deps.metrics.render(
              {
                logpond_buffer_events: { help: "Events held in memory (waiting or being written).", value: deps.ring.heldEvents },
                logpond_buffer_bytes: { help: "Approximate bytes held in memory.", value: deps.ring.heldBytes },
                logpond_ingest_inflight_bytes: {
                  help: "Memory charged to requests being decoded (INGEST_INFLIGHT_MAX_BYTES).",
                  value: deps.inFlight?.bytes ?? 0,
                },
                logpond_flush_streams_busy: { help: "COPY streams writing now.", value: deps.flusher.streamsBusy },
                logpond_sources: { help: "Sources known to ingestion.", value: deps.cache.size },
                logpond_storage_partitions: {
                  help: "log_blocks partitions (daily ones and the default), as of the last retention sweep.",
                  value: deps.retention?.last?.partitions ?? 0,
                },
                logpond_storage_oldest_event_timestamp_seconds: {
                  help: "dt of the oldest stored event (Unix seconds; 0: none), as of the last retention sweep.",
                  value: (deps.retention?.last?.oldestEvent?.getTime() ?? 0) / 1000,
                },
                logpond_process_resident_bytes: { help: "Resident memory of the process (RSS).", value: process.memoryUsage.rss() },
                logpond_process_heap_bytes: { help: "JavaScript heap in use.", value: process.memoryUsage().heapUsed },
                logpond_tail_streams: { help: "Live-tail streams open.", value: deps.read.tail.size },
                logpond_sealer_last_pass_timestamp_seconds: {
                  help: "When the sealer last finished a pass (Unix seconds; 0: none yet).",
                  value: deps.sealer.lastPassAt / 1000,
                },
              },
              {
                counters: {
                  logpond_sealer_events_sealed_total: {
                    help: "Events the sealer moved from the hot tier into compressed blocks.",
                    value: deps.sealer.totals.sealed,
                  },
                  logpond_sealer_events_dropped_total: {
                    help: "Hot rows the sealer dropped instead (past their source's retention, or of a deleted source).",
                    value: deps.sealer.totals.moved - deps.sealer.totals.sealed,
                  },
                  logpond_sealer_blocks_written_total: { help: "Blocks the sealer wrote.", value: deps.sealer.totals.blocks },
                  logpond_sealer_partitions_dropped_total: {
                    help: "Sealed hot-tier partitions dropped (their space given back).",
                    value: deps.sealer.totals.dropped,
                  },
                  logpond_sealer_closes_busy_total: {
                    help: "Closes of the open hot generation that did not get their locks in time (a long transaction on log_hot holds them off).",
                    value: deps.sealer.totals.closesBusy,
                  },
                  logpond_tail_batches_read_back_total: {
                    help: "Committed batches the live tail read back from PostgreSQL (another instance's, or ours when its NOTIFY came first).",
                    value: deps.read.tail.readBack,
                  },
                },
                sourceExists: (id) => deps.cache.has(id),
              },
            ),
            { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } },
          ),
      )
      // The page first: the API plugins' token hooks are scoped, so they apply to routes added after them.
      .use(deps.web)
      .use(tailRoutes({ ...reading, hub: deps.read.tail, limits: deps.read.tailLimits, log: deps.log }))
      .use(sourceRoutes(deps.routes))
      .use(queryRoutes({ ...reading, queryTimeoutMs: deps.read.queryTimeoutMs, metrics: deps.metrics }))
  );
}

export function ingestApp(deps: IngestDeps & { store: Store; log: (line: string) => void }) {
  return (
    new Elysia({ name: "logpond/ingest" })
      .use(errorHandler(deps.log))
      .use(health(() => deps.store.ping()))
      .post("/", ({ request }) => acceptRequest(request, deps), { parse: "none" })
      .options("/", () => new Response(null, { status: 204, headers: PREFLIGHT_HEADERS }))
      // Other shippers' protocols, on the same path from the token to the ring (README, Shippers).
      .post("/v1/logs", ({ request }) => acceptOtlp(request, deps), { parse: "none" })
      .options("/v1/logs", () => new Response(null, { status: 204, headers: PREFLIGHT_HEADERS }))
      .post("/loki/api/v1/push", ({ request }) => acceptLoki(request, deps), { parse: "none" })
  );
}

export async function startLogpond(config: Config, log: (line: string) => void): Promise<Logpond> {
  await assertPortsFree(config.host, { API_PORT: config.apiPort, INGEST_PORT: config.ingestPort });
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
  const cache = new SourceCache();
  await cache.loadAll(store.db);
  const following = await cache.follow(store.sql, store.db, log);

  // Today's and the next days' block partitions exist before the first seal (the sweep keeps them ahead).
  await ensurePartitions(store.sql, new Date(Date.now() - DAY_MS), new Date(Date.now() + DAYS_AHEAD * DAY_MS), log);
  const ringBytes = ringMaxBytes(config.bufferMaxBytes);
  const ring = new Ring({ maxEvents: config.bufferMaxEvents, maxBytes: ringBytes, chunkMaxEvents: config.flushMaxEvents });
  const streams = openFlushStreams(store.url, config.flushTimeoutMs, config.flushStreams);
  const flusher = new Flusher(ring, streams, {
    intervalMs: config.flushIntervalMs,
    maxEvents: config.flushMaxEvents,
    eager: config.ingestAck === "durable",
    metrics,
    log,
  });
  flusher.start();
  // What an earlier stop could not write goes in before ingestion opens, on a connection of its
  // own; an entry PostgreSQL refuses for its data takes the flusher's dead-letter path.
  const replay = openFlushConnection(store.url, config.flushTimeoutMs);
  try {
    await replaySpills(
      config.dataDir,
      replay,
      async (entry) => {
        // Back through the ring, which sets ids anew (over any the tuples had).
        for (const rows of entry.rows) ring.push({ rows, events: tupleCount(rows), bytes: rows.length, seq: 0 });
        await flusher.flush();
      },
      log,
    );
  } finally {
    await replay.close();
  }
  const sealer = startSealer({ sql: store.sql, intervalMs: config.sealIntervalMs, log });
  const retention = startRetention({
    sql: store.sql,
    intervalMs: config.retentionSweepIntervalMs,
    flush: () => flusher.flush(),
    metrics,
    log,
  });
  const tail = new TailHub(store.sql, { heartbeatMs: config.tailHeartbeatMs, log, flushing: () => flusher.streamsBusy > 0 });
  await tail.start();
  flusher.subscribe((batch) => tail.committed(batch));
  // Paced by what the flusher wrote too, for rows in buffers of their own (durable requests, rows
  // over 1 MiB, replayed spills): when clients stop, the buffer drains with no request to pace the
  // collector, and such chunks piled up (bench/rss.ts, json-100 realistic before the slabs: VmHWM
  // 389–410 MiB under load, 494–503 MiB through the drain). Rows in the ring's slabs are no
  // garbage; counting them too cost @logtail/node bodies 10% of the main thread in collections.
  const gcPacer = new GcPacer(config.bufferMaxBytes + GC_FULL_ABOVE_BUFFER_BYTES, config.bufferMaxBytes + GC_PRESSED_ABOVE_BUFFER_BYTES, () => ({
    rss: process.memoryUsage.rss(),
    spare: ring.spareBytes,
  }));
  flusher.subscribe((batch) => {
    let bytes = 0;
    for (const part of batch.rows) if (!(part.buffer instanceof SharedArrayBuffer)) bytes += part.byteLength;
    if (bytes > 0) gcPacer.handled(bytes);
  });

  const apiToken = loadApiToken(config);
  let accepting = true;
  let ingestingHost = "";
  const decodeWorker = new DecodeWorker();
  // The room requests being decoded may take: what BUFFER_MAX_BYTES + 200 MiB leaves beside what
  // the ring costs, and for a big request (a decode thread's) beside another big one, beside the
  // whole process's RSS at the last reading when that is more (garbage not yet collected, threads'
  // heaps, allocators' free pages). Requests in flight are in that RSS and charged too: the double
  // count is the margin for the reading's age (≤ RSS_SAMPLE_MS). 4 MB JSON bodies from 64
  // connections (bench/rss.ts json-6400) peaked at 531–532 MiB without the RSS, 376–450 with it,
  // at 24–31k events/s against 20–21k. Bodies of tens of MB can still pass the bound: a big one
  // alone among big ones is judged by the ring only (README, Known gaps). Small requests are judged by the ring only: by the RSS, one big body's
  // decoding refused the small batches of every other client (test/reliability/hostile-load.test.ts).
  const processBound = config.bufferMaxBytes + HEADROOM_BYTES;
  const ringCost = () => Math.max(ring.heldBytes * RING_COST_FACTOR, ring.memoryBytes);
  const inFlight = new InFlight(
    config.ingestInflightMaxBytes,
    () => processBound - ringCost(),
    () => processBound - Math.max(ringCost(), gcPacer.rssBytes),
    OFFLOAD_FROM_BYTES,
  );

  const ingest = ingestApp({
    cache,
    ring,
    flusher,
    metrics,
    store,
    log,
    limits: {
      maxBodyBytes: config.ingestMaxBodyBytes,
      maxDecompressedBytes: config.ingestMaxDecompressedBytes,
      maxEventBytes: config.ingestMaxEventBytes,
      maxDepth: config.ingestMaxDepth,
      maxEventsPerRequest: config.ingestMaxEventsPerRequest,
      bufferMaxEvents: config.bufferMaxEvents,
      ringMaxBytes: ringBytes,
    },
    inFlight,
    decodeWorker,
    gcPacer,
    ackMode: config.ingestAck,
    durableTimeoutMs: config.durableTimeoutMs,
    rateLimiter: new RateLimiter(config.ingestRateLimit),
    accepting: () => accepting,
  }).listen({
    ...EXCLUSIVE,
    hostname: config.host,
    port: config.ingestPort,
    // Bun's own cap would answer a large Content-Length with a bare 413 before our handler runs;
    // ours (ingest/body.ts) checks the header first and counts streamed bytes, so Bun's is lifted.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
  });
  ingestingHost = publicIngestHost(config, ingest.server!.port!);

  const management = managementApp({
    store,
    metrics,
    ring,
    flusher,
    cache,
    inFlight,
    retention,
    sealer,
    log,
    read: { tail, queryTimeoutMs: config.queryTimeoutMs, tailLimits: { maxRows: config.tailQueueMaxRows, maxBytes: config.tailQueueMaxBytes } },
    web: await webRoutes(),
    routes: {
      service: createSourceService(store.db, cache, (id) => {
        retention.kick();
        tail.sourceDeleted(id);
      }),
      apiTokenDigest: digest(apiToken.token),
      ingestingHost: () => ingestingHost,
    },
  }).listen({ ...EXCLUSIVE, hostname: config.host, port: config.apiPort, maxRequestBodySize: 1024 * 1024 });

  const url = (port: number | undefined) => `http://${formatHost(config.host)}:${port}`;
  const spilled: { events: number; file?: string } = { events: 0 };
  const spill = (held: HeldBatch[]) => {
    const events = held.reduce((sum, batch) => sum + batch.events, 0);
    try {
      spilled.file = writeSpill(config.dataDir, held);
      spilled.events = events;
      log(`shutdown: PostgreSQL did not take ${events} buffered events before SHUTDOWN_TIMEOUT_MS; spilled to ${spilled.file}, written at the next start`);
    } catch (error) {
      metrics.eventsLost += events;
      log(`shutdown: LOST ${events} buffered events: PostgreSQL did not take them and the spill file failed (${(error as Error).message})`);
    }
  };
  const rssSampler = setInterval(() => gcPacer.sample(), RSS_SAMPLE_MS);
  rssSampler.unref();

  return {
    spilled,
    apiUrl: url(management.server!.port),
    ingestUrl: url(ingest.server!.port),
    apiToken,
    store,
    flusher,
    ring,
    metrics,
    tail,
    retention,
    sealer,
    async stop() {
      accepting = false;
      clearInterval(rssSampler);
      const deadline = Date.now() + config.shutdownTimeoutMs;
      const left = () => Math.max(0, deadline - Date.now());
      const sweepStopped = retention.stop(); // aborts a running sweep between two statements
      const sealStopped = sealer.stop(); // aborts between two moves; a move is one statement
      // In-flight requests get a third of the time to finish (their events land in the ring);
      // then slow uploads are cut off, so a client cannot hold the stop.
      const finished = await within(ingest.server!.stop(false), config.shutdownTimeoutMs / 3);
      if (!finished) {
        log("shutdown: requests still uploading were cut off");
        await within(ingest.server!.stop(true), 1_000);
      }
      let drained = await flusher.drain(Math.max(0, left() - Math.min(SPILL_RESERVE_MS, config.shutdownTimeoutMs / 4)));
      if (!drained) {
        const held = flusher.handOver();
        // Nothing held after all (the last batches committed as the deadline came): a clean stop.
        if (held.length === 0) drained = true;
        else spill(held);
      }
      decodeWorker.close();
      await within(tail.stop(), 1_000);
      await within(management.server!.stop(true), 1_000);
      await within(sweepStopped, Math.max(100, left() - 1_000));
      await within(sealStopped, Math.max(100, left() - 1_000));
      await within(
        following.unlisten().catch(() => {}),
        1_000,
      );
      await within(Promise.allSettled(streams.map((stream) => stream.close())), 1_000);
      // A frozen PostgreSQL must not hold the stop past its deadline: an embedded one left running
      // is stopped by the next start.
      await within(store.close(), Math.max(1_000, left()));
      return drained;
    },
  };
}

/** Time kept back from the drain for writing the spill file and closing connections (at most a quarter). */
const SPILL_RESERVE_MS = 2_000;

/**
 * `ingesting_host`: PUBLIC_INGEST_URL without its scheme; else HOST:port, where a wildcard bind
 * (0.0.0.0, ::) becomes this machine's hostname, since clients cannot connect to a wildcard.
 */
export function publicIngestHost(config: Config, port: number): string {
  if (config.publicIngestUrl) return config.publicIngestUrl.replace(/^https?:\/\//, "");
  const wildcard = config.host === "0.0.0.0" || config.host === "::" || config.host === "[::]";
  return `${wildcard ? hostname() : formatHost(config.host)}:${port}`;
}

function formatHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
