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
