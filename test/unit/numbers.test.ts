// The exact-number detour decision (src/ingest/numbers.ts): strings that merely look like numbers
// keep the fast parse; number tokens a double may not carry take the exact one. A wrong "false"
// would round a number silently, so the second list must always be true.
import { expect, test } from "bun:test";
import { decodeBody } from "../../src/ingest/decode";
import { needsExactNumbers } from "../../src/ingest/numbers";

const event = (value: string) => `{"message":"x","value":${value},"n":1}`;

test.each([
  ['"e123"'],
  ['"req-0001e240"'],
  ['"12345678901234567890"'],
  ['"4bf92f3577b34da6a3ce929d0e0e4736"'],
  ['"00f067aa0ba902b7e1234567"'],
  ['"node1234"'],
  ['"e2e100"'],
  ['"E-999 and 1e400 in prose"'],
  ['"escaped quote \\" then 12345678901234567890"'],
  ['"backslash at end \\\\"'],
  ["12345678"],
  ["1.5e30"],
  ["-0.5"],
  ["[1e99, 123456789012345]"],
])("fast path: %s", (value) => {
  expect(needsExactNumbers(event(value))).toBe(false);
  expect(needsExactNumbers(`[${event(value)},${event(value)}]`)).toBe(false);
});

test.each([
  ["12345678901234567"],
  ["1e400"],
  ["1e-400"],
  ["-0.0000000000000000000001"],
  ["1.5e308"],
  ["-12345678901234567890"],
  ["1E+400"],
  ["0.1e-999"],
])("detour: %s", (value) => {
  expect(needsExactNumbers(event(value))).toBe(true);
  // after strings holding candidates, escaped quotes and backslashes
  expect(needsExactNumbers(`{"a":"e123 \\" 12345678901234567","b\\\\":"x\\\\","c":${value}}`)).toBe(true);
  expect(needsExactNumbers(`["req-0001e240",${value}]`)).toBe(true);
});

test("the detour keeps what a double can't carry; the fast path gives the same values otherwise", () => {
  const decoded = decodeBody(Buffer.from(`[{"id":"req-0001e240","big":12345678901234567,"huge":1e400,"tiny":1e-400,"n":1.5}]`), "json") as Record<string, unknown>[];
  expect(JSON.stringify(decoded[0])).toBe(`{"id":"req-0001e240","big":12345678901234567,"huge":"1e400","tiny":"1e-400","n":1.5}`);
  const plain = decodeBody(Buffer.from(`{"id":"req-0001e240","s":"12345678901234567890","n":1.5}`), "json") as Record<string, unknown>[];
  expect(plain[0]).toEqual({ id: "req-0001e240", s: "12345678901234567890", n: 1.5 });
});
