// store/seal-carry.ts: what a read-back seal builds of a chunk once the next one is read, and what
// it carries into it.
import { expect, test } from "bun:test";
import { splitCarry } from "../../src/store/seal-carry";
import { decodeRows, type ReadRow, readRowOf } from "../../src/store/seal-pool";

let nextId = 1;
const row = (source: string, dt: string, line = "{}"): ReadRow => readRowOf({ id: String(nextId++), source_id: source, dt, line, shape: "", level: null });
/** Rows of one source at these seconds of 2026-11-27 10:00. */
const at = (source: string, seconds: number[], line?: string) =>
  seconds.map((s) => row(source, `2026-11-27T10:${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}.000000Z`, line));
const seconds = (rows: ReadRow[]) => rows.map((r) => Number(r.dt.slice(14, 16)) * 60 + Number(r.dt.slice(17, 19))).sort((a, b) => a - b);
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

test("of each source-day, what is older than the next chunk's least time is built; the rest is carried", () => {
  const pending = at("1", range(0, 10));
  const split = splitCarry(pending, at("1", [7, 20, 30]), 4, 1_000_000);
  expect(seconds(split.build)).toEqual(range(0, 7));
  expect(seconds(split.carry)).toEqual([7, 8, 9]); // not older than 7: a block of them would overlap the next chunk's
  expect([split.buildBytes, split.carryBytes]).toEqual([14, 6]);
});

test("less than half a block older than the bound is carried whole; a group the next chunk lacks is carried", () => {
  const split = splitCarry([...at("1", [0, 5, 6, 7]), ...at("2", [0, 1, 2, 3])], at("1", [1, 9]), 4, 1_000_000);
  expect(split.build).toEqual([]);
  expect(split.carry).toHaveLength(8);
  // Another day of the same source is another group.
  const days = splitCarry([row("1", "2026-11-26T23:59:00.000000Z"), row("1", "2026-11-26T23:59:01.000000Z")], at("1", [0]), 4, 1_000_000);
  expect(days.build).toEqual([]);
});

test("past the bound on what is carried, it is built down to half the bound: first the groups the next chunk lacks, then the biggest's oldest events", () => {
  const a = at("1", [15, 10, 11, 12, 13, 14], "x".repeat(100)); // in the next chunk, carried whole (bound 0)
  const b = at("2", [10, 11], "y".repeat(10)); // not in the next chunk
  const c = at("3", [10, 11, 12, 13], "z".repeat(50)); // in the next chunk
  const next = [...at("1", [0]), ...at("3", [0])];
  // 600 + 20 + 200 carried: within 900 all stay.
  expect(splitCarry([...a, ...b, ...c], next, 4, 900).carry).toHaveLength(12);
  // Past 700: down to 350. Source 2 whole (800 left), then source 1's oldest five (300 left).
  const split = splitCarry([...a, ...b, ...c], next, 4, 700);
  expect(split.build.map((r) => r.source_id)).toEqual(["2", "2", "1", "1", "1", "1", "1"]);
  expect(seconds(split.build.filter((r) => r.source_id === "1"))).toEqual([10, 11, 12, 13, 14]);
  expect(split.carry.map((r) => r.source_id).sort()).toEqual(["1", "3", "3", "3", "3"]);
  expect([split.buildBytes, split.carryBytes]).toEqual([520, 300]);
  // At least half a block is built of a group (maxEvents 10: five), though fewer would do.
  const least = splitCarry(at("1", [0, 1, 2, 3, 4, 5, 6], "x".repeat(10)), at("1", [0]), 10, 60);
  expect(seconds(least.build)).toEqual([0, 1, 2, 3, 4]);
});

test("every row is in exactly one part", () => {
  const pending = [...at("1", range(0, 50)), ...at("2", range(0, 3)), ...at("1", range(40, 60))];
  const split = splitCarry(pending, [...at("1", range(45, 70)), ...at("2", [1])], 10, 1_000_000);
  const id = (r: ReadRow) => decodeRows([r])[0]!.id;
  expect([...split.build, ...split.carry].map(id).sort()).toEqual(pending.map(id).sort());
  expect(split.build.every((r) => r.dt < "2026-11-27T10:00:45")).toBe(true);
});
