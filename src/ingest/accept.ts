// The ingestion path for one request, hop by hop: authenticate → admission gate → body (capped,
// decompressed) → decode → encode (validate + normalise, all or nothing) → ring buffer. Returns
// the response; a refusal is a Rejection value turned into the contract's status and body here.
// 202 means: in the ring (buffered mode) or committed to PostgreSQL (durable mode).
import type { Chunk, Ring } from "../buffer/ring";
import type { Flusher } from "../buffer/flusher";
import type { AckMode } from "../config";
import { STATUS } from "../errors";
import { bearerToken } from "../http/auth";
import type { Metrics } from "../metrics";
import type { SourceCache } from "../sources/cache";
import { decompress, parseEncoding, readBody, type BodyLimits } from "./body";
import { decodeBody, parseContentType } from "./decode";
import { encodeEvents, type EncodeLimits } from "./encode";
import type { RateLimiter } from "./ratelimit";
import { isRejection, reject, REASONS, type Rejection } from "./rejections";

export interface IngestDeps {
  cache: SourceCache;
  ring: Ring;
  flusher: Flusher;
  metrics: Metrics;
  limits: BodyLimits & EncodeLimits;
  ackMode: AckMode;
  /** Durable mode: how long a request waits for its commit before it gets 503 instead. */
  durableTimeoutMs: number;
  rateLimiter: RateLimiter;
  accepting: () => boolean;
}

const ACCEPTED_INIT = { status: 202 };
const RETRY_AFTER_SECONDS = 1;

export async function acceptRequest(request: Request, deps: IngestDeps): Promise<Response> {
  const { cache, ring, metrics, limits } = deps;

  const token = bearerToken(request.headers.get("authorization"));
  if (token === undefined) return refuse(reject("missing_token", "Unauthorized"), metrics);
  const source = cache.lookup(token);
  if (source === undefined) return refuse(reject("invalid_token", "Unauthorized"), metrics);
  if (!deps.accepting()) return refuse(reject("shutting_down", "Service is shutting down; retry on another instance or later"), metrics);
  if (!ring.fits(1, 1)) return refuse(bufferFull(), metrics);
  const limiter = deps.rateLimiter;
  if (limiter.enabled) {
    const wait = limiter.wait(source.id);
    if (wait > 0) return refuse(reject("rate_limited", "Rate limit of this source exceeded (INGEST_RATE_LIMIT events per second); retry after the time in Retry-After", wait), metrics);
  }

  const format = parseContentType(request.headers.get("content-type"));
  if (isRejection(format)) return refuse(format, metrics);
  const encoding = parseEncoding(request.headers.get("content-encoding"));
  if (isRejection(encoding)) return refuse(encoding, metrics);

  const raw = await readBody(request, limits);
  if (isRejection(raw)) return refuse(raw, metrics);
  const body = await decompress(raw, encoding, limits.maxDecompressedBytes);
  if (isRejection(body)) return refuse(body, metrics);
  const events = decodeBody(body, format);
  if (isRejection(events)) return refuse(events, metrics);
  const encoded = encodeEvents(events, format, source.id, receptionTime(), limits);
  if (isRejection(encoded)) return refuse(encoded, metrics);

  const accepted = () => {
    metrics.requestsAccepted++;
    metrics.eventsReceived += encoded.count;
    metrics.bytesReceived += raw.length;
    return new Response(null, ACCEPTED_INIT);
  };
  if (encoded.count === 0) return accepted();
  if (limiter.enabled) limiter.spend(source.id, encoded.count);
  if (source.paused) {
    metrics.eventsDroppedPaused += encoded.count;
    return accepted();
  }

  // Deleted while this request was read (a slow upload): nothing of it may land after the purge.
  if (!cache.has(source.id)) return refuse(reject("invalid_token", "Unauthorized"), metrics);
  if (deps.ackMode === "buffered") {
    const rows = Buffer.from(encoded.rows);
    const chunk: Chunk = { rows, events: encoded.count, bytes: rows.length, seq: 0 };
    if (!ring.push(chunk)) return refuse(bufferFull(), metrics);
    deps.flusher.pushed();
    return accepted();
  }

  // Durable: answer when the flush holding these events has committed (group commit). Past the
  // deadline the chunk is abandoned; if the flusher already holds it, its answer decides.
  let settle!: (error?: Error) => void;
  const committed = new Promise<Error | undefined>((resolve) => (settle = resolve));
  const rows = Buffer.from(encoded.rows);
  const chunk: Chunk = { rows, events: encoded.count, bytes: rows.length, seq: 0, settle };
  if (!ring.push(chunk)) return refuse(bufferFull(), metrics);
  deps.flusher.pushed();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(resolve, deps.durableTimeoutMs, "late")));
  let outcome = await Promise.race([committed, late]);
  clearTimeout(timer);
  if (outcome === "late") {
    metrics.durableTimeouts++;
    outcome = ring.abandon(chunk) ? new Error("abandoned") : await committed;
  }
  if (outcome) return refuse(reject("storage_unavailable", "Storage did not commit this request in time (DURABLE_TIMEOUT_MS); nothing of it was or will be stored, retry later"), metrics);
  return accepted();
}

/** Now as ISO 8601, computed once per millisecond (requests in the same millisecond share it). */
let lastMs = 0;
let lastIso = "";
function receptionTime(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}

function bufferFull(): Rejection {
  return reject("buffer_full", "Ingestion buffer is full (BUFFER_MAX_EVENTS / BUFFER_MAX_BYTES); retry after a moment");
}

function refuse(rejection: Rejection, metrics: Metrics): Response {
  metrics.reject(rejection.reason);
  const status = STATUS[REASONS[rejection.reason]];
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (status === 401) headers["www-authenticate"] = "Bearer";
  if (status === 503 || status === 429) headers["retry-after"] = String(rejection.retryAfter ?? RETRY_AFTER_SECONDS);
  return new Response(JSON.stringify({ errors: rejection.message }), { status, headers });
}
