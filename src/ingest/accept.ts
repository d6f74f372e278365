// The ingestion path for one request, hop by hop: authenticate → stopping, buffer, rate limit →
// body (capped, decompressed), its memory charged at each step by the request's Admission
// (memory/admission.ts: bytes, and for a big body a decode lane) → prepare (bounds, decode,
// encode: all or nothing; on a worker thread for big bodies) → ring buffer, for every protocol of
// the ingest listener (`/`, OTLP, Loki: see Protocol). A refusal is an AppError value, counted here; `/` renders it (errors.ts) with
// CORS's Allow-Origin on every answer, the other protocols in their routes (otlp.ts, loki.ts).
// 202 means: in the ring (buffered mode) or committed to PostgreSQL (durable mode).
import type { Chunk, Ring } from "../buffer/ring";
import type { Flusher } from "../buffer/flusher";
import type { AckMode, Config } from "../config";
import { AppError, errorResponse } from "../errors";
import { bearerToken } from "../http/auth";
import type { IngestRequest, IngestSeries, Protocol as ProtocolName } from "./series";
import type { SourceCache, SourceContext } from "../sources/cache";
import { declaredLength, decompress, gzipSizeHint, identityBody, parseEncoding, readBody, type BodyLimits } from "./body";
import { DecodeWorker, headerRefusal } from "./offload";
import { decodedInSlices, mayDecodeInSlices, prepareBody, type PrepareLimits } from "./prepare";
import { parseContentType, sniffFormat } from "./content-type";
import { Admission, bufferFull, isBig } from "../memory/admission";
import type { Gate } from "../memory/gate";
import type { GcPacer } from "../memory/gcpace";
import type { RateLimiter } from "./ratelimit";
import { receptionOf, type EventTimeRule } from "../codec/reception";
import type { Format } from "../codec/format";
import { timeout } from "../timers";

/** A request's limits, from the configuration; `ringMaxBytes` is the ring's (memory/costs.ts). */
export function ingestLimits(config: Config, ringMaxBytes: number): BodyLimits & PrepareLimits {
  return {
    maxBodyBytes: config.ingestMaxBodyBytes,
    maxDecompressedBytes: config.ingestMaxDecompressedBytes,
    bodyTimeoutMs: config.ingestBodyTimeoutMs,
    maxEventBytes: config.ingestMaxEventBytes,
    maxDepth: config.ingestMaxDepth,
    maxEventsPerRequest: config.ingestMaxEventsPerRequest,
    bufferMaxEvents: config.bufferMaxEvents,
    ringMaxBytes,
  };
}

export interface IngestDeps {
  cache: SourceCache;
  ring: Ring;
  flusher: Flusher;
  /** Ingestion's /metrics series (series.ts). */
  metrics: IngestSeries;
  limits: BodyLimits & PrepareLimits;
  /** Memory of requests being read and decoded, process-wide, and the decode lanes (docs/memory.md). */
  gate: Gate;
  /** Decodes big bodies off the event loop. */
  decodeWorker: DecodeWorker;
  /** Asks for garbage collections by body bytes handled (full ones when memory is short). */
  gcPacer: GcPacer;
  ackMode: AckMode;
  /** Durable mode: how long a request waits for its commit before it gets 503 instead. */
  durableTimeoutMs: number;
  rateLimiter: RateLimiter;
  accepting: () => boolean;
  /** The window of event times kept as sent (codec/reception.ts); the source's retention completes it. */
  eventTimes: EventTimeRule;
  /**
   * Flushes have been failing for longer than INGEST_REFUSE_AFTER_FLUSH_FAILING_MS: nothing more
   * may be acknowledged (503) until one succeeds. Absent: never.
   */
  storageDown?: () => boolean;
}

/** Every ingestion answer, refusals included: browsers read it (the token is the credential). */
export const CORS_ORIGIN = { "access-control-allow-origin": "*" } as const;
/**
 * The 202, built once and cloned per request: a clone costs 0.2–0.5 µs, `new Response` with a
 * headers object 1.6 µs (in-process, Bun 1.4.5). The template itself is never returned: Bun moves
 * a returned Response's headers out, so a second answer from one object lost Allow-Origin.
 */
const ACCEPTED = new Response(null, { status: 202, headers: CORS_ORIGIN });

/**
 * What differs between the protocols the ingest listener speaks (Better Stack's `/`, OTLP, Loki):
 * where the source token is, which Content-Types name which body format, and (Loki's snappy) a
 * compression of the protocol's own. Everything else is the one path below.
 */
export interface Protocol {
  /** The `protocol` label of its requests' metrics. */
  name: ProtocolName;
  token(headers: Headers): string | undefined;
  /**
   * undefined: no Content-Type, told from the body once it is decompressed (sniffFormat). Only
   * `/` answers so; OTLP and Loki name a format for a missing one (Loki's: protobuf).
   */
  format(contentType: string | null): Format | AppError | undefined;
  /** After Content-Encoding is undone: the body as the codec reads it. */
  unpack?(body: Buffer, format: Format, maxBytes: number): Buffer | AppError;
}

/** What an accepted request held: events stored (or dropped as paused), and OTLP's records refused one by one. */
export interface Ingested {
  events: number;
  refused: number;
  refusal: string | undefined;
}

const BETTER_STACK: Protocol = {
  name: "better_stack",
  token: (headers) => bearerToken(headers.get("authorization")),
  format: parseContentType,
};

/** POST / (Better Stack's ingestion): 202, or the contract's `{"errors": …}`. */
export async function acceptRequest(request: Request, deps: IngestDeps): Promise<Response> {
  const outcome = await ingest(request, deps, BETTER_STACK);
  return outcome instanceof AppError ? errorResponse(outcome, CORS_ORIGIN) : (ACCEPTED.clone() as Response);
}

/**
 * One async frame per request (its memory is one Admission, released in `finally`; no closures):
 * every hop before and after the body is synchronous, so a request awaits only its body, big
 * inflations, the decode worker, and (durable mode) its commit. Counted and timed in the metrics
 * here, once, under the protocol's name (`metrics.ingestRequest`'s tally); each protocol's route
 * renders the outcome.
 */
export async function ingest(request: Request, deps: IngestDeps, protocol: Protocol): Promise<Ingested | AppError> {
  const { cache, ring, limits } = deps;
  // This request's tally: every outcome below counts it once, by protocol and source, and times it.
  const metrics = deps.metrics.ingestRequest(protocol.name);

  const token = protocol.token(request.headers);
  if (token === undefined) return refuse(new AppError("missing_token", "Unauthorized"), metrics);
  let source: SourceContext | null | undefined = cache.lookup(token);
  // A token an ingest process does not know yet is read from PostgreSQL: away, it cannot tell (503, never a 500).
  if (source === undefined) source = await cache.lookupMissing(token).catch(() => null);
  if (source === null)
    return refuse(
      new AppError(
        "storage_unavailable",
        "This token cannot be checked now: PostgreSQL does not answer; nothing of this request was stored, retry after the time in Retry-After",
      ),
      metrics,
    );
  if (source === undefined) return refuse(new AppError("invalid_token", "Unauthorized"), metrics);
  metrics.sourceId = source.id;
  if (!deps.accepting()) return refuse(new AppError("shutting_down", "Service is shutting down; retry on another instance or later"), metrics);
  if (!ring.fits(1, 1)) return refuse(bufferFull(), metrics);
  if (deps.storageDown?.()) return refuse(storageDown(), metrics);
  const limiter = deps.rateLimiter;
  if (limiter.enabled) {
    const wait = limiter.wait(source.id);
    if (wait > 0)
      return refuse(
        new AppError("rate_limited", "Rate limit of this source exceeded (INGEST_RATE_LIMIT events per second); retry after the time in Retry-After", {
          retryAfterSeconds: wait,
        }),
        metrics,
      );
  }

  let format = protocol.format(request.headers.get("content-type"));
  if (format instanceof AppError) return refuse(format, metrics);
  const encoding = parseEncoding(request.headers.get("content-encoding"));
  if (encoding instanceof AppError) return refuse(encoding, metrics);

  const declared = declaredLength(request.headers.get("content-length"), limits);
  if (declared instanceof AppError) return refuse(declared, metrics);
  // The request's memory (memory/admission.ts), charged from here until it is buffered or refused.
  const admission = new Admission(deps);
  try {
    if (declared !== undefined) {
      if (isBig(declared)) deps.decodeWorker.start(); // while the body arrives
      const no = admission.announced(declared, format, mayDecodeInSlices(format, declared));
      if (no) return refuse(no, metrics);
    }
    const raw = await readBody(request, declared, limits);
    if (raw instanceof AppError) return refuse(raw, metrics);
    const rawBytes = raw.length;
    admission.received(rawBytes, encoding !== "identity");
    // Only a gzip trailer's size within the decompressed limit: past it the body gets its 413 from inflating.
    const hint = encoding === "gzip" ? gzipSizeHint(raw) : undefined;
    if (hint !== undefined && hint <= limits.maxDecompressedBytes) {
      const no = admission.inflating(hint, rawBytes, format, mayDecodeInSlices(format, hint));
      if (no) return refuse(no, metrics);
      if (isBig(hint)) deps.decodeWorker.start(); // while the body is inflated
    }
    let body = encoding === "identity" ? identityBody(raw, limits.maxDecompressedBytes) : await decompress(raw, encoding, limits.maxDecompressedBytes);
    if (body instanceof AppError) return refuse(body, metrics);
    admission.inflated(raw, body);
    if (format === undefined) {
      format = sniffFormat(body); // `/` with no Content-Type: the body's first byte tells, or 415
      if (format instanceof AppError) return refuse(format, metrics);
    }
    if (protocol.unpack) {
      body = protocol.unpack(body, format, limits.maxDecompressedBytes);
      if (body instanceof AppError) return refuse(body, metrics);
    }
    const full = admission.decoding(body.length);
    if (full) return refuse(full, metrics);
    // A big MessagePack body's array header is read before it is charged: 20 million events are
    // 413 by it, never a 503 that would have the client send them again.
    const big = admission.big; // decoded on a decode thread
    const early = big ? headerRefusal(body, format, limits) : undefined;
    if (early) return refuse(early, metrics);
    const no = admission.charged(format, decodedInSlices(body, format)) ?? (big ? await admission.lane(request.signal) : undefined);
    if (no) return refuse(no, metrics);
    // The source's retention as of now (a PATCH applies to the next request).
    const reception = receptionOf(Date.now(), source.retentionDays, deps.eventTimes);
    const encoded = big
      ? await deps.decodeWorker.run(body, format, source.id, reception, limits) // the body is moved there
      : prepareBody(body, format, source.id, reception, limits);
    if (encoded instanceof AppError) return refuse(encoded, metrics);
    metrics.redated(encoded.tooOld ?? 0, encoded.tooFarAhead ?? 0); // counted if it is accepted
    admission.encoded(encoded.rows.length);

    const { refused = 0, refusal } = encoded as { refused?: number; refusal?: string };
    if (encoded.count === 0) return accepted(metrics, 0, rawBytes, refused, refusal);
    if (limiter.enabled) limiter.spend(source.id, encoded.count);
    if (source.paused) return accepted(metrics, encoded.count, rawBytes, refused, refusal, true);

    // Deleted while this request was read (a slow upload): nothing of it may land after the purge.
    if (!cache.has(source.id)) return refuse(new AppError("invalid_token", "Unauthorized"), metrics);
    if (deps.ackMode === "buffered") {
      // Storage may have failed while the body was read: a 202 now would rest in memory only.
      if (deps.storageDown?.()) return refuse(storageDown(), metrics);
      // A decode thread's rows are the request's own (transferred): the ring keeps big ones as they are.
      if (!(big ? ring.adopt(encoded.rows, encoded.count) : ring.append(encoded.rows, encoded.count))) return refuse(bufferFull(), metrics);
      deps.flusher.pushed();
      return accepted(metrics, encoded.count, rawBytes, refused, refusal);
    }
    // The request's objects are gone once its chunk is in the ring: waiting costs no memory.
    admission.release();
    return await durable(big ? encoded.rows : rowBytes(encoded.rows), encoded.count, rawBytes, deps, metrics, refused, refusal);
  } finally {
    admission.release();
  }
}

/** `events` are the records kept: OTLP's refused one by one (`refused`) are not counted as received. */
function accepted(metrics: IngestRequest, events: number, rawBytes: number, refused = 0, refusal?: string, droppedPaused = false): Ingested {
  metrics.accepted(events, rawBytes, droppedPaused);
  return { events, refused, refusal };
}

/**
 * Durable: answer when the flush holding these events has committed (group commit). Past the
 * deadline the chunk is abandoned; if the flusher already holds it, its answer decides.
 */
async function durable(
  rows: Uint8Array,
  count: number,
  rawBytes: number,
  deps: IngestDeps,
  metrics: IngestRequest,
  refused: number,
  refusal: string | undefined,
): Promise<Ingested | AppError> {
  const { ring } = deps;
  let settle!: (error?: Error) => void;
  const committed = new Promise<Error | undefined>((resolve) => (settle = resolve));
  const chunk: Chunk = { rows, events: count, bytes: rows.length, seq: 0, settle };
  if (!ring.push(chunk)) return refuse(bufferFull(), metrics);
  deps.flusher.pushed();
  let outcome = await timeout(committed, deps.durableTimeoutMs, () => "late" as const);
  if (outcome === "late") {
    deps.metrics.durableTimeouts.inc();
    outcome = ring.abandon(chunk) ? new Error("abandoned") : await committed;
  }
  if (outcome)
    return refuse(
      new AppError("storage_unavailable", "Storage did not commit this request in time (DURABLE_TIMEOUT_MS); nothing of it was or will be stored, retry later"),
      metrics,
    );
  return accepted(metrics, count, rawBytes, refused, refusal);
}

/** Durable mode's chunk, decoded here: the tuples copied out of the encoder's scratch (which the next request reuses). */
function rowBytes(rows: Uint8Array): Uint8Array {
  return Buffer.from(rows);
}

function storageDown(): AppError {
  return new AppError(
    "storage_unavailable",
    "Storage is failing (no flush has succeeded for longer than INGEST_REFUSE_AFTER_FLUSH_FAILING_MS); nothing of this request was stored, retry after the time in Retry-After",
  );
}

function refuse(refusal: AppError, metrics: IngestRequest): AppError {
  metrics.reject(refusal.reason);
  return refusal;
}
