// Which blocks a merge rewrites (store/merge-plan.ts): runs closed in time and in filters, full
// non-overlapping blocks left alone, the transaction's bound, the current day's threshold.
import { expect, test } from "bun:test";
import { type BlockInfo, planMerges, type Run, SLICES_MINUTES, sliceOf } from "../../src/store/merge-plan";

const at = (minute: number) => `2026-11-20T${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}:00.000000Z`;
let nextId = 1;
const block = (from: number, to: number, n: number, filterId: string | null = null): BlockInfo => ({
  minId: String(nextId++),
  minDt: at(from),
  maxDt: at(to),
  n,
  filterId,
});
const options = { blockEvents: 1000, maxEvents: 50_000, minBlocks: 2 };
const ids = (runs: Run[]) => runs.map((run) => run.blocks.map((b) => b.minId).sort((a, b) => Number(a) - Number(b)));

test("full blocks that do not overlap (a read-back seal's) are left alone, touching ones too", () => {
  const blocks = [block(0, 10, 900, "f"), block(10, 20, 900, "f"), block(20, 30, 600)];
  expect(planMerges(blocks, options)).toEqual({ runs: [], tooBig: 0 });
});

test("small blocks in a row make one run; a full block between two runs cuts them", () => {
  const small = [block(0, 1, 10), block(2, 3, 10), block(4, 5, 10)];
  const full = block(6, 9, 800);
  const later = [block(10, 11, 5), block(12, 13, 5)];
  const lone = block(20, 21, 3);
  const plan = planMerges([lone, ...later, full, ...small], options);
  expect(ids(plan.runs)).toEqual([small.map((b) => b.minId), [...later, lone].map((b) => b.minId)].map((r) => r.sort((a, b) => Number(a) - Number(b))));
});

test("full blocks that overlap are merged, with every block their span meets", () => {
  const a = block(0, 30, 1000);
  const b = block(5, 35, 1000);
  const inside = block(31, 32, 1000); // meets b's range only
  const after = block(40, 50, 1000);
  const plan = planMerges([after, inside, b, a], options);
  expect(ids(plan.runs)).toEqual([[a.minId, b.minId, inside.minId]]);
});

test("a run takes every block of its filters, even one far away in time", () => {
  const first = block(0, 1, 10, "g");
  const middle = block(2, 3, 900); // full, alone: between the filter's blocks, so in the run
  const last = block(5, 6, 900, "g");
  const plan = planMerges([first, middle, last], options);
  expect(ids(plan.runs)).toEqual([[first.minId, middle.minId, last.minId]]);
});

test("a run is cut at maxEvents between segments", () => {
  const small = Array.from({ length: 10 }, (_, i) => block(i * 2, i * 2 + 1, 300));
  const plan = planMerges(small, { ...options, maxEvents: 1_000 });
  expect(plan.runs.map((run) => run.blocks.length)).toEqual([3, 3, 3]); // the tenth is alone: nothing to merge it with
  expect(plan.runs.map((run) => run.sliceMinutes)).toEqual([null, null, null]);
});

test("a segment past maxEvents is split: its blocks that cross a slice, in runs of maxEvents, a filter's blocks together", () => {
  // Blocks each spanning most of the day (a load that sends a day's times at once): 12,000 events.
  const spanning = Array.from({ length: 12 }, (_, i) => block(i, 1400 - i, 1000, i < 2 ? "shared" : null));
  const plan = planMerges(spanning, { ...options, maxEvents: 5_000 });
  const width = SLICES_MINUTES.find((m) => (12_000 * m) / 1440 <= 2_500)!;
  expect(width).toBe(180);
  expect(plan.runs.map((run) => [run.blocks.length, run.sliceMinutes])).toEqual([
    [5, width],
    [5, width],
    [2, width],
  ]);
  expect(plan.runs[0]!.blocks.filter((b) => b.filterId === "shared").length).toBe(2);
  // Once each block is inside one slice the day falls apart into slice-sized segments (1,500
  // events each here), merged as usual: consecutive ones together, up to maxEvents.
  const inside = Array.from({ length: 48 }, (_, i) => block(Math.floor(i / 6) * 180 + (i % 6), Math.floor(i / 6) * 180 + 170, 250));
  expect(new Set(inside.map((b) => `${sliceOf(b.minDt, width)} ${sliceOf(b.maxDt, width)}`)).size).toBe(8);
  const after = planMerges(inside, { ...options, maxEvents: 5_000 });
  expect(after.tooBig).toBe(0);
  expect(after.runs.map((run) => [run.blocks.length, run.sliceMinutes])).toEqual([
    [18, null],
    [18, null],
    [12, null],
  ]);
});

test("a segment whose blocks all lie in one slice that holds more than maxEvents is left alone and counted", () => {
  const burst = Array.from({ length: 8 }, () => block(600, 605, 1000)); // one slice of 360 minutes
  expect(planMerges(burst, { ...options, maxEvents: 5_000 })).toEqual({ runs: [], tooBig: 1 });
});

test("the current day waits for minBlocks blocks", () => {
  const small = Array.from({ length: 5 }, (_, i) => block(i * 2, i * 2 + 1, 7));
  expect(planMerges(small, { ...options, minBlocks: 6 }).runs).toEqual([]);
  expect(planMerges(small, { ...options, minBlocks: 5 }).runs.length).toBe(1);
});

test("a run is bounded by its stored bytes as by its events: big events make shorter runs, and splits", () => {
  const heavy = Array.from({ length: 6 }, (_, i) => ({ ...block(i * 2, i * 2 + 1, 10), bytes: 4_000_000 }));
  const plan = planMerges(heavy, { ...options, maxBytes: 10_000_000 });
  expect(plan.runs.map((run) => run.blocks.length)).toEqual([2, 2, 2]);
  const spanning = Array.from({ length: 4 }, (_, i) => ({ ...block(i, 1400 - i, 10), bytes: 4_000_000 }));
  const split = planMerges(spanning, { ...options, maxBytes: 10_000_000 });
  expect(split.runs.map((run) => [run.blocks.length, run.sliceMinutes])).toEqual([
    [2, 360], // 1.6 runs' worth: a 360-minute slice holds 0.4 of a run, under half
    [2, 360],
  ]);
});
