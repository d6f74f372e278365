// Decoded events → binary COPY tuples (tuples.ts), all or nothing. Checks each event
// (an object, nesting, size), normalises what JSON or PostgreSQL cannot hold, reads the event time
// (redating one outside the reception's window: reception.ts), and writes the tuple the flusher
// will send once it has set the id. The first bad event rejects
// the whole request, so nothing of it is buffered. No awaits, no try/catch and no closures per event.
import { TUPLE_HEAD, tupleHead, writeTuple } from "./tuples";
import type { Format } from "./format";
import { MAX_NUMERIC_DIGITS } from "./numbers";
import { AppError } from "../errors";
import { dateText, eventMicros, type PgMicros } from "./time";
import { EventTime } from "./fluent";
import { redate, type Reception } from "./reception";

export interface EncodeLimits {
  maxEventBytes: number;
  maxDepth: number;
}

export interface Encoded {
  /** The tuples: a view of this thread's scratch buffer, which the next call reuses (copy it first). */
  rows: Uint8Array;
  count: number;
  /** OTLP only (partial success): records left out one by one, and why the first one was. */
  refused?: number;
  refusal?: string;
  /** Events stored with the reception time as their dt (reception.ts), by reason; absent when none. */
  tooOld?: number;
  tooFarAhead?: number;
}

/** Tuples are written here and copied once by the caller (into the ring's slab or a chunk of their own). */
const SCRATCH_BYTES = 1 << 20;
/** A bigger scratch (a big body's) is let go after its call, not kept for the next. */
const SCRATCH_KEEP_BYTES = 8 << 20;
let scratch = Buffer.allocUnsafe(SCRATCH_BYTES);

// JSON.stringify writes NUL and lone surrogates as \u escapes, which jsonb refuses: swap them for
// U+FFFD. The lookbehind skips an escaped backslash followed by the letters "u0000".
const JSONB_UNSAFE_ESCAPE = /(?<=(?:^|[^\\])(?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/g;
const REPLACEMENT = "\\ufffd";

/** Walk state, reused across events so the walk allocates nothing of its own. */
const walk = { maxDepth: 64, problem: "", problemReason: "too_deep" as "too_deep" | "unsupported_value" };

const IN_WINDOW = 0;
const TOO_OLD = 1;
const TOO_FAR_AHEAD = 2;
/** Where the last eventTimeOf found the event's time: IN_WINDOW (or none), TOO_OLD, TOO_FAR_AHEAD. */
let placed = IN_WINDOW;

export function encodeEvents(events: unknown[], format: Format, sourceId: number, reception: Reception, limits: EncodeLimits): Encoded | AppError {
  const head = headOf(sourceId);
  const maxBytes = limits.maxEventBytes;
  walk.maxDepth = limits.maxDepth;
  const deep = format === "msgpack";
  // OTLP answers records refused one by one with a partial success: a record too deep or too big
  // is left out and counted, the others are stored. Every other format refuses the whole request.
  const partial = format === "otlp-proto" || format === "otlp-json";
  let refused = 0;
  let refusal = "";
  let tooOld = 0;
  let tooFarAhead = 0;
  let at = 0;
  if (scratch.length > SCRATCH_KEEP_BYTES) scratch = Buffer.allocUnsafe(SCRATCH_BYTES); // a refused big body's

  for (let i = 0; i < events.length; i++) {
    let event = events[i];
    if (event instanceof Map) event = mapToObject(event, 1);
    if (typeof event !== "object" || event === null || Array.isArray(event) || !isPlain(event)) {
      if (walk.problem) return failed(i);
      return new AppError("not_an_event", `event ${i} is not an object (got ${describe(event)}); send an object or an array of objects`);
    }
    // Before normalising: a MessagePack timestamp is still a Date (read as is, not as its text).
    const dt = eventTimeOf(event as TimeFields, reception);
    if (deep ? normaliseObject(event as Record<string, unknown>, 1) : depthExceeds(event, 1, limits.maxDepth)) {
      if (!deep) walk.problemReason = "too_deep";
      if (partial) {
        leaveOut(failed(i).message);
        continue;
      }
      return failed(i);
    }

    let json = JSON.stringify(event);
    if (json.includes("\\u")) json = json.replace(JSONB_UNSAFE_ESCAPE, REPLACEMENT);
    // Bytes are at least characters: a longer text is refused before it is written anywhere.
    if (json.length > maxBytes) {
      if (partial) {
        leaveOut(tooLarge(i, Buffer.byteLength(json)).message);
        continue;
      }
      return tooLarge(i, Buffer.byteLength(json));
    }
    const need = at + TUPLE_HEAD + json.length * 3; // a character is at most 3 UTF-8 bytes
    if (need > scratch.length) grow(at, need);
    const length = writeTuple(scratch, at, head, dt, json);
    if (length - TUPLE_HEAD > maxBytes) {
      if (partial) {
        leaveOut(tooLarge(i, length - TUPLE_HEAD).message);
        continue; // `at` not moved: the next tuple overwrites this one
      }
      return tooLarge(i, length - TUPLE_HEAD);
    }
    at += length;
    // Counted once its tuple is kept (an OTLP record left out above is not stored, so not redated).
    if (placed === TOO_OLD) tooOld++;
    else if (placed === TOO_FAR_AHEAD) tooFarAhead++;
  }
  const rows = scratch.subarray(0, at);
  if (scratch.length > SCRATCH_KEEP_BYTES) scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  const encoded: Encoded = { rows, count: events.length - refused };
  if (refused > 0) {
    encoded.refused = refused;
    encoded.refusal = `${refused} of ${events.length} log records were refused; the first: ${refusal}`;
  }
  if (tooOld > 0) encoded.tooOld = tooOld;
  if (tooFarAhead > 0) encoded.tooFarAhead = tooFarAhead;
  return encoded;

  function leaveOut(why: string): void {
    if (refused++ === 0) refusal = why;
  }

  function tooLarge(i: number, bytes: number): AppError {
    return new AppError("event_too_large", `event ${i} is ${bytes} bytes as stored; the limit is ${maxBytes} bytes (INGEST_MAX_EVENT_BYTES)`);
  }

  function failed(i: number): AppError {
    const message = `event ${i}: ${walk.problem}`;
    walk.problem = "";
    return new AppError(walk.problemReason, message);
  }
}

interface TimeFields {
  dt?: unknown;
  timestamp?: unknown;
  date?: unknown;
}

/**
 * The event time: `dt`; an event without one (the field absent) takes the first of `timestamp`
 * (Vector's) and `date` (Fluent Bit's json formats) that reads as a time; else the reception time.
 * The fields stay in the event as sent. A time outside the reception's window is replaced by the
 * reception time, and written into the event (reception.ts); `placed` says which side it was on.
 * Two comparisons and no allocation for a time inside it.
 */
function eventTimeOf(event: TimeFields, reception: Reception): PgMicros {
  const field = event.dt;
  const sent = field !== undefined ? eventMicros(field) : (eventMicros(event.timestamp) ?? eventMicros(event.date));
  placed = IN_WINDOW;
  if (sent === undefined) return reception.at;
  if (sent >= reception.oldest && sent <= reception.newest) return sent;
  placed = sent < reception.oldest ? TOO_OLD : TOO_FAR_AHEAD;
  redate(event as Record<string, unknown>, sent);
  return reception.at;
}

/** The last source's tuple head, kept: building one per request was 0.6% of a json-1 profile. */
let lastHead: { sourceId: number; head: Uint8Array } = { sourceId: NaN, head: new Uint8Array(0) };
function headOf(sourceId: number): Uint8Array {
  if (lastHead.sourceId !== sourceId) lastHead = { sourceId, head: tupleHead(sourceId) };
  return lastHead.head;
}

/** A bigger scratch holding the first `used` bytes of the current one. */
function grow(used: number, need: number): void {
  const bigger = Buffer.allocUnsafe(Math.max(scratch.length * 2, need));
  scratch.copy(bigger, 0, 0, used);
  scratch = bigger;
}

function depthExceeds(value: object, depth: number, max: number): boolean {
  if (depth > max) {
    walk.problem = `nesting is deeper than ${max} levels (INGEST_MAX_DEPTH)`;
    return true;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      if (typeof item === "object" && item !== null && depthExceeds(item, depth + 1, max)) return true;
    }
  } else if (!JSON.isRawJSON(value)) {
    for (const key in value) {
      const item = (value as Record<string, unknown>)[key];
      if (typeof item === "object" && item !== null && depthExceeds(item, depth + 1, max)) return true;
    }
  }
  return false;
}

/** MessagePack values → JSON-safe values, in place. Returns true (with walk.problem set) on a value we refuse. */
function normaliseObject(object: Record<string, unknown>, depth: number): boolean {
  if (depth > walk.maxDepth) return tooDeep();
  for (const key in object) {
    const value = object[key];
    if (typeof value === "object" || typeof value === "number" || typeof value === "bigint" || value === undefined) {
      const normal = normaliseValue(value, depth + 1, key);
      if (normal === FAILED) return true;
      object[key] = normal;
    }
  }
  return false;
}

function normaliseArray(array: unknown[], depth: number): boolean {
  if (depth > walk.maxDepth) return tooDeep();
  for (let i = 0; i < array.length; i++) {
    const value = array[i];
    if (typeof value === "object" || typeof value === "number" || typeof value === "bigint" || value === undefined) {
      const normal = normaliseValue(value, depth + 1, i);
      if (normal === FAILED) return true;
      array[i] = normal;
    }
  }
  return false;
}

const FAILED = Symbol("failed");

/**
 * An integer as exact JSON, or (past what numeric holds) as the string of its digits. Its render
 * time is bounded before decoding: codec/bounds.ts caps BigInt sizes per value and per request.
 */
function bigintValue(value: bigint): unknown {
  const digits = value.toString();
  return digits.length - (value < 0n ? 1 : 0) > MAX_NUMERIC_DIGITS ? digits : JSON.rawJSON(digits);
}

function normaliseValue(value: unknown, depth: number, at: string | number): unknown {
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? value : Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
    case "bigint":
      return bigintValue(value);
    case "undefined":
      return null;
  }
  if (value === null) return null;
  if (Array.isArray(value)) return normaliseArray(value, depth) ? FAILED : value;
  if (isPlain(value as object)) return normaliseObject(value as Record<string, unknown>, depth) ? FAILED : value;
  if (value instanceof Map) {
    const object = mapToObject(value, depth);
    return object === undefined || normaliseObject(object, depth) ? FAILED : object;
  }
  if (Buffer.isBuffer(value)) return value.toString("base64");
  if (value instanceof EventTime) return value.text();
  if (value instanceof Date) {
    if (!Number.isNaN(value.getTime())) return dateText(value);
    walk.problem = `field ${JSON.stringify(at)} is an invalid MessagePack timestamp`;
  } else {
    walk.problem = `field ${JSON.stringify(at)} has an unsupported type (${describe(value)}); send JSON-compatible values`;
  }
  walk.problemReason = "unsupported_value";
  return FAILED;
}

/** A MessagePack map: scalar keys become strings; a null prototype keeps `__proto__` as plain data. */
function mapToObject(map: Map<unknown, unknown>, depth: number): Record<string, unknown> | undefined {
  if (depth > walk.maxDepth) {
    tooDeep();
    return undefined;
  }
  const object: Record<string, unknown> = Object.create(null);
  for (const [key, value] of map) {
    const type = typeof key;
    if (type !== "string" && type !== "number" && type !== "bigint" && type !== "boolean" && key !== null) {
      walk.problem = `a map key has an unsupported type (${describe(key)}); keys must be strings or numbers`;
      walk.problemReason = "unsupported_value";
      return undefined;
    }
    object[String(key)] = value;
  }
  return object;
}

function tooDeep(): true {
  walk.problem = `nesting is deeper than ${walk.maxDepth} levels (INGEST_MAX_DEPTH)`;
  walk.problemReason = "too_deep";
  return true;
}

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}
