// store/blocks.ts's BlockBuilder (the memory path's builder): a block of the oldest maxEvents in
// (dt, id) order once half as many again are held, an early cut when the thread's memory bound asks, and one filter group across them whose
// time range covers blocks that overlap.
import { expect, test } from "bun:test";
import { type Block, BlockBuilder, type Filter, type MovedRow } from "../../src/store/blocks";

const row = (id: number, second: number): MovedRow => ({
  id: String(id),
  source_id: "7",
  dt: `2026-11-27T10:00:${String(second).padStart(2, "0")}.000000Z`,
  line: `{"message": "event number ${id} of the builder test"}`,
  shape: "message",
  level: null,
});
const blocks = (items: (Block | Filter)[]) => items.filter((item): item is Block => item.kind === "block");

test("the oldest maxEvents cut once half as many again are held, so a late event finds its block; flush() cuts what is held early; close() ends the filter group, whose range covers every block", () => {
  const builder = new BlockBuilder(3);
  const out: (Block | Filter)[] = [];
  for (const [id, second] of [
    [1, 30],
    [2, 10],
    [3, 20],
    [4, 40],
  ] as const)
    out.push(...builder.add(row(id, second)));
  expect(out).toEqual([]); // 3 + 2 not yet held
  out.push(...builder.add(row(5, 5))); // late: earlier than every event held
  expect(blocks(out).map((b) => [b.n, b.minDt.slice(17, 19), b.maxDt.slice(17, 19)])).toEqual([[3, "05", "20"]]);
  expect(builder.held).toBe(2);
  expect(builder.heldBytes).toBeGreaterThan(0);
  out.push(...builder.add(row(6, 1))); // later than the margin: its block overlaps the one before
  out.push(...builder.flush());
  expect(builder.held).toBe(0);
  expect(builder.flush()).toEqual([]);
  out.push(...builder.close());
  const made = blocks(out);
  expect(made.map((b) => [b.n, b.minDt.slice(17, 19), b.maxDt.slice(17, 19)])).toEqual([
    [3, "05", "20"],
    [3, "01", "40"],
  ]);
  const filters = out.filter((item): item is Filter => item.kind === "filter");
  expect(filters).toHaveLength(1);
  expect(made.map((b) => [b.filterId, b.filterSlot])).toEqual([
    [filters[0]!.id, 0],
    [filters[0]!.id, 1],
  ]);
  // The group's range is its blocks' least and greatest dt, not its first block's start and last block's end.
  expect([filters[0]!.minDt.slice(17, 19), filters[0]!.maxDt.slice(17, 19)]).toEqual(["01", "40"]);
});

test("events out of time order by less than half a block make blocks that do not overlap, none over maxEvents, every event once", () => {
  const builder = new BlockBuilder(100);
  const out: (Block | Filter)[] = [];
  let state = 7;
  const next = () => (state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0) / 2 ** 32;
  // Event k at about k seconds past 10:00, give or take 20.
  const times = Array.from({ length: 1_000 }, (_, k) => 30 + k + Math.round((next() * 2 - 1) * 20));
  times.forEach((t, k) => {
    const dt = `2026-11-27T${String(10 + Math.floor(t / 3600)).padStart(2, "0")}:${String(Math.floor(t / 60) % 60).padStart(2, "0")}:${String(t % 60).padStart(2, "0")}.000000Z`;
    out.push(...builder.add({ ...row(k + 1, 0), dt }));
  });
  out.push(...builder.close());
  const made = blocks(out).sort((a, b) => (a.minDt < b.minDt ? -1 : 1));
  expect(made.reduce((sum, b) => sum + b.n, 0)).toBe(1_000);
  expect(made.every((b) => b.n <= 100)).toBe(true);
  expect(made.filter((b, i) => i > 0 && b.minDt < made[i - 1]!.maxDt)).toEqual([]);
});
