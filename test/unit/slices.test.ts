// query/read.ts's slices: the sub-windows a page is read in cover [from, to] exactly once, in the
// page's order, with or without an anchor (the newest block's end) and a cursor; and so do they
// with every long slice cut into the two halves readEvents reads at once.
import { expect, test } from "bun:test";
import { shiftMicros, slices, split, SPLIT_FROM_MS } from "../../src/query/read";

const iso = (ms: number) => new Date(ms).toISOString().replace("Z", "000Z");
const T = Date.parse("2026-11-25T12:00:00Z");

/** Whether an instant (as text) is inside a slice. */
function inside(slice: ReturnType<typeof slices> extends Generator<infer S> ? S : never, at: string): boolean {
  const above = slice.lowerOp === ">=" ? at >= slice.lower : at > slice.lower;
  const below = slice.upperOp === "<=" ? at <= slice.upper : at < slice.upper;
  return above && below;
}

test.each([
  ["newest first, no anchor", true, [], undefined],
  ["newest first, anchor 2 h before to", true, [iso(T - 2 * 3_600_000)], undefined],
  ["newest first, anchor and a cursor after it", true, [iso(T - 5 * 3_600_000)], { dt: iso(T - 3_600_000), id: "7" }],
  ["newest first, anchor at to (ignored)", true, [iso(T)], undefined],
  ["newest first, anchor before from (ignored)", true, [iso(T - 30 * 3_600_000)], undefined],
  [
    "newest first, anchors out of order, twice the same, one after the cursor",
    true,
    [iso(T - 9_000), iso(T - 40), iso(T - 2 * 3_600_000), iso(T - 40), iso(T - 30)],
    { dt: iso(T - 35), id: "7" },
  ],
  ["newest first, anchors seconds apart", true, [iso(T - 20), iso(T - 300), iso(T - 4_000), iso(T - 70_000)], undefined],
  ["oldest first", false, [], undefined],
])("%s: every instant of the window is in exactly one slice (and one half), in the page's order", (_name, newest, anchors, after) => {
  const request = { from: iso(T - 24 * 3_600_000), to: iso(T), after };
  const whole = [...slices(request, newest, anchors)];
  const halves = whole.flatMap((slice) => split(slice, newest) ?? [slice]);
  expect(halves.length).toBeGreaterThan(whole.length); // a 24 h window has slices of hours
  for (const slice of whole) expect(split(slice, newest) === undefined).toBe(Date.parse(slice.upper) - Date.parse(slice.lower) < SPLIT_FROM_MS);
  checkSlices(whole, request, newest, after);
  checkSlices(halves, request, newest, after);
  // Each anchor inside the window and before the page's start cuts a slice there, newest first.
  const start = after ? after.dt : request.to;
  const cuts = [...new Set(anchors)]
    .filter((anchor) => anchor > request.from && anchor < start)
    .sort()
    .reverse();
  if (newest) expect(whole.slice(0, cuts.length).map((slice) => slice.lower)).toEqual(cuts);
});

function checkSlices(
  all: ReturnType<typeof slices> extends Generator<infer S> ? S[] : never,
  request: { from: string; to: string },
  newest: boolean,
  after: { dt: string; id: string } | undefined,
) {
  const start = after ? Date.parse(after.dt) : newest ? T : T - 24 * 3_600_000;
  // Instants at every slice edge and between them, plus a spread over the window.
  const probes = new Set<string>();
  for (const slice of all) for (const at of [slice.lower, slice.upper]) for (const d of [-1, 0, 1]) probes.add(iso(Date.parse(at) + d));
  for (let k = 0; k <= 1000; k++) probes.add(iso(T - 24 * 3_600_000 + (k * 24 * 3_600_000) / 1000));
  for (const at of probes) {
    const ms = Date.parse(at);
    const inWindow = at >= request.from && at <= request.to && (newest ? ms <= start : ms >= start);
    expect([at, all.filter((slice) => inside(slice, at)).length]).toEqual([at, inWindow ? 1 : 0]);
  }
  // In the page's order: each slice lies wholly past the previous one.
  for (let i = 1; i < all.length; i++) expect(newest ? all[i]!.upper <= all[i - 1]!.lower : all[i]!.lower >= all[i - 1]!.upper).toBe(true);
}

test("an open bound read closed: shiftMicros is the next and the previous microsecond, across seconds, days and years", () => {
  const cases: [string, 1 | -1, string][] = [
    ["2026-11-25T12:00:00.000000Z", 1, "2026-11-25T12:00:00.000001Z"],
    ["2026-11-25T12:00:00.000000Z", -1, "2026-11-25T11:59:59.999999Z"],
    ["2026-11-25T12:00:00.123456Z", -1, "2026-11-25T12:00:00.123455Z"],
    ["2026-12-31T23:59:59.999999Z", 1, "2027-01-01T00:00:00.000000Z"],
    ["2027-01-01T00:00:00.000000Z", -1, "2026-12-31T23:59:59.999999Z"],
    ["0001-01-01T00:00:00.000001Z", -1, "0001-01-01T00:00:00.000000Z"],
    ["2024-02-28T23:59:59.999999Z", 1, "2024-02-29T00:00:00.000000Z"],
  ];
  for (const [dt, delta, shifted] of cases) expect([dt, delta, shiftMicros(dt, delta)]).toEqual([dt, delta, shifted]);
  // Against microseconds counted: 2,000 random instants each way.
  const micro = (dt: string) => BigInt(Date.parse(`${dt.slice(0, 19)}Z`)) * 1000n + BigInt(dt.slice(20, 26));
  for (let i = 0; i < 2_000; i++) {
    const dt = `${new Date(T + Math.floor(Math.random() * 1e10) - 5e9).toISOString().slice(0, 20)}${String(Math.floor(Math.random() * 1e6)).padStart(6, "0")}Z`;
    for (const delta of [1, -1] as const) expect([dt, micro(shiftMicros(dt, delta)) - micro(dt)]).toEqual([dt, BigInt(delta)]);
  }
});

test.each([
  ["oldest first, the last hours of 9999", false, "9999-12-31T12:00:00.000000Z", "9999-12-31T23:59:59.999999Z"],
  ["newest first, the last hours of 9999", true, "9999-12-31T12:00:00.000000Z", "9999-12-31T23:59:59.999999Z"],
  ["oldest first, the first hours of 0001", false, "0001-01-01T00:00:00.000000Z", "0001-01-01T12:00:00.000000Z"],
  ["newest first, the first hours of 0001", true, "0001-01-01T00:00:00.000000Z", "0001-01-01T12:00:00.000000Z"],
])("%s: every bound, and every open bound read closed, is a time of the window PostgreSQL reads", (_name, newest, from, to) => {
  const all = [...slices({ from, to, after: undefined }, newest)].flatMap((slice) => split(slice, newest) ?? [slice]);
  const closed = all.flatMap((s) => [s.lowerOp === ">" ? shiftMicros(s.lower, 1) : s.lower, s.upperOp === "<" ? shiftMicros(s.upper, -1) : s.upper]);
  for (const at of [...all.flatMap((s) => [s.lower, s.upper]), ...closed]) {
    expect([at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/.test(at), at >= from && at <= to]).toEqual([at, true, true]);
  }
  // Contiguous from one end of the window to the other.
  const ends = newest ? [all[0]!.upper, all.at(-1)!.lower] : [all[0]!.lower, all.at(-1)!.upper];
  expect(ends).toEqual(newest ? [to, from] : [from, to]);
  for (let i = 1; i < all.length; i++) expect(newest ? all[i]!.upper === all[i - 1]!.lower : all[i]!.lower === all[i - 1]!.upper).toBe(true);
});
