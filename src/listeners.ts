// The two listeners: ingestion (INGEST_PORT: Better Stack's `/`, OTLP, Loki) and management
// (API_PORT: health, /metrics, the page, the live tail, sources, tokens, the query API), each on
// its own address (INGEST_HOST, API_HOST; both HOST unless set), and the host clients are told
// to send to.
import { hostname } from "node:os";
import { Elysia } from "elysia";
import type { Config } from "./config";
import { errorHandler } from "./http/errors";
import { health } from "./http/health";
import { EXCLUSIVE, SHARED } from "./http/ports";
import { type ConnectionSpreader, connectionSpreader } from "./cluster/connections";
import { acceptRequest, CORS_ORIGIN, ingestLimits, type IngestDeps } from "./ingest/accept";
import { acceptLoki } from "./ingest/loki";
import { acceptOtlp } from "./ingest/otlp";
import type { Metrics } from "./metrics";
import { queryRoutes } from "./query/routes";
import { sourceRoutes } from "./sources/routes";
import { tokenRoutes } from "./tokens/routes";
import { viewRoutes } from "./views/routes";
import { createViewService } from "./views/service";
import type { Store } from "./store/db";
import type { TailHub } from "./tail/hub";
import { tailRoutes } from "./tail/routes";
import { webRoutes } from "./web/routes";
import type { Flusher } from "./buffer/flusher";
import type { Ring } from "./buffer/ring";
import { retentionGraceMs } from "./codec/reception";
import type { Authenticate } from "./http/auth";
import type { DecodeWorker } from "./ingest/offload";
import { RateLimiter } from "./ingest/ratelimit";
import { ingestSeries } from "./ingest/series";
import type { Memory } from "./memory/budget";
import type { Registry } from "./metrics";
import { closing, type Service } from "./service";
import type { SourceCache } from "./sources/cache";
import { createSourceService } from "./sources/service";
import { ScanPool } from "./query/scan-pool";
import { within } from "./timers";
import type { TokenService } from "./tokens/service";

/** CORS preflight for browser clients (@logtail/browser): the token is the credential, so any origin. */
const PREFLIGHT_HEADERS = {
  ...CORS_ORIGIN,
  "access-control-allow-methods": "POST, OPTIONS",
  "access-control-allow-headers": "Authorization, Content-Type, Content-Encoding",
  "access-control-max-age": "86400",
};

export interface ManagementDeps {
  store: Store;
  metrics: Metrics;
  routes: Parameters<typeof sourceRoutes>[0];
  tokens: Parameters<typeof tokenRoutes>[0]["service"];
  read: { tail: TailHub; queryTimeoutMs: number; tailLimits: { maxRows: number; maxBytes: number }; scans?: ScanPool };
  web: Awaited<ReturnType<typeof webRoutes>>;
  log: (line: string) => void;
  /** Why logpond cannot take events now, for /ready (server.ts). */
  unready: () => Promise<string | undefined>;
}

export function managementApp(deps: ManagementDeps) {
  const reading = { sql: deps.store.sql, authenticate: deps.routes.authenticate };
  return (
    new Elysia({ name: "logpond/management" })
      .use(errorHandler(deps.log))
      .use(health(deps.unready))
      // Every module registered its own series (Metrics.gauge, .counter) when it was built.
      .get("/metrics", () => new Response(deps.metrics.render(), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } }))
      // The page needs no token; each API plugin checks its own routes' tokens (local hooks).
      .use(deps.web)
      .use(tailRoutes({ ...reading, hub: deps.read.tail, limits: deps.read.tailLimits, log: deps.log }))
      .use(sourceRoutes(deps.routes))
      .use(tokenRoutes({ service: deps.tokens, authenticate: deps.routes.authenticate }))
      .use(viewRoutes({ service: createViewService(deps.store.db), authenticate: deps.routes.authenticate }))
      .use(queryRoutes({ ...reading, queryTimeoutMs: deps.read.queryTimeoutMs, metrics: deps.metrics, scans: deps.read.scans }))
  );
}

export function ingestApp(deps: IngestDeps & Pick<ManagementDeps, "store" | "log" | "unready"> & { spreader?: ConnectionSpreader }) {
  const spreader = deps.spreader;
  return (
    new Elysia({ name: "logpond/ingest" })
      // Before any handler, so every answer (refusals too) may end its connection (cluster/connections.ts).
      .onRequest(({ request, server, set }) => {
        if (spreader?.request(server?.requestIP(request) ?? null)) set.headers.connection = "close";
      })
      .use(errorHandler(deps.log))
      .use(health(deps.unready))
      .post("/", ({ request }) => acceptRequest(request, deps), { parse: "none" })
      .options("/", () => new Response(null, { status: 204, headers: PREFLIGHT_HEADERS }))
      // Other shippers' protocols, on the same path from the token to the ring (README, Shippers).
      .post("/v1/logs", ({ request }) => acceptOtlp(request, deps), { parse: "none" })
      .options("/v1/logs", () => new Response(null, { status: 204, headers: PREFLIGHT_HEADERS }))
      .post("/loki/api/v1/push", ({ request }) => acceptLoki(request, deps), { parse: "none" })
  );
}

/** A listener as a service: where it is reached. */
export type Listener = Service & { readonly url: string; readonly port: number };

/** The ingest listener: a listener that counts what it took (the supervisor's per-worker series, cluster/worker.ts). */
export type IngestListener = Listener & { readonly ingested: () => { requests: number; events: number } };

/**
 * The ingest listener on INGEST_HOST:INGEST_PORT, its limits from the Config. Halted, it answers
 * 503; stopped, in-flight requests get a third of SHUTDOWN_TIMEOUT_MS to finish (their events land
 * in the ring), then slow uploads are cut off, so a client cannot hold the stop.
 */
export function startIngestListener(
  config: Config,
  deps: {
    sources: { cache: SourceCache };
    ring: Ring;
    flusher: Flusher & { storageDown(): boolean };
    memory: Pick<Memory, "gate" | "gcPacer">;
    decodeWorker: DecodeWorker;
    store: Store;
    metrics: Registry;
    log: (line: string) => void;
    ready: () => Promise<string | undefined>;
  },
): IngestListener {
  const { ring, flusher, store, log } = deps;
  let accepting = true;
  const series = ingestSeries(deps.metrics, (id) => deps.sources.cache.has(id)); // a deleted source's series go at the next scrape
  const spreader = connectionSpreader(config);
  const server = listenIngest(config, {
    cache: deps.sources.cache,
    ...{ ring, flusher, store, log, decodeWorker: deps.decodeWorker, gate: deps.memory.gate, gcPacer: deps.memory.gcPacer },
    metrics: series,
    ...(spreader && { spreader }),
    limits: ingestLimits(config, ring.maxBytes),
    ackMode: config.ingestAck,
    durableTimeoutMs: config.durableTimeoutMs,
    rateLimiter: new RateLimiter(config.ingestRateLimit),
    accepting: () => accepting,
    eventTimes: { maxFutureMs: config.ingestMaxFutureMs, retentionGraceMs: retentionGraceMs(config.retentionSweepIntervalMs, config.sealIntervalMs) },
    storageDown: flusher.storageDown,
    unready: deps.ready,
  }).server!;
  return {
    name: "ingest listener",
    url: listenerUrl(config.ingestHost, server.port),
    port: server.port!,
    ingested: () => series.totals(),
    halt() {
      accepting = false; // 503 from now on
    },
    async stop() {
      if (await within(server.stop(false), config.shutdownTimeoutMs / 3)) return;
      log("shutdown: requests still uploading were cut off");
      await within(server.stop(true), 1_000);
    },
  };
}

/**
 * The management listener on API_HOST:API_PORT: /metrics, health, the page, the live tail, sources
 * (a deletion kicks retention and ends the source's tail streams), tokens, the query API.
 */
export async function startManagementListener(
  config: Config,
  deps: {
    store: Store;
    sources: { cache: SourceCache };
    tokens: { service: TokenService; authenticate: Authenticate };
    tail: TailHub;
    retention: { kick(): void };
    metrics: Metrics;
    log: (line: string) => void;
    ready: () => Promise<string | undefined>;
    /** The host clients are told to send to (publicIngestHost). */
    ingestingHost: () => string;
  },
): Promise<Listener> {
  const { store, tail, tokens } = deps;
  // The query API's threads (query/scan-pool.ts), started by the first histogram that needs them.
  const scans = new ScanPool();
  const server = listenManagement(config, {
    store,
    metrics: deps.metrics,
    log: deps.log,
    unready: deps.ready,
    read: { tail, queryTimeoutMs: config.queryTimeoutMs, tailLimits: { maxRows: config.tailQueueMaxRows, maxBytes: config.tailQueueMaxBytes }, scans },
    web: await webRoutes(),
    routes: {
      service: createSourceService(store.db, deps.sources.cache, (id) => {
        deps.retention.kick();
        tail.sourceDeleted(id);
      }),
      authenticate: tokens.authenticate,
      ingestingHost: deps.ingestingHost,
    },
    tokens: tokens.service,
  }).server!;
  return {
    ...closing(
      "management listener",
      () => {
        scans.close();
        return server.stop(true);
      },
      1_000,
    ),
    url: listenerUrl(config.apiHost, server.port),
    port: server.port!,
  };
}

/** The ingest listener on INGEST_HOST:INGEST_PORT: shared with the other workers of its supervisor (which checked the port is free). */
function listenIngest(config: Config, deps: Parameters<typeof ingestApp>[0]) {
  return ingestApp(deps).listen({
    ...(config.workerIndex === undefined ? EXCLUSIVE : SHARED),
    hostname: config.ingestHost,
    port: config.ingestPort,
    // Bun's own cap would answer a large Content-Length with a bare 413 before our handler runs;
    // ours (ingest/body.ts) checks the header first and counts streamed bytes, so Bun's is lifted.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
  });
}

/** The management listener on API_HOST:API_PORT. */
function listenManagement(config: Config, deps: ManagementDeps) {
  // Bun's cap would answer a bare 413 with an empty body: bodies are capped where they are read (http/body.ts).
  return managementApp(deps).listen({ ...EXCLUSIVE, hostname: config.apiHost, port: config.apiPort, maxRequestBodySize: Number.MAX_SAFE_INTEGER });
}

/** A listener's URL as this process reaches it, from the address it binds. */
export function listenerUrl(host: string, port: number | undefined): string {
  return `http://${formatHost(host)}:${port}`;
}

/**
 * `ingesting_host`: PUBLIC_INGEST_URL without its scheme; else INGEST_HOST:port, where a wildcard
 * bind (0.0.0.0, ::) becomes this machine's hostname, since clients cannot connect to a wildcard.
 */
export function publicIngestHost(config: Config, port: number): string {
  if (config.publicIngestUrl) return config.publicIngestUrl.replace(/^https?:\/\//, "");
  const host = config.ingestHost;
  const wildcard = host === "0.0.0.0" || host === "::" || host === "[::]";
  return `${wildcard ? hostname() : formatHost(host)}:${port}`;
}

function formatHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
