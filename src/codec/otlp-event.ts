// What an OTLP LogRecord becomes, shared by the protobuf and JSON decoders: the event time from
// nanoseconds, OTLP's severity names, attribute keys nested at their dots (so `service.name` is a
// path the query language reaches), and the resource split into `service` and `resource`.
// docs/shippers.md ("OpenTelemetry") documents the shape; this file is its one implementation.
import { dateText } from "./time";

/** OTLP's short names for severity numbers 1–24 (the data model's SeverityNumber table). */
const SEVERITY_NAMES = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"].flatMap((name) => [name, `${name}2`, `${name}3`, `${name}4`]);

/** `level` when a record has no severity text: OTLP's short name, or undefined (0, unspecified). */
export function severityName(number: number): string | undefined {
  return SEVERITY_NAMES[number - 1];
}

/** JSON senders may write the enum's name (`SEVERITY_NUMBER_ERROR`): its number. */
const SEVERITY_NUMBERS = new Map(SEVERITY_NAMES.map((name, i) => [`SEVERITY_NUMBER_${name}`, i + 1]));
export function severityNumberOf(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isInteger(value) && value > 0 && value <= 24 ? value : undefined;
  return typeof value === "string" ? (SEVERITY_NUMBERS.get(value) ?? severityNumberOf(Number(value))) : undefined;
}

const TWO_32 = 4294967296;
/** 2^32 mod 10^6. */
const TWO_32_MOD_MILLION = 967296;

/**
 * A fixed64 of nanoseconds since the Unix epoch (low, high 32 bits) as RFC 3339 with nine fraction
 * digits, exact, without BigInt: the high part's remainder by 10^6 is computed exactly, so the
 * rounding of the large product cancels. Undefined for 0 (OTLP's "unknown").
 */
export function nanosText(lo: number, hi: number): string | undefined {
  if (lo === 0 && hi === 0) return undefined;
  const high = hi * TWO_32; // exact: 32 significant bits
  const highRemainder = ((hi % 1e6) * TWO_32_MOD_MILLION) % 1e6;
  const highMillis = Math.round((high - highRemainder) / 1e6);
  const low = lo + highRemainder;
  return millisText(highMillis + Math.floor(low / 1e6), low % 1e6);
}

/** Nanoseconds as OTLP/JSON writes them (a string of digits, or a number): as nanosText. */
export function nanosTextOf(value: unknown): string | undefined {
  if (typeof value === "number") {
    if (!(value > 0 && value < 2 ** 64)) return undefined;
    const ms = Math.floor(value / 1e6);
    return millisText(ms, Math.max(0, Math.min(999_999, Math.round(value - ms * 1e6))));
  }
  if (typeof value !== "string" || !/^\d{1,20}$/.test(value) || /^0+$/.test(value)) return undefined;
  const ms = value.length > 6 ? Number(value.slice(0, -6)) : 0;
  if (ms >= 2 ** 64 / 1e6) return undefined;
  return millisText(ms, Number(value.slice(-6)));
}

/**
 * Nanoseconds since the epoch (as ms and 0–999,999 ns more) → RFC 3339 UTC with nine fraction
 * digits. "YYYY-MM-DDTHH:MM:SS." is kept for the last second seen, as time.ts does: a batch's
 * records are mostly within one second (279 → 95 ns a record, Bun 1.4.5).
 */
export function millisText(ms: number, nanos: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedPrefix = dateText(new Date(second * 1000)).slice(0, 20);
  }
  return `${cachedPrefix}${String((ms - second * 1000) * 1e6 + nanos).padStart(9, "0")}Z`;
}
let cachedSecond = NaN;
let cachedPrefix = "";

/** An AnyValue double as JSON can hold it (the strings docs/api.md, "What is stored", gives NaN and the infinities). */
export function doubleValue(value: number): number | string {
  return Number.isFinite(value) ? value : Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
}

/** An int64 from the reader (a number, or digits past 2^53) as exact JSON. */
export function intValue(value: number | string): unknown {
  return typeof value === "number" ? value : JSON.rawJSON(value);
}

/** Sets a key as plain data: `__proto__` never touches a prototype. */
export function setKey(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

// Dotted keys of the attribute list being read wait here until the list ends, then nest: plain keys
// first, so which one wins a clash does not depend on the order the sender wrote them in. One list
// at a time (no message holding attributes nests in another); module scratch, no allocation per list.
const pendingKeys: string[] = [];
const pendingValues: unknown[] = [];

/** Drops what a refused body left pending: each decode starts with this. */
export function resetAttributes(): void {
  pendingKeys.length = 0;
  pendingValues.length = 0;
}

/** One attribute of a list; call nestAttributes(target) when the list's message ends. */
export function addAttribute(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key.includes(".")) {
    pendingKeys.push(key);
    pendingValues.push(value);
  } else setKey(target, key, value);
}

/**
 * Nests the list's dotted keys at their dots (`service.name` → `service: {name}`). A key that would
 * land on or under a value of another kind (`a` = 1 beside `a.b` = 2, or a key with an empty part
 * like `a..b`) stays flat under its full name: nothing is lost, and the same list always gives the
 * same event. Two identical keys: the last one wins.
 */
export function nestAttributes(target: Record<string, unknown>): void {
  for (let i = 0; i < pendingKeys.length; i++) nest(target, pendingKeys[i]!, pendingValues[i]);
  pendingKeys.length = 0;
  pendingValues.length = 0;
}

/** A key's parts, kept: a batch repeats the same few keys in every record (bounded, cleared when full). */
const PARTS = new Map<string, string[]>();
const PARTS_MAX = 4096;

function nest(target: Record<string, unknown>, key: string, value: unknown): void {
  let parts = PARTS.get(key);
  if (parts === undefined) {
    if (PARTS.size >= PARTS_MAX) PARTS.clear();
    parts = key.split(".");
    PARTS.set(key, parts);
  }
  if (parts.includes("")) return setKey(target, key, value);
  let node = target;
  for (let i = 0; i < parts.length - 1; i++) {
    const part = parts[i]!;
    const existing = Object.hasOwn(node, part) ? node[part] : undefined;
    if (existing === undefined) {
      const child: Record<string, unknown> = {};
      setKey(node, part, child);
      node = child;
    } else if (isObject(existing)) node = existing as Record<string, unknown>;
    else return setKey(target, key, value);
  }
  const leaf = parts[parts.length - 1]!;
  const existing = Object.hasOwn(node, leaf) ? node[leaf] : undefined;
  if (existing !== undefined && (isObject(existing) || isObject(value))) return setKey(target, key, value);
  setKey(node, leaf, value);
}

function isObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !JSON.isRawJSON(value);
}

/**
 * A resource's attributes (nested) → the event's `service` (the `service.*` attributes, the field
 * every query filters by: `service.name=checkout`) and `resource` (the rest). Either may be undefined.
 */
export function splitResource(attributes: Record<string, unknown> | undefined): { service: unknown; resource: Record<string, unknown> | undefined } {
  if (attributes === undefined) return { service: undefined, resource: undefined };
  const service = Object.hasOwn(attributes, "service") ? attributes.service : undefined;
  if (!isObject(service)) return { service: undefined, resource: attributes };
  delete attributes.service;
  for (const _ in attributes) return { service, resource: attributes };
  return { service, resource: undefined };
}

/** The event of one record, always built with the same keys in the same order (one shape for the engine). */
export function logEvent(
  dt: string | undefined,
  level: string | undefined,
  severityNumber: number | undefined,
  message: string | undefined,
  body: unknown,
  traceId: string | undefined,
  spanId: string | undefined,
  flags: number | undefined,
  eventName: string | undefined,
  attributes: Record<string, unknown> | undefined,
) {
  return {
    dt,
    level,
    severity_number: severityNumber,
    message,
    body,
    trace_id: traceId,
    span_id: spanId,
    flags,
    event_name: eventName,
    attributes,
    service: undefined as unknown,
    resource: undefined as Record<string, unknown> | undefined,
    scope: undefined as Record<string, unknown> | undefined,
  };
}
export type LogEvent = ReturnType<typeof logEvent>;

/** What a ResourceLogs or ScopeLogs gives its records, set once that message has been read (fields may come in any order). */
export function finishRecords(events: unknown[], from: number, service: unknown, resource: Record<string, unknown> | undefined): void {
  for (let i = from; i < events.length; i++) {
    const event = events[i] as LogEvent;
    event.service = service;
    event.resource = resource;
  }
}

export function finishScope(events: unknown[], from: number, scope: Record<string, unknown> | undefined): void {
  for (let i = from; i < events.length; i++) (events[i] as LogEvent).scope = scope;
}

/** A trace or span id that is all zeros is OTLP's "none". */
export function idOrUndefined(hex: string): string | undefined {
  return hex.length === 0 || /^0+$/.test(hex) ? undefined : hex;
}
