import { expect, test } from "bun:test";
import { GcPacer } from "../../src/memory/gcpace";

const MIB = 1024 * 1024;

/** A pacer with an injected RSS, clock and collector; `cost` is how long a full collection takes. */
function pacer(fullAbove: number, cost = 30, pressedAbove = Infinity) {
  const state = { rss: 0, spare: 0, clock: 0, calls: [] as boolean[] };
  const gc = new GcPacer(
    fullAbove,
    pressedAbove,
    () => ({ rss: state.rss, spare: state.spare }),
    (full) => {
      state.calls.push(full);
      if (full) state.clock += cost;
    },
    () => state.clock,
    (run) => run(),
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

test.each([
  { mark: "the first mark (RSS 150 MiB)", rss: 150, share: "a tenth", wait: 270 },
  { mark: "the second mark (RSS 250 MiB)", rss: 250, share: "a quarter", wait: 90 },
])("past $mark full collections take at most $share of the wall clock: after one of 30 ms, quick ones for $wait ms", ({ rss, wait }) => {
  const { gc, state } = pacer(100 * MIB, 30, 200 * MIB);
  state.rss = rss * MIB;
  gc.handled(8 * MIB); // full: the clock moves 30 ms
  state.clock += wait - 1;
  gc.handled(8 * MIB);
  state.clock += 1;
  gc.handled(8 * MIB);
  expect(state.calls).toEqual([true, false, true]);
});

test("the ring's free slabs are not garbage for the first mark; the second judges the whole RSS", () => {
  const { gc, state } = pacer(356 * MIB, 30, 406 * MIB);
  state.rss = 400 * MIB;
  state.spare = 220 * MIB; // a burst's slabs, free: 180 MiB beside them
  gc.handled(8 * MIB);
  expect(state.calls).toEqual([false]);
  state.rss = 410 * MIB; // garbage in their shadow: it stays when the ring fills them again
  gc.handled(8 * MIB);
  expect(state.calls).toEqual([false, true]);
});

test("the collection runs in a microtask, once the request that handled the bytes is off the stack; one at a time", async () => {
  const calls: boolean[] = [];
  const gc = new GcPacer(
    500 * MIB,
    Infinity,
    () => ({ rss: 0, spare: 0 }),
    (full) => calls.push(full),
    () => 0,
  );
  gc.handled(8 * MIB);
  gc.handled(8 * MIB); // due again before the first ran: not queued twice
  expect(calls).toEqual([]);
  await Promise.resolve();
  expect(calls).toEqual([false]);
});
