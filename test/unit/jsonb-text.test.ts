// PostgreSQL's jsonb text computed in the application (src/codec/jsonb-text.ts) on hand-picked
// texts, one rule each; test/integration/jsonb-text.test.ts runs the same table through the
// embedded PostgreSQL and random texts through both.
import { expect, test } from "bun:test";
import { realisticBatch } from "../../bench/corpus";
import { jsonbText, levelOfJson, numericText } from "../../src/codec/jsonb-text";
import { JSONB_CASES } from "../fixtures/jsonb-text-cases";

test.each(JSONB_CASES.map((c) => [c.name, c] as const))("%s", (_name, c) => {
  expect(jsonbText(c.json)).toEqual({ line: c.line, shape: c.shape ?? "", level: c.level ?? null });
});

// The flush's level (store/chunks.ts): the same answer from the bytes, with other lines around them
// that hold a "level" of their own (a search must not run past its line's end).
test.each(JSONB_CASES.map((c) => [c.name, c] as const))("levelOfJson: %s", (_name, c) => {
  const before = Buffer.from(`{"level":"before"}`);
  const after = Buffer.from(`{"level":"after","x":"\\"level\\":1"}`);
  const bytes = Buffer.concat([before, Buffer.from(c.json), after]);
  expect(levelOfJson(bytes, before.length, bytes.length - after.length)).toBe(c.level ?? null);
});

test.each([
  [`{"a":{"level":"inner"},"b":"x"}`, null],
  [`{"a":"\\"level\\":\\"quoted\\"","level":"warn"}`, "warn"],
  [`{"msg":"the \\"level\\" is","n":1}`, null],
  [`{"a\\"level":"escaped key"}`, null],
  [`{"level":"first","level":"Last"}`, "last"],
  [`{"level":50}`, "50"],
  [`{"level":-0}`, "0"],
  [`{"level":-0.50}`, "-0.50"],
  [`{"level":1.5e2}`, "150"],
  [`{"level":{"name":"ERROR","n":1}}`, '{"n": 1, "name": "error"}'],
  [`{"level":[1,2]}`, "[1, 2]"],
  [`{"level":true}`, "true"],
  [`{"level":null}`, null],
  [`{"level":""}`, null],
  [`{"level":"\\u0045RROR"}`, "error"],
  [`{"level":"${"Ž".repeat(45)}"}`, "Ž".repeat(40)],
  [`[{"level":"in an array"}]`, null],
  [`{"x":[{"level":"deep"}],"level" : "Spaced"}`, "spaced"],
])("levelOfJson(%s) = %p", (json, expected) => {
  const bytes = Buffer.from(json);
  expect(levelOfJson(bytes, 0, bytes.length)).toBe(expected);
  expect(jsonbText(json).level).toBe(expected);
});

test.each([
  ["0", "0"],
  ["-0", "0"],
  ["1e3", "1000"],
  ["1.5E+3", "1500"],
  ["1e-2", "0.01"],
  ["1.50e1", "15.0"],
  ["-1.50e-1", "-0.150"],
  ["0.000e2", "0.0"],
  ["00.5e1".slice(1), "5"],
  ["9.99e2", "999"],
  ["9.99e1", "99.9"],
  ["123.456e-3", "0.123456"],
  [`1${"0".repeat(30)}e-30`, `1.${"0".repeat(30)}`],
  ["1e+0", "1"],
  ["-12E-0", "-12"],
])("numeric_out(%s) = %s", (literal, expected) => {
  expect(numericText(literal)).toBe(expected);
});

test("an event as JSON.stringify writes it keeps its values; only layout and order change", () => {
  for (const event of realisticBatch(500, 0)) {
    const json = JSON.stringify(event);
    const { line, shape, level } = jsonbText(json);
    expect(JSON.parse(line)).toEqual(event);
    expect(line.length).toBeGreaterThan(json.length);
    expect(shape.split(",").sort()).toEqual(Object.keys(event).sort());
    expect(level).toBe(typeof event.level === "string" ? event.level : null);
  }
});

test("deep nesting", () => {
  const depth = 2000;
  expect(jsonbText(`${'{"a":['.repeat(depth)}1${"]}".repeat(depth)}`).line).toBe(`${'{"a": ['.repeat(depth)}1${"]}".repeat(depth)}`);
});

test("many keys in reverse order, with duplicates", () => {
  const keys = Array.from({ length: 3000 }, (_, i) => `k${String(2999 - i).padStart(4, "0")}`);
  const json = `{${keys.map((k, i) => `"${k}":${i}`).join(",")},"k0000":-1}`;
  const { line, shape } = jsonbText(json);
  const sorted = [...keys].sort();
  expect(shape).toBe(sorted.join(","));
  expect(line).toBe(`{${sorted.map((k) => `"${k}": ${k === "k0000" ? -1 : 2999 - Number(k.slice(1))}`).join(", ")}}`);
});

test("an event bigger than the kept buffer, then small ones", () => {
  const big = `{"b":"${"x".repeat(1_200_000)}","a":[${"1e2,".repeat(1000)}0]}`;
  const { line, shape } = jsonbText(big);
  expect(line).toBe(`{"a": [${"100, ".repeat(1000)}0], "b": "${"x".repeat(1_200_000)}"}`);
  expect(shape).toBe("a,b");
  expect(jsonbText(`{"z":1,"level":"E"}`)).toEqual({ line: `{"z": 1, "level": "E"}`, shape: "z,level", level: "e" });
});
