// The histogram's bucket size: the smallest round size (BUCKET_SECONDS, then whole days) whose
// epoch-aligned buckets cover the window in at most `buckets` of them; its parameters; the slices
// a query's count is cut into.
import { describe, expect, test } from "bun:test";
import { AppError } from "../../src/errors";
import {
  BUCKET_SECONDS,
  BUCKETS_DEFAULT,
  BUCKETS_MAX,
  bucketSeconds,
  type Counted,
  histogramOf,
  SLICES_AT_ONCE,
  readHistogramRequest,
  type Slice,
} from "../../src/query/histogram";
import { readHistogramBy } from "../../src/query/histogram-by";
import { queryTimeout } from "../../src/query/read";

const T = "2026-11-24T12:00:00.000000Z";
const before = (ms: number) => new Date(Date.parse(T) - ms).toISOString().replace(/Z$/, "000Z");

test.each([
  // window, buckets → size
  [15 * 60_000, 100, 10],
  [3_600_000, 100, 60],
  [3_600_000, 60, 300], // 61 one-minute buckets (the end is on a boundary) are one too many
  [24 * 3_600_000, 100, 900],
  [7 * 86_400_000, 100, 10_800],
  [30 * 86_400_000, 100, 43_200],
  [365 * 86_400_000, 100, 4 * 86_400],
  [1000, 500, 1],
  [0, 1, 1],
])("a window of %d ms in at most %d buckets → %d s", (span, buckets, size) => {
  expect(bucketSeconds(before(span), T, buckets)).toBe(size);
});

test("every size keeps the count within the limit, and the next smaller size would not", () => {
  for (const span of [1, 999, 61_000, 5_400_000, 86_400_000 * 3 + 17, 86_400_000 * 4000]) {
    for (const buckets of [1, 2, 7, 60, BUCKETS_DEFAULT, BUCKETS_MAX]) {
      const from = before(span);
      const size = bucketSeconds(from, T, buckets);
      const count = (s: number) => Math.floor(Date.parse(T) / 1000 / s) - Math.floor(Date.parse(from.slice(0, 23) + "Z") / 1000 / s) + 1;
      expect(count(size)).toBeLessThanOrEqual(buckets);
      const smaller = size > 86_400 ? size - 86_400 : BUCKET_SECONDS[BUCKET_SECONDS.indexOf(size as never) - 1];
      if (smaller !== undefined && smaller > 0) expect(count(smaller)).toBeGreaterThan(buckets);
    }
  }
});

const read = (query: string) => readHistogramRequest(new URL(`http://x/api/v2/query/histogram?${query}`), () => new Date(T));

test("defaults: the last 30 minutes, BUCKETS_DEFAULT buckets; relative times resolve against one clock reading", () => {
  expect(read("source_ids=2,1")).toMatchObject({ sourceIds: [1, 2], buckets: BUCKETS_DEFAULT, from: before(30 * 60_000), to: T });
  expect(read("source_ids=1&from=now-24h&buckets=500")).toMatchObject({ from: before(86_400_000), to: T, buckets: 500 });
});

test.each(["0", String(BUCKETS_MAX + 1), "abc", "1.5", "-3", "99999"])("buckets=%s → 400", (buckets) => {
  let error: unknown;
  try {
    read(`source_ids=1&buckets=${buckets}`);
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).status).toBe(400);
  expect((error as AppError).message).toContain(`buckets must be a whole number from 1 to ${BUCKETS_MAX}`);
});

// With a query the window is counted in slices, newest first, two at a time, within one timeout
// (histogramOf with a counter standing in for the statement: which slices it is asked for, in
// which order, and what the answer says when some of them run out of time).
describe("slices", () => {
  const request = (buckets: number, query = "hay") => read(`source_ids=1&from=now-31h&buckets=${buckets}&query=${query}`);
  const ms = (dt: string) => Date.parse(`${dt.slice(0, 23)}Z`);
  /** One event per bucket at its start, level info. */
  const counter = (timesOut: (slice: Slice) => boolean, asked: Slice[] = [], running = { now: 0, most: 0 }) => {
    return async (slice: Slice): Promise<Counted> => {
      asked.push(slice);
      running.most = Math.max(running.most, ++running.now);
      await Bun.sleep(1);
      running.now--;
      if (timesOut(slice)) throw queryTimeout(5000);
      const size = slice.bucketSeconds;
      const rows: Counted = [];
      for (
        let index = Math.ceil(ms(slice.from) / 1000 / size);
        index * size * 1000 < ms(slice.to) || (slice.last && index * size * 1000 <= ms(slice.to));
        index++
      ) {
        rows.push({ bucket: String(index), level: "info", n: "1" });
      }
      return rows;
    };
  };

  test("contiguous slices of whole buckets from the newest, 1, 1, 2, 2, 4, 4… buckets wide, at most two at once; all counted → complete", async () => {
    const asked: Slice[] = [];
    const running = { now: 0, most: 0 };
    const answer = await histogramOf(
      request(62),
      5000,
      counter(() => false, asked, running),
    );
    expect(running.most).toBe(SLICES_AT_ONCE);
    const meta = answer.meta;
    const size = meta.bucket_seconds * 1000;
    const widths = asked.map((slice) => Math.ceil((ms(slice.to) + (slice.last ? 1 : 0)) / size) - Math.floor(ms(slice.from) / size));
    expect(widths.slice(0, -1)).toEqual([1, 1, 2, 2, 4, 4, 8, 8, 16, 16].slice(0, widths.length - 1));
    expect(widths.reduce((a, b) => a + b, 0)).toBe(answer.data.length);
    expect(meta.complete).toBe(true);
    expect(asked[0]).toMatchObject({ to: meta.to, last: true });
    const oldestFirst = [...asked].reverse();
    expect(oldestFirst[0]!.from).toBe(meta.from);
    for (let i = 1; i < oldestFirst.length; i++) {
      expect(oldestFirst[i]!.from).toBe(oldestFirst[i - 1]!.to);
      expect(oldestFirst[i - 1]!.last).toBe(false);
      expect(ms(oldestFirst[i]!.from) % (meta.bucket_seconds * 1000)).toBe(0);
    }
    expect(answer.data.every((b) => b.count === 1 && b.levels.info === 1)).toBe(true);
    expect(meta.total).toBe(answer.data.length);
  });

  test("slices that run out of time: the others are answered, theirs buckets are null, complete is false", async () => {
    const req = request(62);
    const cut = ms(req.from) + 10 * 3_600_000; // the slices starting before this time out
    const answer = await histogramOf(
      req,
      5000,
      counter((slice) => ms(slice.from) < cut),
    );
    expect(answer.meta.complete).toBe(false);
    const counted = answer.data.filter((b) => b.count !== null);
    const uncounted = answer.data.filter((b) => b.count === null);
    expect(counted.length).toBeGreaterThan(0);
    expect(uncounted.length).toBeGreaterThan(0);
    // The slices that started before the cut, whole: every uncounted bucket is older than every counted one.
    expect(uncounted.every((b) => b.from < counted[0]!.from && Object.keys(b.levels).length === 0)).toBe(true);
    expect(counted.every((b) => b.count === 1)).toBe(true);
    expect(answer.meta.total).toBe(counted.length);
    expect(answer.data.at(-1)!.count).toBe(1); // the newest bucket is counted
  });

  test("by a field under a query: slices too, and what was counted in time is answered with its values", async () => {
    const req = { ...request(62), by: "service" };
    const cut = ms(req.from) + 10 * 3_600_000;
    const levelsCounter = counter((slice) => ms(slice.from) < cut);
    // The same counter's rows, each bucket's event a service named after its bucket's parity.
    const answer = await readHistogramBy(undefined as never, req, 5000, undefined, async (slice) =>
      (await levelsCounter(slice)).map((row) => ({ ...row, level: Number(row.bucket) % 2 ? "odd" : "even" })),
    );
    expect(answer.meta).toMatchObject({ by: "service", complete: false, bucket_seconds: 3600 });
    expect([...answer.meta.values].sort()).toEqual(["even", "odd"]);
    const counted = answer.data.filter((b) => b.count !== null);
    const uncounted = answer.data.filter((b) => b.count === null);
    expect(counted.length).toBeGreaterThan(0);
    expect(uncounted.length).toBeGreaterThan(0);
    expect(uncounted.every((b) => b.from < counted[0]!.from && Object.keys(b.values).length === 0)).toBe(true);
    expect(counted.every((b) => b.count === 1 && Object.values(b.values).reduce((sum, n) => sum + n, 0) === 1)).toBe(true);
    expect(answer.meta.total).toBe(counted.length);
  });

  test("nothing counted in time → the 503 (query_timeout); another error is not hidden", async () => {
    const timedOut = await histogramOf(
      request(62),
      5000,
      counter(() => true),
    ).catch((error) => error);
    expect(timedOut).toBeInstanceOf(AppError);
    expect((timedOut as AppError).status).toBe(503);
    expect((timedOut as AppError).message).toContain("(QUERY_TIMEOUT_MS)");
    const broken = await histogramOf(request(62), 5000, async () => {
      throw new Error("connection lost");
    }).catch((error) => error);
    expect((broken as Error).message).toBe("connection lost");
  });

  // Two slices are counted at once: whichever fails first, the histogram answers once both have
  // ended (no statement outlives its request), starts no slice after a failure, and leaves no
  // rejection unhandled. The order is the seam's: the first slice waits until the second has
  // failed and the event loop has turned twice (when an unhandled rejection is reported).
  describe("a slice fails while the other is still counted", () => {
    const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
    const run = async (failure: () => Error) => {
      const asked: Slice[] = [];
      let failed!: () => void;
      const second = new Promise<void>((resolve) => (failed = resolve));
      let firstEnded = false;
      const unhandled: unknown[] = [];
      const listener = (reason: unknown) => unhandled.push(reason);
      process.on("unhandledRejection", listener);
      try {
        const outcome = await histogramOf(request(62), 5000, async (slice) => {
          const index = asked.push(slice) - 1;
          if (index === 1) {
            failed();
            throw failure();
          }
          if (index === 0) {
            await second;
            await turn();
            await turn();
            firstEnded = true;
          }
          return [{ bucket: String(Math.floor(ms(slice.from) / 1000 / slice.bucketSeconds)), level: "info", n: "1" }];
        }).then(
          (answer) => answer,
          (error: Error) => error,
        );
        const endedBeforeAnswer = firstEnded;
        await turn();
        await turn();
        return { outcome, asked: asked.length, endedBeforeAnswer, unhandled };
      } finally {
        process.off("unhandledRejection", listener);
      }
    };

    test("an error that is no timeout: it is the answer, after the other slice ended; no slice starts after it", async () => {
      const { outcome, asked, endedBeforeAnswer, unhandled } = await run(() => new Error("connection lost"));
      expect((outcome as Error).message).toBe("connection lost");
      expect(endedBeforeAnswer).toBe(true);
      expect(asked).toBe(2);
      expect(unhandled).toEqual([]);
    });

    test("a timeout: what was counted is answered, incomplete; no slice starts after it", async () => {
      const { outcome, asked, endedBeforeAnswer, unhandled } = await run(() => queryTimeout(5000));
      if (outcome instanceof Error) throw outcome;
      expect(outcome.meta.complete).toBe(false);
      expect(outcome.meta.total).toBe(1);
      expect(outcome.data.at(-1)!.count).toBe(1);
      expect(endedBeforeAnswer).toBe(true);
      expect(asked).toBe(2);
      expect(unhandled).toEqual([]);
    });
  });

  test("no query: one statement for the whole window; with one over two buckets: a slice each", async () => {
    const asked: Slice[] = [];
    await histogramOf(
      read("source_ids=1&from=now-31h"),
      5000,
      counter(() => false, asked),
    );
    expect(asked.length).toBe(1);
    expect(asked[0]).toMatchObject({ last: true });
    const few: Slice[] = [];
    const answer = await histogramOf(
      request(3),
      5000,
      counter(() => false, few),
    );
    expect(few.length).toBe(answer.data.length);
  });
});

test("the statements' folded \"other\" takes no name's place: six values are named however big it is", async () => {
  const req = { sourceIds: [1], malformed: [], query: { kind: "text", text: "x" } as never, from: before(3_600_000), to: T, buckets: 1, by: undefined };
  const bucket = String(Math.floor(Date.parse(T) / 1000 / bucketSeconds(req.from, req.to, req.buckets)));
  const rows: Counted = [
    ...["a", "b", "c", "d", "e", "f", "g"].map((level, i) => ({ bucket, level, n: String(10 - i) })),
    { bucket, level: "other", n: "1000" },
  ];
  const answer = await histogramOf(req, 5000, async () => rows);
  expect(answer.meta.levels).toEqual(["a", "b", "c", "d", "e", "f", "other"]);
  expect(answer.data.reduce((sum, b) => sum + (b.levels.other ?? 0), 0)).toBe(1004);
});
