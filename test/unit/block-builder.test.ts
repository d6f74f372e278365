// store/blocks.ts's BlockBuilder (the memory path's builder): a block per maxEvents in (dt, id)
// order, an early cut when the thread's memory bound asks, and one filter group across them whose
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

test("a block per maxEvents, in time order; flush() cuts what is held early; close() ends the filter group, whose range covers every block", () => {
  const builder = new BlockBuilder(3);
  const out: (Block | Filter)[] = [];
  for (const [id, second] of [
    [1, 30],
    [2, 10],
    [3, 20],
  ] as const)
    out.push(...builder.add(row(id, second)));
  expect(blocks(out).map((b) => [b.n, b.minDt.slice(17, 19), b.maxDt.slice(17, 19)])).toEqual([[3, "10", "30"]]);
  out.push(...builder.add(row(4, 5))); // late: an earlier time than the block before
  expect(builder.held).toBe(1);
  expect(builder.heldBytes).toBeGreaterThan(0);
  out.push(...builder.flush());
  expect(builder.held).toBe(0);
  expect(builder.flush()).toEqual([]);
  out.push(...builder.close());
  const made = blocks(out);
  expect(made.map((b) => b.n)).toEqual([3, 1]);
  const filters = out.filter((item): item is Filter => item.kind === "filter");
  expect(filters).toHaveLength(1);
  expect(made.map((b) => [b.filterId, b.filterSlot])).toEqual([
    [filters[0]!.id, 0],
    [filters[0]!.id, 1],
  ]);
  // The group's range is its blocks' least and greatest dt, not its first block's start and last block's end.
  expect([filters[0]!.minDt.slice(17, 19), filters[0]!.maxDt.slice(17, 19)]).toEqual(["05", "30"]);
});

test("with slack (holdEvents > maxEvents) events late by less than the slack still make blocks that do not overlap; the rest is cut evenly at the end", () => {
  const builder = new BlockBuilder(10, 40);
  const out: (Block | Filter)[] = [];
  // 200 events whose order is shuffled within windows of 25 (requests committed out of their order).
  const order: number[] = [];
  for (let w = 0; w < 200; w += 25) {
    const window = Array.from({ length: 25 }, (_, i) => w + i);
    for (let i = window.length - 1; i > 0; i--) {
      const j = (i * 7 + w) % (i + 1);
      [window[i], window[j]] = [window[j]!, window[i]!];
    }
    order.push(...window);
  }
  const at = (n: number): MovedRow => ({
    ...row(n + 1, 0),
    dt: `2026-11-27T10:${String(Math.floor(n / 60)).padStart(2, "0")}:${String(n % 60).padStart(2, "0")}.000000Z`,
  });
  for (const n of order) {
    out.push(...builder.add(at(n)));
    expect(builder.held).toBeLessThan(40);
  }
  out.push(...builder.close());
  const made = blocks(out);
  expect(made.reduce((sum, b) => sum + b.n, 0)).toBe(200);
  // The end: 30 held, cut as 3 × 10; every block full, none overlapping the next.
  expect(made.map((b) => b.n)).toEqual(Array.from({ length: 20 }, () => 10));
  for (let i = 1; i < made.length; i++) expect(made[i]!.minDt > made[i - 1]!.maxDt).toBe(true);
  // Without slack the same arrivals make overlapping blocks.
  const plain = new BlockBuilder(10);
  const plainOut: (Block | Filter)[] = [];
  for (const n of order) plainOut.push(...plain.add(at(n)));
  plainOut.push(...plain.close());
  const plainBlocks = blocks(plainOut);
  expect(plainBlocks.some((b, i) => i > 0 && b.minDt < plainBlocks[i - 1]!.maxDt)).toBe(true);
});

test("groupBlocks caps a builder's filter groups: a merge cutting the day beside one rewrites at most that many of its blocks", () => {
  const builder = new BlockBuilder(10, 10, 2);
  const out: (Block | Filter)[] = [];
  for (let i = 0; i < 50; i++) out.push(...builder.add(row(i + 1, i)));
  out.push(...builder.close());
  const made = blocks(out);
  expect(made).toHaveLength(5);
  const filters = out.filter((item): item is Filter => item.kind === "filter");
  expect(filters.map((filter) => filter.blocks)).toEqual([2, 2, 1]);
  expect(new Set(made.map((block) => block.filterId)).size).toBe(3);
});
