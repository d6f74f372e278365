// Hops 2–3 for one body, as one pure function: bounds (bounds.ts) → decode → count → encode.
// Runs inline for small bodies and on the decode worker (worker.ts) for big ones, so both paths
// refuse the same requests with the same messages. No I/O, no state kept between calls.
// A big NDJSON, JSON-array or MessagePack-array body is decoded and encoded slice by slice
// (slices.ts; codec/bounds.ts for MessagePack), its rows gathered in one buffer of their own: its
// objects are one slice's at a time, not several times the body. Same rows, same refusals, same
// messages as decoding it whole.
import { checkEventCount, measureBody, msgpackArrayCuts, type CostLimits } from "../codec/bounds";
import { decodeBody, isMsgpackEventArray, msgpackSliceReader } from "../codec/decode";
import type { Format } from "../codec/format";
import { encodeEvents, type EncodeLimits, type Encoded } from "../codec/encode";
import { AppError } from "../errors";
import type { Reception } from "../codec/reception";
import { freeNow } from "../memory/buffers";
import { BIG_BODY_BYTES, RING_COST_FACTOR, SLICE_BYTES } from "../memory/costs";
import { arrayCuts, ndjsonCuts } from "./slices";

export interface PrepareLimits extends EncodeLimits {
  maxDecompressedBytes: number;
  maxEventsPerRequest: number;
  bufferMaxEvents: number;
  /** The most bytes of rows the ring holds: BUFFER_MAX_BYTES / RING_COST_FACTOR (memory/costs.ts). */
  ringMaxBytes: number;
}

/** Encoded rows; `own`: at the start of a buffer of their own (sliced), not a view of the encoder's scratch. */
export interface Prepared extends Encoded {
  own?: boolean;
}

/**
 * Before the body is read (`bytes`: as sent): whether it may be decoded in slices (NDJSON, JSON
 * arrays and MessagePack arrays of BIG_BODY_BYTES or more, memory/costs.ts), so the gate
 * charges it so until decodedInSlices can tell.
 */
export function mayDecodeInSlices(format: Format | undefined, bytes: number): boolean {
  return (format === "json" || format === "ndjson" || format === "msgpack") && bytes >= BIG_BODY_BYTES;
}

/** Whether prepareBody decodes this body in slices (the admission gate charges it by that). */
export function decodedInSlices(body: Uint8Array, format: Format): boolean {
  if (body.length < BIG_BODY_BYTES) return false;
  if (format === "ndjson") return true;
  if (format === "msgpack") return isMsgpackEventArray(body);
  if (format !== "json") return false;
  let i = 0;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  return body[i] === 0x5b; // an array: what a body that is one object or values back to back is not
}

/**
 * The body's rows. A body of BIG_BODY_BYTES or more may be written to in passing (a byte at each
 * cut, put back before this returns): not one another thread reads meanwhile.
 */
export function prepareBody(
  body: Uint8Array,
  format: Format,
  sourceId: number,
  reception: Reception,
  limits: PrepareLimits,
  afterSlice?: (bytes: number) => void,
): Prepared | AppError {
  const cost = costLimits(limits);
  const measured = measureBody(body, format, cost);
  if (measured instanceof AppError) return measured;
  if (measured !== undefined && measured > limits.bufferMaxEvents)
    return neverFits(`${measured} events`, `${limits.bufferMaxEvents} events: BUFFER_MAX_EVENTS`);
  if (measured !== undefined && decodedInSlices(body, format)) {
    const sliced = prepareSliced(body, format as SlicedFormat, measured, sourceId, reception, limits, afterSlice);
    if (sliced !== undefined) return sliced;
  }
  const buffer = asBuffer(body);
  const events = decodeBody(buffer, format, cost);
  if (events instanceof AppError) return events;
  // Unwalked MessagePack is measured by its first value's header: values back to back decode to more.
  if (measured === undefined || events.length > measured) {
    const tooMany = checkEventCount(events.length, cost);
    if (tooMany) return tooMany;
    if (events.length > limits.bufferMaxEvents) return neverFits(`${events.length} events`, `${limits.bufferMaxEvents} events: BUFFER_MAX_EVENTS`);
  }
  const encoded = encodeEvents(events, format, sourceId, reception, limits);
  if (encoded instanceof AppError) return encoded;
  if (encoded.rows.length > limits.ringMaxBytes) {
    return neverFits(`${encoded.rows.length} bytes of rows`, `${limits.ringMaxBytes} bytes of rows: BUFFER_MAX_BYTES / ${RING_COST_FACTOR}`);
  }
  return encoded;
}

type SlicedFormat = "json" | "ndjson" | "msgpack";
type SliceReader = (from: number, to: number, index: number) => unknown[] | AppError;

/**
 * Slice by slice: decode, encode, copy the rows out. The answer decoding it whole would give, or
 * undefined when only that can tell (the scan cannot follow the body, a slice does not decode, a
 * count or an element's end differs from the walk's): the caller decodes it whole then, at up to
 * the whole decode's cost while the gate charges it as sliced (docs/known-gaps.md). An event
 * refused while encoding is named by its index in the body, as whole; a slice that does not
 * decode after it still wins, as whole (the body is decoded before any event is encoded).
 */
function prepareSliced(
  body: Uint8Array,
  format: SlicedFormat,
  measured: number,
  sourceId: number,
  reception: Reception,
  limits: PrepareLimits,
  afterSlice: ((bytes: number) => void) | undefined,
): Prepared | AppError | undefined {
  const buffer = asBuffer(body);
  const cut = cutsOf(buffer, format, costLimits(limits));
  if (cut === undefined) return undefined;
  const { at, elements, slice } = cut;
  let rows: Buffer | undefined;
  let bytes = 0;
  let count = 0;
  let tooOld = 0;
  let tooFarAhead = 0;
  let refusal: AppError | undefined;
  let whole = false;
  for (let k = 0; k + 1 < at.length && !whole; k++) {
    // Before the next slice is decoded, not after this one: a collection then would keep its objects (still in use) and promote them.
    if (k > 0) afterSlice?.(at[k]! - at[k - 1]!);
    const events = slice(at[k]!, at[k + 1]!, count);
    if (events instanceof AppError || (elements !== undefined && events.length !== elements[k])) {
      whole = true;
      break;
    }
    const first = count;
    count += events.length;
    if (refusal !== undefined) continue; // only whether the rest decodes still matters
    const encoded = encodeEvents(events, format, sourceId, reception, limits);
    if (encoded instanceof AppError) {
      refusal = renumbered(encoded, first);
      whole = refusal === undefined;
      continue;
    }
    tooOld += encoded.tooOld ?? 0;
    tooFarAhead += encoded.tooFarAhead ?? 0;
    // Past what the ring holds the request is refused (below): its size is still counted, its rows no longer kept.
    if (bytes + encoded.rows.length <= limits.ringMaxBytes) rows = gather(rows, bytes, encoded.rows, (at[k + 1]! - at[0]!) / (at.at(-1)! - at[0]!));
    bytes += encoded.rows.length;
  }
  // No events (NDJSON of blank lines): decoded whole, it gets its 406 there.
  whole ||= count !== measured || count === 0;
  if (whole || refusal !== undefined || bytes > limits.ringMaxBytes) {
    if (rows !== undefined) freeNow(rows);
    if (whole) return undefined;
    return refusal ?? neverFits(`${bytes} bytes of rows`, `${limits.ringMaxBytes} bytes of rows: BUFFER_MAX_BYTES / ${RING_COST_FACTOR}`);
  }
  const prepared: Prepared = { rows: viewOf(rows, bytes), count, own: true };
  if (tooOld > 0) prepared.tooOld = tooOld;
  if (tooFarAhead > 0) prepared.tooFarAhead = tooFarAhead;
  return prepared;
}

/** Where the body is cut (slices.ts; codec/bounds.ts for MessagePack) and how a slice is decoded; undefined when it is decoded whole. */
function cutsOf(body: Buffer, format: SlicedFormat, cost: CostLimits): { at: number[]; elements?: number[]; slice: SliceReader } | undefined {
  if (format === "ndjson") return { at: ndjsonCuts(body, SLICE_BYTES), slice: (from, to) => ndjsonSlice(body, from, to, cost) };
  if (format === "json") {
    const cuts = arrayCuts(body, SLICE_BYTES);
    return cuts && { ...cuts, slice: (from, to) => arraySlice(body, from, to, cost) };
  }
  const cuts = msgpackArrayCuts(body, SLICE_BYTES);
  return cuts && { at: cuts.at, elements: cuts.elements, slice: msgpackSliceReader(body, cuts.ends) };
}

/** NDJSON lines [from, to): a slice of blank lines holds no events (the whole body's emptiness is the walk's to tell). */
function ndjsonSlice(body: Buffer, from: number, to: number, cost: CostLimits): unknown[] | AppError {
  const events = decodeBody(body.subarray(from, to), "ndjson", cost);
  return events instanceof AppError && events.reason === "body_empty" ? [] : events;
}

/** The array's elements between the separators at `from` and `to`, read as an array of their own: `[` and `]` written over the separators, then put back. */
function arraySlice(body: Buffer, from: number, to: number, cost: CostLimits): unknown[] | AppError {
  const open = body[from]!;
  const close = body[to]!;
  body[from] = 0x5b;
  body[to] = 0x5d;
  try {
    return decodeBody(body.subarray(from, to + 1), "json", cost);
  } finally {
    body[from] = open;
    body[to] = close;
  }
}

/**
 * Every message of encodeEvents' refusals starts with "event <its index>" (codec/encode.ts): the
 * index in the slice becomes the index in the body. Undefined if one ever does not.
 */
function renumbered(refusal: AppError, first: number): AppError | undefined {
  const index = /^event (\d+)/.exec(refusal.message);
  if (index === null) return undefined;
  return new AppError(refusal.reason, `event ${first + Number(index[1])}${refusal.message.slice(index[0].length)}`, refusal.extra);
}

/**
 * The slice's rows after those gathered so far (the encoder's scratch is reused by the next
 * slice), in a buffer of their own sized by the rows per body byte so far (`done`: the part of
 * the body read), so it is rarely made again; when it is, 25% bigger at least.
 */
function gather(rows: Buffer | undefined, used: number, slice: Uint8Array, done: number): Buffer {
  const need = used + slice.length;
  if (rows === undefined || need > rows.length) {
    const grown = rows === undefined ? 0 : Math.ceil(rows.length * 1.25);
    const bigger = Buffer.allocUnsafe(Math.max(grown, Math.ceil((need / done) * 1.02) + 64 * 1024));
    if (rows !== undefined) {
      rows.copy(bigger, 0, 0, used);
      freeNow(rows);
    }
    rows = bigger;
  }
  rows.set(slice, used);
  return rows;
}

/**
 * The rows, at the start of a buffer of their own that may be a little longer (gather's 2%): it is
 * handed on whole (transferred, kept by the ring): cut to size with ArrayBuffer.transfer, a 16 MB
 * body's rows would be copied once more (docs/memory.md).
 */
function viewOf(rows: Buffer | undefined, bytes: number): Uint8Array {
  return rows === undefined ? new Uint8Array(0) : new Uint8Array(rows.buffer, 0, bytes);
}

function asBuffer(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
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
