// The event time column (`dt`) from an event's `dt` field, per the contract: numbers by magnitude
// (s / ms / µs / ns), RFC 3339 / ISO 8601 strings (with `T` or a space), digit strings as
// numbers, MessagePack timestamps as Dates, Fluent's EventTime. Returns the time as PostgreSQL's
// binary timestamptz (eventMicros: µs since 2000-01-01, what the encoder writes) or as its text
// (eventTime: µs precision, what the query API reads), or undefined when the value cannot be read:
// the caller then uses the reception time and keeps the event's own `dt` untouched. Never throws.
import { EventTime } from "./fluent";

// Not Date.UTC(1, 0, 1): Date.UTC maps years 0–99 to 1900–1999, which made every dt before 1901
// (and every `from` before 1901 in the query API) unreadable.
const MIN_MS = new Date(0).setUTCFullYear(1, 0, 1);
const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?\s*(Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?$/;
const DIGITS = /^-?\d+(?:\.\d+)?$/;

/**
 * Microseconds since 2000-01-01T00:00:00Z, PostgreSQL's epoch: a number while it is exact (within
 * about 285 years of 2000), a bigint beyond (years 0001–1714 and 2286–9999).
 */
export type PgMicros = number | bigint;

/** PostgreSQL's epoch in Unix milliseconds. */
const PG_EPOCH_MS = Date.UTC(2000, 0, 1);

/** The parse's result (read() sets it): milliseconds since the Unix epoch and 0–999 µs more. */
const parsed = { ms: 0, rest: 0 };

export function eventTime(dt: unknown): string | undefined {
  return read(dt) ? text(parsed.ms, parsed.rest) : undefined;
}

export function eventMicros(dt: unknown): PgMicros | undefined {
  return read(dt) ? pgMicros(parsed.ms, parsed.rest) : undefined;
}

/** A Unix time in milliseconds (now, for the reception time) as PgMicros. */
export function microsOfMillis(ms: number): PgMicros {
  return pgMicros(ms, 0);
}

function pgMicros(ms: number, rest: number): PgMicros {
  const micros = (ms - PG_EPOCH_MS) * 1000 + rest;
  return Number.isSafeInteger(micros) ? micros : BigInt(ms - PG_EPOCH_MS) * 1000n + BigInt(rest);
}

/** PgMicros as the query API shows a time: RFC 3339 UTC with six fraction digits. */
export function microsText(micros: PgMicros): string {
  let ms: number, rest: number;
  if (typeof micros === "number") {
    ms = Math.floor(micros / 1000);
    rest = micros - ms * 1000;
  } else {
    const whole = micros / 1000n - (micros % 1000n < 0n ? 1n : 0n);
    ms = Number(whole);
    rest = Number(micros - whole * 1000n);
  }
  return `${isoMillis(ms + PG_EPOCH_MS).slice(0, 23)}${String(rest).padStart(3, "0")}Z`;
}

/** floor(extract(epoch from dt) / 60): the Unix minute of PgMicros (blocks' and chunks' per-minute counts). */
export function epochMinute(micros: PgMicros): number {
  const pgEpochMinutes = PG_EPOCH_MS / 60_000;
  if (typeof micros === "number") return Math.floor(micros / 60_000_000) + pgEpochMinutes;
  const whole = micros / 60_000_000n;
  return Number(micros % 60_000_000n < 0n ? whole - 1n : whole) + pgEpochMinutes;
}

/** PostgreSQL's epoch in Unix microseconds. */
const PG_EPOCH_US = BigInt(PG_EPOCH_MS) * 1000n;

/**
 * A time's microseconds since the Unix epoch, as (extract(epoch from dt) * 1000000)::bigint gives
 * them: of an RFC 3339 text (the query API's windows and cursors), or of PgMicros.
 */
export function unixMicros(dt: string | PgMicros): bigint {
  const micros = typeof dt === "string" ? eventMicros(dt) : dt;
  if (micros === undefined) throw new Error(`not a time: ${JSON.stringify(dt).slice(0, 64)}`);
  return BigInt(micros) + PG_EPOCH_US;
}

/** microsText of microseconds since the Unix epoch. */
export function unixMicrosText(micros: bigint): string {
  return microsText(micros - PG_EPOCH_US);
}

function read(dt: unknown): boolean {
  switch (typeof dt) {
    case "number":
      return fromNumber(dt);
    case "bigint":
      return fromBigInt(dt);
    case "string":
      return fromString(dt);
    case "object":
      if (dt instanceof Date) return fromMicros(dt.getTime() * 1000);
      if (dt instanceof EventTime) return fromParts(dt.seconds * 1000 + Math.floor(dt.nanoseconds / 1e6), Math.floor(dt.nanoseconds / 1000) % 1000);
      // An integer beyond 2^53 that the JSON decoder kept exact.
      return dt !== null && JSON.isRawJSON(dt) && fromString((dt as { rawJSON: string }).rawJSON);
    default:
      return false;
  }
}

/** Seconds below 1e11 (until year 5138), then milliseconds, microseconds, nanoseconds. */
function fromNumber(n: number): boolean {
  if (!Number.isFinite(n)) return false;
  const size = Math.abs(n);
  const micros = size < 1e11 ? n * 1e6 : size < 1e14 ? n * 1e3 : size < 1e17 ? n : n / 1e3;
  return fromMicros(Math.round(micros));
}

function fromBigInt(n: bigint): boolean {
  const size = n < 0n ? -n : n;
  if (size < 100_000_000_000_000_000n) return fromNumber(Number(n));
  return fromMicros(Number(n / 1000n));
}

function fromString(value: string): boolean {
  const s = value.trim();
  if (s.length === 0 || s.length > 64) return false;
  if (DIGITS.test(s)) {
    return s.includes(".") || s.length <= 15 ? fromNumber(Number(s)) : fromBigInt(BigInt(s));
  }
  const m = ISO.exec(s);
  if (!m) return false;
  const [, y, mo, d, h = "0", mi = "0", sec = "0", frac = "", zone] = m;
  const year = +y!,
    month = +mo!,
    day = +d!,
    hour = +h,
    minute = +mi,
    second = Math.min(+sec, 59);
  if (month < 1 || month > 12 || hour > 23 || minute > 59) return false;
  // Not Date.UTC: it maps years 0–99 to 1900–1999 (0001-01-01 was read as 1901, then refused).
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  const local = date.getTime();
  if (date.getUTCDate() !== day) return false; // 31 April and alike
  let offsetMinutes = 0;
  if (zone && zone !== "Z" && zone !== "z" && zone !== "UTC" && zone !== "GMT") {
    const digits = zone.replace(":", "");
    const zh = +digits.slice(1, 3),
      zm = digits.length > 3 ? +digits.slice(3, 5) : 0;
    if (zh > 23 || zm > 59) return false;
    offsetMinutes = (zh * 60 + zm) * (zone[0] === "-" ? -1 : 1);
  }
  // Milliseconds and the microseconds beyond them apart: as one number of microseconds, times
  // after 2255 pass 2^53 and lose their last digits (9999-12-31T23:59:59.999999Z would be refused).
  const sub = Number(frac.padEnd(6, "0").slice(0, 6));
  return fromParts(local - offsetMinutes * 60_000 + Math.floor(sub / 1000), sub % 1000);
}

function fromMicros(micros: number): boolean {
  if (!Number.isFinite(micros)) return false;
  const ms = Math.floor(micros / 1000);
  return fromParts(ms, micros - ms * 1000);
}

/** Milliseconds since the epoch and 0–999 microseconds more, when in range: into `parsed`. */
function fromParts(ms: number, rest: number): boolean {
  if (ms < MIN_MS || ms > MAX_MS) return false;
  parsed.ms = ms;
  parsed.rest = rest;
  return true;
}

/** The timestamptz text: three fraction digits, six when there are microseconds. */
function text(ms: number, rest: number): string {
  const iso = isoMillis(ms);
  return rest === 0 ? iso : `${iso.slice(0, 23)}${String(rest).padStart(3, "0")}Z`;
}

/**
 * Date#toISOString, with "YYYY-MM-DDTHH:MM:SS" kept for the last second seen: events of one body
 * are mostly within a second, and toISOString was 6.7% of a json-100 profile's samples (one per
 * event). Same text as toISOString for every ms in MIN_MS..MAX_MS (4-digit years).
 */
let cachedSecond = NaN;
let cachedPrefix = "";

/** Date#toISOString through the per-second cache (a MessagePack timestamp in every event: 4.3% of a @logtail/node body's profile). */
export function dateText(date: Date): string {
  const ms = date.getTime();
  return ms >= MIN_MS && ms <= MAX_MS ? isoMillis(ms) : date.toISOString();
}

function isoMillis(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedPrefix = new Date(second * 1000).toISOString().slice(0, 19);
  }
  const milli = ms - second * 1000;
  return `${cachedPrefix}.${milli < 10 ? "00" : milli < 100 ? "0" : ""}${milli}Z`;
}
