// Hops 2–3 for one body, as one pure function: bounds (bounds.ts) → decode → count → encode.
// Runs inline for small bodies and on the decode worker (worker.ts) for big ones, so both paths
// refuse the same requests with the same messages. No I/O, no state kept between calls.
import { checkEventCount, measureBody, type CostLimits } from "../codec/bounds";
import { decodeBody } from "../codec/decode";
import type { Format } from "../codec/format";
import { encodeEvents, type EncodeLimits, type Encoded } from "../codec/encode";
import { RING_COST_FACTOR } from "../buffer/ring";
import { AppError } from "../errors";
import type { PgMicros } from "../codec/time";

export interface PrepareLimits extends EncodeLimits {
  maxDecompressedBytes: number;
  maxEventsPerRequest: number;
  bufferMaxEvents: number;
  /** The most bytes of rows the ring holds: BUFFER_MAX_BYTES / RING_COST_FACTOR (buffer/ring.ts). */
  ringMaxBytes: number;
}

export function prepareBody(body: Uint8Array, format: Format, sourceId: number, receivedAt: PgMicros, limits: PrepareLimits): Encoded | AppError {
  const cost = costLimits(limits);
  const measured = measureBody(body, format, cost);
  if (measured instanceof AppError) return measured;
  if (measured !== undefined && measured > limits.bufferMaxEvents) return neverFits(`${measured} events`, "BUFFER_MAX_EVENTS");
  const buffer = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const events = decodeBody(buffer, format, cost);
  if (events instanceof AppError) return events;
  // Unwalked MessagePack is measured by its first value's header: values back to back decode to more.
  if (measured === undefined || events.length > measured) {
    const tooMany = checkEventCount(events.length, cost);
    if (tooMany) return tooMany;
    if (events.length > limits.bufferMaxEvents) return neverFits(`${events.length} events`, "BUFFER_MAX_EVENTS");
  }
  const encoded = encodeEvents(events, format, sourceId, receivedAt, limits);
  if (encoded instanceof AppError) return encoded;
  if (encoded.rows.length > limits.ringMaxBytes) {
    return neverFits(`${encoded.rows.length} bytes of rows`, `${limits.ringMaxBytes} bytes of rows: BUFFER_MAX_BYTES / ${RING_COST_FACTOR}`);
  }
  return encoded;
}

function costLimits(limits: PrepareLimits): CostLimits {
  return {
    maxEvents: limits.maxEventsPerRequest,
    maxDecompressedBytes: limits.maxDecompressedBytes,
    maxDepth: limits.maxDepth,
    maxEventBytes: limits.maxEventBytes,
  };
}

function neverFits(size: string, bound: string): AppError {
  return new AppError("never_fits", `Request holds ${size}, more than the ingestion buffer can ever hold (${bound}); split it into smaller requests`);
}
