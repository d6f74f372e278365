// store/unavailable.ts: which errors are "PostgreSQL cannot serve now" (a 503 with Retry-After on
// the management and query listeners) and which are a statement's own failure (a bug: 500).
import { expect, test } from "bun:test";
import { isStorageUnavailable } from "../../src/store/unavailable";

const coded = (code: string) => Object.assign(new Error(code), { code });

test("a lost or refused connection, a server shutting down, restarting or out of resources", () => {
  for (const code of ["CONNECTION_CLOSED", "CONNECTION_DESTROYED", "CONNECTION_ENDED", "CONNECT_TIMEOUT", "ECONNREFUSED", "ECONNRESET", "EPIPE"]) {
    expect([code, isStorageUnavailable(coded(code))]).toEqual([code, true]);
  }
  for (const code of ["08006", "08001", "57P01", "57P02", "57P03", "53100", "53200", "53300"])
    expect([code, isStorageUnavailable(coded(code))]).toEqual([code, true]);
  expect(isStorageUnavailable(new Error("wrapped", { cause: coded("57P01") }))).toBe(true);
});

test("a statement's own failure is not: cancelled, refused data, a missing table, no code", () => {
  for (const code of ["57014", "57P04", "57P05", "23505", "22P02", "42P01", "40001", "XX000", "080", "0800Z1", "ERR_X"]) {
    expect([code, isStorageUnavailable(coded(code))]).toEqual([code, false]);
  }
  expect(isStorageUnavailable(new Error("plain"))).toBe(false);
  expect(isStorageUnavailable(undefined)).toBe(false);
  expect(isStorageUnavailable("57P01")).toBe(false);
  expect(isStorageUnavailable({ code: 57 })).toBe(false);
});
