import { expect, test } from "bun:test";
import { GcPacer } from "../../src/ingest/gcpace";

const MIB = 1024 * 1024;

/** A pacer with an injected RSS, clock and collector; `cost` is how long a full collection takes. */
function pacer(fullAbove: number, cost = 30) {
  const state = { rss: 0, clock: 0, calls: [] as boolean[] };
  const gc = new GcPacer(
    fullAbove,
    () => state.rss,
    (full) => {
      state.calls.push(full);
      if (full) state.clock += cost;
    },
    () => state.clock,
  );
  return { gc, state };
}

test("one collection per 8 MiB handled, not before", () => {
  const { gc, state } = pacer(500 * MIB);
  for (let i = 0; i < 7; i++) gc.handled(MIB);
  expect(state.calls).toEqual([]);
  gc.handled(MIB);
  expect(state.calls).toEqual([false]);
  gc.handled(3 * MIB);
  expect(state.calls).toEqual([false]);
});

test.each([
  { rss: 300 * MIB, full: false },
  { rss: 356 * MIB, full: false },
  { rss: 357 * MIB, full: true },
])("RSS $rss against a watermark of 356 MiB: full collection $full", ({ rss, full }) => {
  const { gc, state } = pacer(356 * MIB);
  state.rss = rss;
  gc.handled(8 * MIB);
  expect(state.calls).toEqual([full]);
});

test("full collections take at most a tenth of the wall clock; quick ones in between", () => {
  const { gc, state } = pacer(100 * MIB, 30);
  state.rss = 400 * MIB;
  gc.handled(8 * MIB); // full, 30 ms: the next full one not before 270 ms later
  state.clock += 100;
  gc.handled(8 * MIB);
  state.clock += 169;
  gc.handled(8 * MIB);
  state.clock += 1;
  gc.handled(8 * MIB);
  expect(state.calls).toEqual([true, false, false, true]);
});
