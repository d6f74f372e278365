// Which errors say that PostgreSQL cannot serve now, rather than that a statement is wrong: the
// management and query listeners answer those 503 storage_unavailable + Retry-After
// (http/errors.ts), never 500. Pure: looks at an error's code only.

/** postgres.js's own codes for a connection lost, ended or never made, and the socket's. */
const CONNECTION_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECTION_ENDED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * SQLSTATEs of a server that cannot serve now: class 08 (connection exception), class 53
 * (insufficient resources: disk full, out of memory, too many connections), 57P01–57P03 (shut
 * down by an administrator or a crash, or starting up / in recovery).
 */
const UNAVAILABLE_STATE = /^(08|53)[0-9A-Z]{3}$|^57P0[1-3]$/;

/** Whether `error` (or the error it wraps, as `cause`) says PostgreSQL cannot serve now. */
export function isStorageUnavailable(error: unknown, depth = 0): boolean {
  if (error === null || typeof error !== "object" || depth > 3) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (CONNECTION_CODES.has(code) || UNAVAILABLE_STATE.test(code))) return true;
  return isStorageUnavailable((error as { cause?: unknown }).cause, depth + 1);
}
