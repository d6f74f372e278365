// What decoding a body would cost, measured before a single object is built (docs/api.md,
// "Limits"). One pass over the bytes counts events and values (every map, array and element), checks
// nesting and the size of MessagePack BigInts; past a bound the request is refused here, so a
// 19 KB body of 20 million empty maps never becomes 20 million objects. Values back to back
// (Fluent Bit, Fluentd, json_stream) count one event each. Reads bytes only: never decodes
// strings, never allocates per value.
import type { Envelope, Format } from "./format";
import { countAt } from "./protobuf";
import { AppError } from "../errors";
import { WALK_FROM_BYTES } from "../memory/costs";
import { BLANK, CLOSE, COMMA_BYTE, endOfString, JSON_BYTE, NEWLINE_BYTE, OPEN, OPEN_ARRAY, QUOTE_BYTE, SCALAR } from "./jsonbytes";

export interface CostLimits {
  maxEvents: number;
  maxDecompressedBytes: number;
  maxDepth: number;
  maxEventBytes: number;
}

/**
 * Values (maps, arrays, elements) a request may hold: one per VALUE_BYTES of the decompressed
 * limit (6.5 M at 100 MiB). Measured: a decoded empty map or small array costs 40–70 bytes of heap,
 * so this keeps the objects of one request under about 4× INGEST_MAX_DECOMPRESSED_BYTES.
 */
export const VALUE_BYTES = 16;
/** msgpackr's BigInt extension (0x42): one integer up to 64 KiB (157,826 digits, ~28 ms to render). */
export const MAX_BIGINT_BYTES = 64 * 1024;
/** …and at most this much of them per request: rendering is superlinear (~0.45 ms per KiB at 64 KiB). */
export const MAX_BIGINT_BYTES_PER_REQUEST = 256 * 1024;

export function maxValues(limits: CostLimits): number {
  return Math.max(1000, Math.floor(limits.maxDecompressedBytes / VALUE_BYTES));
}

/**
 * Events the body holds (undefined: a small body, counted after decoding), or the refusal; a body
 * it cannot read is left for the decoder to refuse.
 */
export function measureBody(body: Uint8Array, format: Format, limits: CostLimits): number | undefined | AppError {
  const walk = body.length >= WALK_FROM_BYTES;
  if (format !== "json" && format !== "ndjson" && format !== "msgpack") return measureEnvelope(body, format, limits, walk);
  const scan = format === "msgpack" ? scanMsgpack(body, limits, walk) : walk ? scanJson(body, format === "ndjson", limits) : undefined;
  if (typeof scan === "number" && scan > limits.maxEvents) return tooManyEvents(scan, limits.maxEvents);
  return scan;
}

/** The walk itself, whatever the body's size (tests compare it with what the decoders build). */
export function walkBody(body: Uint8Array, format: Format, limits: CostLimits): number | AppError {
  return format === "msgpack" ? scanMsgpack(body, limits, true) : scanJson(body, format === "ndjson", limits);
}

/** After decoding a body that was not walked. */
export function checkEventCount(events: number, limits: CostLimits): AppError | undefined {
  return events > limits.maxEvents ? tooManyEvents(events, limits.maxEvents) : undefined;
}

function tooManyEvents(events: number, max: number, qualifier = ""): AppError {
  return new AppError(
    "too_many_events",
    `Request holds ${qualifier ? `${qualifier}${max}` : events} events; the limit is ${max} per request (INGEST_MAX_EVENTS_PER_REQUEST). Split it into smaller requests.`,
  );
}

function tooManyValues(max: number): AppError {
  return new AppError(
    "too_many_values",
    `Request holds more than ${max} values (maps, arrays and their elements); the limit is one per ${VALUE_BYTES} bytes of INGEST_MAX_DECOMPRESSED_BYTES. Split it into smaller requests.`,
  );
}

/** A string longer than an event may be: its event is refused (413) before the string is built. */
function stringTooLarge(bytes: number, max: number): AppError {
  return new AppError(
    "event_too_large",
    `a string of ${bytes} bytes cannot fit in an event; the limit is ${max} bytes per event as stored (INGEST_MAX_EVENT_BYTES)`,
  );
}

/** JSON escapes shrink at most 6 to 1 (\u0041 → A): a string spanning more than this can never fit. */
const JSON_ESCAPE_RATIO = 6;

function tooDeep(max: number): AppError {
  return new AppError("too_deep", `nesting is deeper than ${max} levels (INGEST_MAX_DEPTH)`);
}

/**
 * JSON / NDJSON: counts containers and commas outside strings (≥ the values JSON.parse builds,
 * less one per container), and the events: a top-level array's elements, or one per value / line.
 * Strings are skipped with indexOf (native), so the loop runs over structure only.
 */
function scanJson(body: Uint8Array, ndjson: boolean, limits: CostLimits): number | AppError {
  const max = maxValues(limits);
  const depthLimit = limits.maxDepth + 2;
  let values = 0;
  let depth = 0;
  let events = 0;
  /** Top-level values: more than one is values back to back, an event each (JSON, not NDJSON's lines). */
  let tops = 0;
  let topArray = false;
  let sawTop = false;
  let lineHasValue = false;
  const length = body.length;
  for (let i = 0; i < length; i++) {
    const kind = JSON_BYTE[body[i]!]!;
    // Most bytes are blanks or inside scalars: one table load and a branch (3× faster than a chain).
    if (kind === BLANK || (kind === SCALAR && depth > 1)) continue;
    switch (kind) {
      case QUOTE_BYTE: {
        const end = endOfString(body, i + 1);
        if (end - i - 1 > limits.maxEventBytes * JSON_ESCAPE_RATIO) return stringTooLarge(end - i - 1, limits.maxEventBytes);
        i = end;
        if (depth === 0) {
          lineHasValue = true;
          if (++tops > limits.maxEvents && !ndjson) return tooManyEvents(tops, limits.maxEvents, "more than ");
        } else if (depth === 1 && topArray && events === 0) events = 1;
        sawTop = true;
        break;
      }
      case OPEN: {
        if (depth === 0) {
          if (!sawTop && !ndjson && body[i] === OPEN_ARRAY) topArray = true;
          lineHasValue = true;
          if (++tops > limits.maxEvents && !ndjson) return tooManyEvents(tops, limits.maxEvents, "more than ");
        } else if (depth === 1 && topArray && events === 0) events = 1;
        sawTop = true;
        if (++depth > depthLimit) return tooDeep(limits.maxDepth);
        if (++values > max) return tooManyValues(max);
        break;
      }
      case CLOSE:
        depth--;
        break;
      case COMMA_BYTE:
        if (depth === 1 && topArray && ++events > limits.maxEvents) return tooManyEvents(events, limits.maxEvents, "more than ");
        if (++values > max) return tooManyValues(max);
        break;
      case NEWLINE_BYTE:
        if (ndjson && depth === 0 && lineHasValue) {
          if (++events > limits.maxEvents) return tooManyEvents(events, limits.maxEvents, "more than ");
          lineHasValue = false;
        }
        break;
      default: // a scalar's byte at depth 0 or 1
        if (depth === 0) {
          lineHasValue = true;
          while (i + 1 < length && JSON_BYTE[body[i + 1]!] === SCALAR) i++; // the rest of a top-level scalar
          if (++tops > limits.maxEvents && !ndjson) return tooManyEvents(tops, limits.maxEvents, "more than ");
        } else if (topArray && events === 0) events = 1;
        sawTop = true;
    }
  }
  if (ndjson) return events + (lineHasValue ? 1 : 0);
  if (tops > 1) return tops;
  return topArray ? events : 1;
}

/** Stops the MessagePack walk: the body is not what it claims (the decoder will say why). */
const UNREADABLE = Symbol("unreadable");

interface Walk {
  body: Uint8Array;
  view: DataView;
  at: number;
  values: number;
  maxValues: number;
  depthLimit: number;
  bigintBytes: number;
  maxEventBytes: number;
  /** msgpackr record definitions seen so far: id → { fields, wide (a second id byte follows) }. */
  records: Map<number, { fields: number; wide: boolean }>;
  refusal: AppError | undefined;
}

/**
 * MessagePack: a top-level array's header says how many events, so that is decided first (no
 * walk at all for 20 million); then one walk over the values, msgpackr records included. Unwalked,
 * the header's count holds for a body of one value: prepare.ts counts again what was decoded.
 * Fluent Bit's one entry [time, record] is counted as its two elements (a bound).
 */
function scanMsgpack(body: Uint8Array, limits: CostLimits, walkAll: boolean): number | AppError {
  const first = body[0]!;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  let events = 1;
  if (first >= 0x90 && first <= 0x9f) events = first & 0x0f;
  else if (first === 0xdc && body.length >= 3) events = view.getUint16(1);
  else if (first === 0xdd && body.length >= 5) events = view.getUint32(1);
  if (events > limits.maxEvents) return tooManyEvents(events, limits.maxEvents);
  if (!walkAll) return events;
  const walk = newWalk(body, view, 0, maxValues(limits), limits.maxDepth + 2, limits.maxEventBytes);
  try {
    value(walk, 0);
    if (walk.at < body.length) events = sequence(walk, limits.maxEvents);
  } catch (error) {
    if (error !== UNREADABLE && !(error instanceof RangeError)) throw error;
  }
  return walk.refusal ?? events;
}

/**
 * A MessagePack body that is one array (a header, then its elements to the body's end): where
 * to cut it into slices of at least `sliceBytes` between two elements. Slice k is
 * body[at[k], at[k + 1]), `elements[k]` values back to back; at[0] is the first element's start;
 * `ends[i]` is where element i ends by this walk, for the decoder to check its own against (the
 * walk follows msgpackr's format, not its code: ingest/prepare.ts decodes whole where they part).
 * Undefined for any other body (values back to back, bytes after the array, one it cannot read):
 * that one is decoded whole. Run after measureBody has bounded the body; the same walk, no limits.
 */
export function msgpackArrayCuts(body: Uint8Array, sliceBytes: number): { at: number[]; elements: number[]; ends: Uint32Array } | undefined {
  const first = body[0];
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  let items: number;
  let start: number;
  if (first === undefined) return undefined;
  if (first >= 0x90 && first <= 0x9f) [items, start] = [first & 0x0f, 1];
  else if (first === 0xdc && body.length >= 3) [items, start] = [view.getUint16(1), 3];
  else if (first === 0xdd && body.length >= 5) [items, start] = [view.getUint32(1), 5];
  else return undefined;
  if (items > body.length - start) return undefined; // each element takes a byte at least
  const walk = newWalk(body, view, start, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
  const at = [start];
  const elements: number[] = [];
  const ends = new Uint32Array(items);
  let count = 0;
  try {
    for (let i = 0; i < items; i++) {
      value(walk, 1);
      ends[i] = walk.at;
      count++;
      if (walk.at - at[at.length - 1]! >= sliceBytes && i + 1 < items) {
        at.push(walk.at);
        elements.push(count);
        count = 0;
      }
    }
  } catch (error) {
    if (error !== UNREADABLE && !(error instanceof RangeError)) throw error;
    return undefined;
  }
  if (walk.at !== body.length) return undefined;
  at.push(walk.at);
  elements.push(count);
  return { at, elements, ends };
}

function newWalk(body: Uint8Array, view: DataView, at: number, maxValues: number, depthLimit: number, maxEventBytes: number): Walk {
  return { body, view, at, values: 0, maxValues, depthLimit, bigintBytes: 0, maxEventBytes, records: new Map(), refusal: undefined };
}

/**
 * Values back to back after the first (Fluent Bit's entries, Fluentd's maps): an event each
 * (Fluent Bit's group markers too: a bound, not an exact count), refused past the limit as they
 * are counted, so millions of tiny maps are a 413 before any is built.
 */
function sequence(walk: Walk, maxEvents: number): number {
  let events = 1;
  while (walk.at < walk.body.length) {
    if (++events > maxEvents) fail(walk, tooManyEvents(events, maxEvents, "more than "));
    value(walk, 0);
  }
  return events;
}

function count(walk: Walk, depth: number): void {
  if (depth > walk.depthLimit) fail(walk, tooDeep(walk.depthLimit - 2));
  if (++walk.values > walk.maxValues) fail(walk, tooManyValues(walk.maxValues));
}

function fail(walk: Walk, refusal: AppError): never {
  walk.refusal = refusal;
  throw UNREADABLE;
}

function skip(walk: Walk, bytes: number): void {
  walk.at += bytes;
  if (walk.at > walk.body.length) throw UNREADABLE;
}

function values(walk: Walk, n: number, depth: number): void {
  for (let i = 0; i < n; i++) value(walk, depth);
}

function value(walk: Walk, depth: number): void {
  const { body, view } = walk;
  if (walk.at >= body.length) throw UNREADABLE;
  const token = body[walk.at++]!;
  if (token < 0x40) return;
  if (token < 0x80) return record(walk, token & 0x3f, depth);
  if (token < 0x90) return container(walk, (token & 0x0f) * 2, depth);
  if (token < 0xa0) return container(walk, token & 0x0f, depth);
  if (token < 0xc0) return skip(walk, token & 0x1f);
  if (token === 0xc6 || token === 0xdb || token === 0xc5 || token === 0xda) {
    // str/bin 16 and 32: their JSON (UTF-8, or base64 for bin) is at least as long as their bytes.
    const bytes = token === 0xc6 || token === 0xdb ? view.getUint32(walk.at) : view.getUint16(walk.at);
    if (bytes > walk.maxEventBytes && bytes <= walk.body.length - walk.at) fail(walk, stringTooLarge(bytes, walk.maxEventBytes));
  }
  if (token >= 0xe0) return;
  const at = walk.at;
  switch (token) {
    case 0xc0:
    case 0xc2:
    case 0xc3:
      return;
    case 0xc4:
    case 0xd9:
      return skip(walk, 1 + (body[at] ?? 0));
    case 0xc5:
    case 0xda:
      skip(walk, 2);
      return skip(walk, view.getUint16(at));
    case 0xc6:
    case 0xdb:
      skip(walk, 4);
      return skip(walk, view.getUint32(at));
    case 0xc7:
      skip(walk, 2);
      return extension(walk, body[at + 1]!, body[at]!, depth);
    case 0xc8:
      skip(walk, 3);
      return extension(walk, body[at + 2]!, view.getUint16(at), depth);
    case 0xc9:
      skip(walk, 5);
      return extension(walk, body[at + 4]!, view.getUint32(at), depth);
    case 0xca:
    case 0xce:
    case 0xd2:
      return skip(walk, 4);
    case 0xcb:
    case 0xcf:
    case 0xd3:
      return skip(walk, 8);
    case 0xcc:
    case 0xd0:
      return skip(walk, 1);
    case 0xcd:
    case 0xd1:
      return skip(walk, 2);
    case 0xd4:
      skip(walk, 2);
      if (body[at] === 0x72) return defineRecord(walk, body[at + 1]! & 0x3f, undefined, depth);
      return extension(walk, body[at]!, 1, depth, true);
    case 0xd5:
      skip(walk, 3);
      if (body[at] === 0x72) return defineRecord(walk, body[at + 1]! & 0x3f, body[at + 2]!, depth);
      walk.at -= 2; // fixext 2 holds two data bytes after its type
      return extension(walk, body[at]!, 2, depth);
    case 0xd6:
      skip(walk, 1);
      return extension(walk, body[at]!, 4, depth);
    case 0xd7:
      skip(walk, 1);
      return extension(walk, body[at]!, 8, depth);
    case 0xd8:
      skip(walk, 1);
      return extension(walk, body[at]!, 16, depth);
    case 0xdc:
      skip(walk, 2);
      return container(walk, view.getUint16(at), depth);
    case 0xdd:
      skip(walk, 4);
      return container(walk, view.getUint32(at), depth);
    case 0xde:
      skip(walk, 2);
      return container(walk, view.getUint16(at) * 2, depth);
    case 0xdf:
      skip(walk, 4);
      return container(walk, view.getUint32(at) * 2, depth);
  }
  throw UNREADABLE; // 0xc1 is never used
}

function container(walk: Walk, items: number, depth: number): void {
  count(walk, depth + 1);
  // A header may claim more items than there are bytes: each needs at least one.
  if (items > walk.body.length - walk.at) throw UNREADABLE;
  values(walk, items, depth + 1);
}

/**
 * An extension's data (the caller has skipped a fixext 1's). msgpackr's Error, structured-clone
 * id, Set and RegExp (0x65, 0x69, 0x73, 0x78) read the value after their data too, in every
 * form; its pointer (0x70) does in a fixext 1, as this walk has always counted it.
 */
function extension(walk: Walk, type: number, length: number, depth: number, fixext1 = false): void {
  if (type === 0x42) {
    if (length > MAX_BIGINT_BYTES) {
      fail(
        walk,
        new AppError(
          "unsupported_value",
          `an integer is ${length} bytes long (MessagePack BigInt); the limit is ${MAX_BIGINT_BYTES} bytes (about 157,000 digits)`,
        ),
      );
    }
    walk.bigintBytes += length;
    if (walk.bigintBytes > MAX_BIGINT_BYTES_PER_REQUEST) {
      fail(
        walk,
        new AppError(
          "unsupported_value",
          `request holds more than ${MAX_BIGINT_BYTES_PER_REQUEST} bytes of MessagePack BigInts; the limit keeps rendering them to digits bounded in time`,
        ),
      );
    }
  }
  if (!fixext1) skip(walk, length);
  if (type === 0x65 || type === 0x69 || type === 0x73 || type === 0x78 || (fixext1 && type === 0x70)) value(walk, depth + 1);
}

function defineRecord(walk: Walk, id: number, highByte: number | undefined, depth: number): void {
  const header = walk.body[walk.at]!;
  let fields: number;
  if (header >= 0x90 && header <= 0x9f) fields = header & 0x0f;
  else if (header === 0xdc) fields = walk.view.getUint16(walk.at + 1);
  else if (header === 0xdd) fields = walk.view.getUint32(walk.at + 1);
  else throw UNREADABLE; // msgpackr refuses a definition that is not an array of keys
  value(walk, depth + 1); // the keys
  if (highByte !== undefined) id = id < 32 ? -((highByte << 5) + id) : (highByte << 5) + id;
  walk.records.set(id, { fields, wide: highByte === 0 });
  count(walk, depth + 1);
  values(walk, fields, depth + 1);
}

function record(walk: Walk, firstId: number, depth: number): void {
  let structure = walk.records.get(firstId);
  if (structure === undefined) return; // a plain fixint 0x40–0x7f
  if (structure.wide) {
    if (walk.at >= walk.body.length) throw UNREADABLE;
    const highByte = walk.body[walk.at++]!;
    if (highByte !== 0) {
      structure = walk.records.get(firstId < 32 ? -(firstId + (highByte << 5)) : firstId + (highByte << 5));
      if (structure === undefined) throw UNREADABLE;
    }
  }
  count(walk, depth + 1);
  values(walk, structure.fields, depth + 1);
}

/** Where an envelope's records are: OTLP's resourceLogs → scopeLogs → logRecords, Loki's streams → entries. */
const RECORDS_AT: Record<"otlp-proto" | "loki-proto", readonly number[]> = { "otlp-proto": [1, 2, 2], "loki-proto": [1, 2] };

/**
 * Another protocol's body. Protobuf: its records counted without reading them (a step per record),
 * so a million records are refused before one is built; their values and nesting are bounded as
 * they are decoded (otlp-proto.ts stops at maxValues). JSON, when big: the JSON walk bounds what
 * JSON.parse builds (an AnyValue is four JSON levels deep); its records are counted once decoded.
 */
function measureEnvelope(body: Uint8Array, format: Envelope, limits: CostLimits, walk: boolean): number | undefined | AppError {
  if (format === "otlp-proto" || format === "loki-proto") {
    const buffer = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const records = countAt(buffer, RECORDS_AT[format]);
    return records !== undefined && records > limits.maxEvents ? tooManyEvents(records, limits.maxEvents) : records;
  }
  if (!walk) return undefined;
  const scan = scanJson(body, false, { ...limits, maxDepth: limits.maxDepth * 4 + 8 });
  return scan instanceof AppError ? scan : undefined;
}
