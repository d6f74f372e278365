import { expect, test } from "bun:test";
import { eventTime } from "../../src/ingest/time";

const at = "2026-11-21T12:30:41.695Z";
test.each([
  [1795264241.695, at],
  [1795264241695, at],
  [1795264241695123, "2026-11-21T12:30:41.695123Z"],
  [1795264241695123456n, "2026-11-21T12:30:41.695123Z"],
  ["1795264241", "2026-11-21T12:30:41.000Z"],
  ["2026-11-21T12:30:41.695123456Z", "2026-11-21T12:30:41.695123Z"],
  ["2026-11-21 13:30:41.695+01", at],
  ["2026-11-21", "2026-11-21T00:00:00.000Z"],
  ["2026-11-21T12:30Z", "2026-11-21T12:30:00.000Z"],
  [new Date(at), at],
  [0, "1970-01-01T00:00:00.000Z"],
])("eventTime(%p) = %p", (input, expected) => {
  expect(eventTime(input)).toBe(expected);
});

test.each([undefined, null, true, {}, [], "", "soon", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-21T25:00:00Z", "0099-01-01T00:00:00Z", NaN, Infinity, 1e300, new Date("x"), "2026-11-21T12:30:41+25:00"].map((v) => [v]))(
  "eventTime(%p) is unreadable",
  (input) => {
    expect(eventTime(input)).toBeUndefined();
  },
);
