// The exact-number detour decision (src/codec/numbers.ts): strings that merely look like numbers
// keep the fast parse; number tokens a double may not carry take the exact one. A wrong "false"
// would round a number silently, so the second list must always be true.
import { expect, test } from "bun:test";
import { decodeBody, keepExactNumbers } from "../../src/codec/decode";
import { holdsDoubtfulNumber, needsExactNumbers } from "../../src/codec/numbers";

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

test.each([["12345678901234567"], ["1e400"], ["1e-400"], ["-0.0000000000000000000001"], ["1.5e308"], ["-12345678901234567890"], ["1E+400"], ["0.1e-999"]])(
  "detour: %s",
  (value) => {
    expect(needsExactNumbers(event(value))).toBe(true);
    // after strings holding candidates, escaped quotes and backslashes
    expect(needsExactNumbers(`{"a":"e123 \\" 12345678901234567","b\\\\":"x\\\\","c":${value}}`)).toBe(true);
    expect(needsExactNumbers(`["req-0001e240",${value}]`)).toBe(true);
  },
);

test("the detour keeps what a double can't carry; the fast path gives the same values otherwise", () => {
  const decoded = decodeBody(Buffer.from(`[{"id":"req-0001e240","big":12345678901234567,"huge":1e400,"tiny":1e-400,"n":1.5}]`), "json") as Record<
    string,
    unknown
  >[];
  expect(JSON.stringify(decoded[0])).toBe(`{"id":"req-0001e240","big":12345678901234567,"huge":"1e400","tiny":"1e-400","n":1.5}`);
  const plain = decodeBody(Buffer.from(`{"id":"req-0001e240","s":"12345678901234567890","n":1.5}`), "json") as Record<string, unknown>[];
  expect(plain[0]).toEqual({ id: "req-0001e240", s: "12345678901234567890", n: 1.5 });
});

test("a parsed value is doubtful when it holds an integer beyond 2^53, ±Infinity or 0, at any depth", () => {
  for (const text of ["12345678901234567", "1e400", "-1e400", "1e-400", "0", "-0", "0.0", "9007199254740992", "1e20", "1.5e308"]) {
    expect(holdsDoubtfulNumber(JSON.parse(`{"a":[{"b":${text}}]}`))).toBe(true);
  }
  for (const text of ["1", "-1.5", "9007199254740991", "0.1", "5e-324", '"0"', "null", "true"]) {
    expect(holdsDoubtfulNumber(JSON.parse(`{"a":[{"b":${text}}],"__proto__":{"c":1}}`))).toBe(false);
  }
  expect(holdsDoubtfulNumber(JSON.parse(`{"__proto__":{"c":0}}`))).toBe(true);
  expect(holdsDoubtfulNumber(JSON.parse(`${"[".repeat(5000)}0${"]".repeat(5000)}`))).toBe(true);
});

test.each([
  ['{"id":"e2e100","zero":0,"n":1}'],
  ['{"id":"req-0001e240","tiny":1e-400,"zero":0}'],
  ['{"id":"12345678901234567890","under":0.00000000000000000000000000001e-300}'],
  ['{"s":"1e-400","n":0}'],
  ['{"big":-12345678901234567890,"s":"node1234"}'],
  ['{"huge":1E+400,"neg":-0,"f":0.0}'],
  ['[{"a":"4bf92f3577b34da6a3ce929d0e0e4736"},{"b":1e20},{"c":12345678901234567}]'],
])("decode gives what the exact-number parse gives: %s", (text) => {
  const expected = JSON.stringify(JSON.parse(text, keepExactNumbers));
  const decoded = decodeBody(Buffer.from(text), "json") as unknown[];
  expect(JSON.stringify(decoded.length === 1 && !text.startsWith("[") ? decoded[0] : decoded)).toBe(expected);
  const ndjson = decodeBody(Buffer.from(`${text}\n${text}`), "ndjson") as unknown[];
  expect(JSON.stringify(ndjson[1])).toBe(expected);
});
