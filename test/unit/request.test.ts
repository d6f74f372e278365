// The query API's `from`/`to`: RFC 3339 or relative to now (`now-15m`, `now-24h`, `now-7d`),
// resolved against one clock reading per request; a cursor keeps the window its first page
// resolved, so a relative window does not slide under a walk.
import { expect, test } from "bun:test";
import { AppError } from "../../src/errors";
import { makeCursor, readRequest, readSourceIds, refuseUnknown } from "../../src/query/request";

const NOW = new Date("2026-11-24T12:00:00.000Z");
const at = (ms: number) => new Date(NOW.getTime() - ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
const read = (query: string, now = NOW) => readRequest(new URL(`http://x/api/v2/query/live-tail?source_ids=1&${query}`), () => now);

test.each([
  ["now-15m", 15 * 60_000],
  ["now-24h", 24 * 3_600_000],
  ["now-7d", 7 * 86_400_000],
  ["now-2w", 14 * 86_400_000],
  ["now-30s", 30_000],
  ["NOW - 1H", 3_600_000],
  ["now", 0],
])("from=%s is that long before now", (from, back) => {
  const request = read(`from=${encodeURIComponent(from)}`);
  expect(request.from).toBe(at(back));
  expect(request.to).toBe(at(0));
});

test("to=now-1h with from=now-2h: the hour before the last", () => {
  const request = read("from=now-2h&to=now-1h");
  expect([request.from, request.to]).toEqual([at(7_200_000), at(3_600_000)]);
});

test.each(["now-1y", "now+1h", "now-", "now-1.5h", "now-1hour", "today"])("from=%s → 400 naming the forms", (from) => {
  let error: unknown;
  try {
    read(`from=${encodeURIComponent(from)}`);
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).status).toBe(400);
  expect((error as AppError).message).toContain("now-15m, now-24h, now-7d");
});

test("a cursor made under from=now-1h is accepted a minute later and keeps its window", () => {
  const first = read("from=now-1h");
  const cursor = makeCursor(first, { dt: first.to, id: "1" });
  const later = read(`from=now-1h&cursor=${cursor}`, new Date(NOW.getTime() + 60_000));
  expect([later.from, later.to]).toEqual([first.from, first.to]);
});

const refusal = (run: () => unknown): string => {
  try {
    run();
  } catch (caught) {
    expect(caught).toBeInstanceOf(AppError);
    return (caught as AppError).message;
  }
  return "no refusal";
};

test("source_ids over repeats: every one counts, as in one comma-separated list", () => {
  expect(readSourceIds(new URL("http://x/?source_ids=3,1&source_ids=2&source_ids=1"))).toEqual({ ids: [1, 2, 3], malformed: [] });
  expect(refusal(() => readSourceIds(new URL("http://x/?source_ids=&source_ids=")))).toContain("source_ids is required");
});

test("unknown parameters: named (at most five, then how many more), an empty name left alone", () => {
  const url = (query: string) => new URL(`http://x/?source_ids=1&${query}`);
  expect(refusal(() => refuseUnknown(url("=x&&"), "histogram", ["source_ids"]))).toBe("no refusal");
  expect(refusal(() => refuseUnknown(url("a=1&b=2&a=3"), "histogram", ["source_ids"]))).toBe("histogram does not take a, b: it takes source_ids");
  expect(refusal(() => refuseUnknown(url("a&b&c&d&e&f&g"), "histogram", ["source_ids"], " (hint)"))).toBe(
    "histogram does not take a, b, c, d, e and 2 more: it takes source_ids (hint)",
  );
});
