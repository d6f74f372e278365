// OTLP/HTTP protobuf (an ExportLogsServiceRequest) → one event per LogRecord, in one pass over the
// bytes (protobuf.ts), building the events directly (no message objects in between). Bounded while
// it reads: AnyValue nesting past INGEST_MAX_DEPTH and more values than bounds.ts allows a request
// are refusals before the next object is built; the records were counted before decoding
// (bounds.ts → countAt). Field numbers: opentelemetry/proto/{collector/logs,logs,common,resource}/v1.
import { AppError } from "../errors";
import { FIXED32, FIXED64, LEN, Reader, VARINT, WireError } from "./protobuf";
import {
  addAttribute,
  doubleValue,
  finishRecords,
  finishScope,
  idOrUndefined,
  intValue,
  logEvent,
  nanosText,
  nestAttributes,
  resetAttributes,
  setKey,
  severityName,
  splitResource,
} from "./otlp-event";

export interface WireLimits {
  maxDepth: number;
  /** AnyValues and KeyValues a request may hold (bounds.ts's maxValues). */
  maxValues: number;
}

const tag = (field: number, wireType: number) => (field << 3) | wireType;
const T_LEN_1 = tag(1, LEN),
  T_LEN_2 = tag(2, LEN),
  T_LEN_3 = tag(3, LEN);

// The decode in progress: one at a time per thread, so module state costs no allocation per call.
let values = 0;
let maxValues = 0;
let maxDepth = 0;

export function decodeOtlpProto(body: Buffer, limits: WireLimits): unknown[] | AppError {
  const reader = new Reader(body);
  values = 0;
  maxValues = limits.maxValues;
  maxDepth = limits.maxDepth;
  const events: unknown[] = [];
  resetAttributes();
  try {
    const end = body.length;
    while (reader.pos < end) {
      const t = reader.tag();
      if (t === T_LEN_1) resourceLogs(reader, reader.end(end), events);
      else reader.skip(t & 7, end);
    }
  } catch (error) {
    if (error instanceof WireError) return new AppError("body_undecodable", `Couldn't parse OTLP protobuf content: ${error.problem}`);
    if (error instanceof AppError) return error;
    throw error;
  }
  return events;
}

/** After a message's fields: a field that ran past its message's end (within the body) is a cut or a lie. */
function ended(reader: Reader, end: number): void {
  if (reader.pos !== end) throw new WireError("a field runs past the end of its message");
}

function resourceLogs(reader: Reader, end: number, events: unknown[]): void {
  const from = events.length;
  let attributes: Record<string, unknown> | undefined;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) attributes = resource(reader, reader.end(end));
    else if (t === T_LEN_2) scopeLogs(reader, reader.end(end), events);
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  const { service, resource: rest } = splitResource(attributes);
  finishRecords(events, from, service, rest);
}

function resource(reader: Reader, end: number): Record<string, unknown> | undefined {
  const attributes: Record<string, unknown> = {};
  let any = false;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) {
      keyValue(reader, reader.end(end), attributes);
      any = true;
    } else reader.skip(t & 7, end);
  }
  ended(reader, end);
  nestAttributes(attributes);
  return any ? attributes : undefined;
}

function scopeLogs(reader: Reader, end: number, events: unknown[]): void {
  const from = events.length;
  let scopeOf: Record<string, unknown> | undefined;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_2) events.push(logRecord(reader, reader.end(end)));
    else if (t === T_LEN_1) scopeOf = scope(reader, reader.end(end));
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  if (scopeOf !== undefined) finishScope(events, from, scopeOf);
}

function scope(reader: Reader, end: number): Record<string, unknown> | undefined {
  let name: string | undefined, version: string | undefined;
  let attributes: Record<string, unknown> | undefined;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) name = reader.string(end);
    else if (t === T_LEN_2) version = reader.string(end);
    else if (t === T_LEN_3) keyValue(reader, reader.end(end), (attributes ??= {}));
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  if (attributes) nestAttributes(attributes);
  if (!name && !version && !attributes) return undefined;
  return { name: name || undefined, version: version || undefined, attributes };
}

const T_TIME = tag(1, FIXED64),
  T_OBSERVED = tag(11, FIXED64),
  T_SEVERITY = tag(2, VARINT),
  T_SEVERITY_TEXT = tag(3, LEN);
const T_BODY = tag(5, LEN),
  T_ATTRIBUTE = tag(6, LEN),
  T_FLAGS = tag(8, FIXED32),
  T_TRACE = tag(9, LEN),
  T_SPAN = tag(10, LEN),
  T_EVENT_NAME = tag(12, LEN);

function logRecord(reader: Reader, end: number) {
  let dt: string | undefined;
  let observedLo = 0,
    observedHi = 0;
  let severity = 0,
    severityText = "";
  let body: unknown;
  let attributes: Record<string, unknown> | undefined;
  let flags = 0;
  let traceId = "",
    spanId = "",
    eventName = "";
  while (reader.pos < end) {
    const t = reader.tag();
    switch (t) {
      case T_TIME:
        reader.fixed64();
        dt = nanosText(reader.lo, reader.hi);
        break;
      case T_OBSERVED: // only read when the record has no time of its own
        reader.fixed64();
        observedLo = reader.lo;
        observedHi = reader.hi;
        break;
      case T_SEVERITY:
        severity = reader.uint();
        break;
      case T_SEVERITY_TEXT:
        severityText = reader.string(end);
        break;
      case T_BODY:
        body = anyValue(reader, reader.end(end), 1);
        break;
      case T_ATTRIBUTE:
        keyValue(reader, reader.end(end), (attributes ??= {}));
        break;
      case T_FLAGS:
        flags = reader.fixed32();
        break;
      case T_TRACE:
        traceId = reader.hex(end);
        break;
      case T_SPAN:
        spanId = reader.hex(end);
        break;
      case T_EVENT_NAME:
        eventName = reader.string(end);
        break;
      default:
        reader.skip(t & 7, end);
    }
  }
  ended(reader, end);
  if (attributes) nestAttributes(attributes);
  const level = severityText || severityName(severity);
  const text = typeof body === "string";
  return logEvent(
    dt ?? nanosText(observedLo, observedHi),
    level,
    severity > 0 ? severity : undefined,
    text ? (body as string) : undefined,
    text || body === null ? undefined : body,
    idOrUndefined(traceId),
    idOrUndefined(spanId),
    flags || undefined,
    eventName || undefined,
    attributes,
  );
}

/** A KeyValue of an attribute list into `target` (dotted keys nest once the list ends). */
function keyValue(reader: Reader, end: number, target: Record<string, unknown>): void {
  count();
  let key = "";
  let value: unknown = null;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) key = reader.string(end);
    else if (t === T_LEN_2) value = anyValue(reader, reader.end(end), 1);
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  addAttribute(target, key, value);
}

const T_STRING = tag(1, LEN),
  T_BOOL = tag(2, VARINT),
  T_INT = tag(3, VARINT),
  T_DOUBLE = tag(4, FIXED64);
const T_ARRAY = tag(5, LEN),
  T_KVLIST = tag(6, LEN),
  T_BYTES = tag(7, LEN);

/** An AnyValue as JSON: kvlist → object, array → array, bytes → base64, int64 exact, empty → null. */
function anyValue(reader: Reader, end: number, depth: number): unknown {
  if (depth > maxDepth) throw tooDeep();
  count();
  let value: unknown = null;
  while (reader.pos < end) {
    const t = reader.tag();
    switch (t) {
      case T_STRING:
        value = reader.string(end);
        break;
      case T_BOOL:
        value = reader.uint() !== 0;
        break;
      case T_INT:
        value = intValue(reader.int64());
        break;
      case T_DOUBLE:
        value = doubleValue(reader.double());
        break;
      case T_ARRAY:
        value = arrayValue(reader, reader.end(end), depth);
        break;
      case T_KVLIST:
        value = kvlistValue(reader, reader.end(end), depth);
        break;
      case T_BYTES:
        value = reader.base64(end);
        break;
      default:
        reader.skip(t & 7, end);
    }
  }
  ended(reader, end);
  return value;
}

function arrayValue(reader: Reader, end: number, depth: number): unknown[] {
  const array: unknown[] = [];
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) array.push(anyValue(reader, reader.end(end), depth + 1));
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  return array;
}

function kvlistValue(reader: Reader, end: number, depth: number): Record<string, unknown> {
  if (depth + 1 > maxDepth) throw tooDeep();
  const object: Record<string, unknown> = {};
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) kvInList(reader, reader.end(end), object, depth + 1);
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  return object;
}

function kvInList(reader: Reader, end: number, target: Record<string, unknown>, depth: number): void {
  count();
  let key = "";
  let value: unknown = null;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LEN_1) key = reader.string(end);
    else if (t === T_LEN_2) value = anyValue(reader, reader.end(end), depth);
    else reader.skip(t & 7, end);
  }
  ended(reader, end);
  setKey(target, key, value);
}

function count(): void {
  if (++values > maxValues) {
    throw new AppError(
      "too_many_values",
      `Request holds more than ${maxValues} values (attributes and AnyValues); the limit is one per 16 bytes of INGEST_MAX_DECOMPRESSED_BYTES. Split it into smaller requests.`,
    );
  }
}

function tooDeep(): AppError {
  return new AppError("too_deep", `an AnyValue is nested deeper than ${maxDepth} levels (INGEST_MAX_DEPTH)`);
}
