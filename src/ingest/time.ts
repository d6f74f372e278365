// The event time column (`dt`) from an event's `dt` field, per the contract: numbers by magnitude
// (s / ms / µs / ns), RFC 3339 / ISO 8601 strings (with `T` or a space), digit strings as
// numbers, MessagePack timestamps as Dates. Returns the timestamptz text (µs precision), or
// undefined when the value cannot be read: the caller then uses the reception time and keeps the
// event's own `dt` untouched. Never throws.

// Not Date.UTC(1, 0, 1): Date.UTC maps years 0–99 to 1900–1999, which made every dt before 1901
// (and every `from` before 1901 in the query API) unreadable.
const MIN_MS = new Date(0).setUTCFullYear(1, 0, 1);
const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?\s*(Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?$/;
const DIGITS = /^-?\d+(?:\.\d+)?$/;

export function eventTime(dt: unknown): string | undefined {
  switch (typeof dt) {
    case "number":
      return fromNumber(dt);
    case "bigint":
      return fromBigInt(dt);
    case "string":
      return fromString(dt);
    case "object":
      if (dt instanceof Date) return fromMicros(dt.getTime() * 1000);
      // An integer beyond 2^53 that the JSON decoder kept exact.
      return dt !== null && JSON.isRawJSON(dt) ? fromString((dt as { rawJSON: string }).rawJSON) : undefined;
    default:
      return undefined;
  }
}

/** Seconds below 1e11 (until year 5138), then milliseconds, microseconds, nanoseconds. */
function fromNumber(n: number): string | undefined {
  if (!Number.isFinite(n)) return undefined;
  const size = Math.abs(n);
  const micros = size < 1e11 ? n * 1e6 : size < 1e14 ? n * 1e3 : size < 1e17 ? n : n / 1e3;
  return fromMicros(Math.round(micros));
}

function fromBigInt(n: bigint): string | undefined {
  const size = n < 0n ? -n : n;
  if (size < 100_000_000_000_000_000n) return fromNumber(Number(n));
  return fromMicros(Number(n / 1000n));
}

function fromString(text: string): string | undefined {
  const s = text.trim();
  if (s.length === 0 || s.length > 64) return undefined;
  if (DIGITS.test(s)) {
    return s.includes(".") || s.length <= 15 ? fromNumber(Number(s)) : fromBigInt(BigInt(s));
  }
  const m = ISO.exec(s);
  if (!m) return undefined;
  const [, y, mo, d, h = "0", mi = "0", sec = "0", frac = "", zone] = m;
  const year = +y!, month = +mo!, day = +d!, hour = +h, minute = +mi, second = Math.min(+sec, 59);
  if (month < 1 || month > 12 || hour > 23 || minute > 59) return undefined;
  // Not Date.UTC: it maps years 0–99 to 1900–1999 (0001-01-01 was read as 1901, then refused).
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  const local = date.getTime();
  if (date.getUTCDate() !== day) return undefined; // 31 April and alike
  let offsetMinutes = 0;
  if (zone && zone !== "Z" && zone !== "z" && zone !== "UTC" && zone !== "GMT") {
    const digits = zone.replace(":", "");
    const zh = +digits.slice(1, 3), zm = digits.length > 3 ? +digits.slice(3, 5) : 0;
    if (zh > 23 || zm > 59) return undefined;
    offsetMinutes = (zh * 60 + zm) * (zone[0] === "-" ? -1 : 1);
  }
  // Milliseconds and the microseconds beyond them apart: as one number of microseconds, times
  // after 2255 pass 2^53 and lost their last digits (9999-12-31T23:59:59.999999Z was refused).
  const sub = Number(frac.padEnd(6, "0").slice(0, 6));
  return fromParts(local - offsetMinutes * 60_000 + Math.floor(sub / 1000), sub % 1000);
}

function fromMicros(micros: number): string | undefined {
  if (!Number.isFinite(micros)) return undefined;
  const ms = Math.floor(micros / 1000);
  return fromParts(ms, micros - ms * 1000);
}

/** Milliseconds since the epoch and 0–999 microseconds more, as the timestamptz text. */
function fromParts(ms: number, rest: number): string | undefined {
  if (ms < MIN_MS || ms > MAX_MS) return undefined;
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
function isoMillis(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedPrefix = new Date(second * 1000).toISOString().slice(0, 19);
  }
  const milli = ms - second * 1000;
  return `${cachedPrefix}.${milli < 10 ? "00" : milli < 100 ? "0" : ""}${milli}Z`;
}
