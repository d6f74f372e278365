import { expect, test } from "bun:test";
import { dateText, epochMinute, eventMicros, eventTime, microsOfMillis, microsText, unixMicros, unixMicrosText } from "../../src/codec/time";

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
  // Years 1–1900 are in range (the lower bound once was 1901 through Date.UTC's 0–99 mapping).
  ["1850-06-01T12:00:00Z", "1850-06-01T12:00:00.000Z"],
  ["0500-06-01T12:00:00Z", "0500-06-01T12:00:00.000Z"],
  ["0100-01-01T00:00:00Z", "0100-01-01T00:00:00.000Z"],
  // Years 1–99 as text too (they were refused: Date.UTC read 0001 as 1901).
  ["0099-12-31T23:59:59Z", "0099-12-31T23:59:59.000Z"],
  ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"],
  // Microseconds of far years (one number of µs passes 2^53 after 2255).
  ["9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z"],
  ["2300-01-01T00:00:00.000001Z", "2300-01-01T00:00:00.000001Z"],
  ["0001-01-01T01:00:00+01:00", "0001-01-01T00:00:00.000Z"],
  [-5e9, "1811-07-23T15:06:40.000Z"],
  [-62135596800, "0001-01-01T00:00:00.000Z"],
])("eventTime(%p) = %p", (input, expected) => {
  expect(eventTime(input)).toBe(expected);
});

test.each(
  [
    undefined,
    null,
    true,
    {},
    [],
    "",
    "soon",
    "2026-13-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-11-21T25:00:00Z",
    "0000-12-31T23:59:59Z",
    "0001-01-01T00:00:00+01:00",
    -62135596801,
    NaN,
    Infinity,
    1e300,
    new Date("x"),
    "2026-11-21T12:30:41+25:00",
  ].map((v) => [v]),
)("eventTime(%p) is unreadable", (input) => {
  expect(eventTime(input)).toBeUndefined();
});

// The encoder's form (PostgreSQL's binary timestamptz: µs since 2000-01-01) says the same time as
// the text, across the range and both sides of the number/bigint switch (±285 years from 2000).
test.each([
  "0001-01-01T00:00:00.000000Z",
  "0099-12-31T23:59:59.999999Z",
  "1714-06-01T12:00:00.000001Z",
  "1715-06-01T12:00:00.000001Z",
  "1969-12-31T23:59:59.999999Z",
  "1999-12-31T23:59:59.999999Z",
  "2000-01-01T00:00:00.000000Z",
  "2026-11-21T12:30:41.695123Z",
  "2285-06-01T12:00:00.000001Z",
  "2286-06-01T12:00:00.000001Z",
  "9999-12-31T23:59:59.999999Z",
])("eventMicros(%p) reads back through microsText", (text) => {
  const micros = eventMicros(text)!;
  expect(microsText(micros)).toBe(text);
  expect(BigInt(micros)).toBe(BigInt(Date.parse(text) - Date.UTC(2000, 0, 1)) * 1000n + BigInt(Number(text.slice(23, 26))));
});

test("eventMicros is a number while exact, a bigint beyond", () => {
  expect(typeof eventMicros("2026-11-21T12:30:41Z")).toBe("number");
  expect(typeof eventMicros("9999-12-31T23:59:59Z")).toBe("bigint");
  expect(eventMicros("2000-01-01T00:00:00.000001Z")).toBe(1);
  expect(eventMicros("1999-12-31T23:59:59.999999Z")).toBe(-1);
  expect(microsOfMillis(Date.UTC(2000, 0, 1, 0, 0, 1))).toBe(1_000_000);
  expect(eventMicros("soon")).toBeUndefined();
});

test("dateText is Date#toISOString, in and out of the years 1–9999", () => {
  const dates = [
    new Date(0),
    new Date("2026-11-21T12:30:41.695Z"),
    new Date("2026-11-21T12:30:41.001Z"),
    new Date("0001-01-01T00:00:00.000Z"),
    new Date("9999-12-31T23:59:59.999Z"),
    new Date(8.64e15),
    new Date(-8.64e15),
    new Date(-1),
  ];
  for (const date of dates) expect(dateText(date)).toBe(date.toISOString());
});

test.each([
  ["1970-01-01T00:00:00Z", 0],
  ["1969-12-31T23:59:59.999999Z", -1],
  ["2000-01-01T00:00:59.999999Z", 15_778_080],
  ["1999-12-31T23:59:00Z", 15_778_079],
  ["0001-01-01T00:00:00.000001Z", Date.parse("0001-01-01T00:00:00Z") / 60_000],
  ["9999-12-31T23:59:59.999999Z", Math.floor(Date.parse("9999-12-31T23:59:00Z") / 60_000)],
])("epochMinute(%s) = %d, floored as PostgreSQL's floor(extract(epoch from dt) / 60)", (dt, minute) => {
  expect(epochMinute(eventMicros(dt)!)).toBe(minute);
});

test("unixMicros reads the query API's window texts as µs since the Unix epoch, and unixMicrosText writes them back", () => {
  const cases: [string, bigint][] = [
    ["1970-01-01T00:00:00.000000Z", 0n],
    ["1970-01-01T00:00:00.000001Z", 1n],
    ["1969-12-31T23:59:59.999999Z", -1n],
    ["2026-11-29T01:02:03.456789Z", 1_795_914_123_456_789n],
    ["0001-01-01T00:00:00.000000Z", -62_135_596_800_000_000n],
    ["9999-12-31T23:59:59.999999Z", 253_402_300_799_999_999n],
  ];
  for (const [text, micros] of cases) {
    expect([text, unixMicros(text)]).toEqual([text, micros]);
    expect(unixMicrosText(micros)).toBe(text);
  }
  expect(() => unixMicros("not a time")).toThrow();
});
