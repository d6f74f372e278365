// The histogram's bucket size: the smallest round size (BUCKET_SECONDS, then whole days) whose
// epoch-aligned buckets cover the window in at most `buckets` of them; and its parameters.
import { expect, test } from "bun:test";
import { AppError } from "../../src/errors";
import { BUCKET_SECONDS, BUCKETS_DEFAULT, BUCKETS_MAX, bucketSeconds, readHistogramRequest } from "../../src/query/histogram";

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
