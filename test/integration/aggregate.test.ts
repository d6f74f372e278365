// GET /api/v2/query/aggregate over real HTTP against the real PostgreSQL, over both tiers (half
// the events sealed into blocks, half hot): top values of a field and of a pair with "other",
// facets, distinct, numeric statistics, per bucket; the query and the window applied; levels by
// severity; bad parameters are 400s naming what to write. Expected values are computed here from
// the events sent.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { FACETS_MAX, TOP_MAX } from "../../src/query/aggregate";
import { tiers } from "../helpers/sealing";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const FROM = new Date(BASE).toISOString();
const TO = new Date(BASE + 400 * 1000).toISOString();
const LEVELS = ["info", "INFO", "warn", "error", "ERR", "debug"];
const SERVICES = ["api", "billing", "search"];

let lp: TestLogpond;
let source: TestSource;
const sent: { dt: string; n: number; level: string; service: string; ms: number | string; user: string; message: string }[] = [];

beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
  for (let n = 0; n < 400; n++) {
    sent.push({
      dt: new Date(BASE + n * 1000).toISOString(),
      n,
      level: LEVELS[n % LEVELS.length]!,
      service: SERVICES[n % 7 === 0 ? 1 : n % 3]!,
      // Some durations sent as numeric strings: counted as numbers too.
      ms: n % 10 === 0 ? String(n) : n,
      user: `u${n % 37}`,
      message: n % 5 === 0 ? "request timeout" : "request served",
    });
  }
  const post = async (events: unknown[]) => expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  await post(sent.slice(0, 200));
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  await post(sent.slice(200));
  await lp.flusher.flush();
  expect(await tiers(lp.sql, Number(source.id))).toMatchObject({ hot: 200, sealed: 200 });
});

afterAll(async () => {
  await lp?.stop();
});

const aggregate = async (params: Record<string, string>) => {
  const search = new URLSearchParams({ source_ids: source.id, from: FROM, to: TO, ...params });
  const response = await lp.api("GET", `/api/v2/query/aggregate?${search}`);
  return { status: response.status, body: (await response.json()) as any };
};

const severity = (level: string) => ({ info: "info", warn: "warn", error: "error", err: "error", debug: "debug" })[level.toLowerCase()]!;
function counts<T>(items: T[], key: (item: T) => string): [string, number][] {
  const map = new Map<string, number>();
  for (const item of items) map.set(key(item), (map.get(key(item)) ?? 0) + 1);
  return [...map].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1));
}

test("top values of a field, level by severity, with the rest as other", async () => {
  const { status, body } = await aggregate({ by: "level", top: "2" });
  expect(status).toBe(200);
  const expected = counts(sent, (e) => severity(e.level));
  expect(body.data.count).toBe(400);
  expect(body.data.by).toEqual({
    fields: ["level"],
    top: expected.slice(0, 2).map(([value, count]) => ({ values: [value], count })),
    other: expected.slice(2).reduce((sum, [, n]) => sum + n, 0),
    groups: expected.length,
  });
  expect(body.meta).toMatchObject({ complete: true, bucket_seconds: null });
});

test("a pair of fields, under a query", async () => {
  const { body } = await aggregate({ by: "service,level", query: "timeout", top: "100" });
  const matching = sent.filter((e) => e.message.includes("timeout"));
  const expected = counts(matching, (e) => `${e.service}\u0000${severity(e.level)}`);
  expect(body.data.count).toBe(matching.length);
  expect(body.data.by.top.map((t: any) => [t.values.join("\u0000"), t.count])).toEqual(expected);
  expect(body.data.by.other).toBe(0);
});

test("facets: each field's top values on its own, with how many events have it", async () => {
  const { body } = await aggregate({ facets: "service,user,absent", top: "3" });
  const [service, user, absent] = body.data.facets;
  const services = counts(sent, (e) => e.service);
  expect(service).toEqual({ field: "service", present: 400, distinct: 3, top: services.map(([value, count]) => ({ value, count })), other: 0 });
  const users = counts(sent, (e) => e.user);
  expect(user).toEqual({
    field: "user",
    present: 400,
    distinct: 37,
    top: users.slice(0, 3).map(([value, count]) => ({ value, count })),
    other: 400 - users.slice(0, 3).reduce((s, [, n]) => s + n, 0),
  });
  expect(absent).toEqual({ field: "absent", present: 0, distinct: 0, top: [], other: 0 });
});

test("distinct and numeric statistics over a narrower window", async () => {
  const to = new Date(BASE + 299 * 1000).toISOString();
  const { body } = await aggregate({ distinct: "user", field: "ms", to });
  const inWindow = sent.filter((e) => e.n <= 299);
  expect(body.data.distinct).toEqual({ field: "user", count: new Set(inWindow.map((e) => e.user)).size });
  const values = inWindow.map((e) => Number(e.ms)).sort((a, b) => a - b);
  const percentile = (p: number) => {
    const at = p * (values.length - 1);
    const lower = Math.floor(at);
    return values[lower]! + (values[Math.min(lower + 1, values.length - 1)]! - values[lower]!) * (at - lower);
  };
  expect(body.data.stats).toEqual({
    field: "ms",
    count: 300,
    min: 0,
    max: 299,
    avg: values.reduce((s, v) => s + v, 0) / values.length,
    p50: percentile(0.5),
    p90: percentile(0.9),
    p95: percentile(0.95),
    p99: percentile(0.99),
  });
});

test("per histogram bucket: the count, the top values and the statistics of each", async () => {
  const { body } = await aggregate({ buckets: "4", by: "service", field: "n" });
  expect(body.meta.bucket_seconds).toBe(300);
  const buckets = body.data.buckets;
  expect(buckets.reduce((s: number, b: any) => s + b.count, 0)).toBe(400);
  const order = body.data.by.top.map((t: any) => t.values[0]);
  for (const bucket of buckets) {
    const inside = sent.filter((e) => e.dt >= bucket.from.slice(0, 23) && e.dt < bucket.to.slice(0, 23));
    expect(bucket.count).toBe(inside.length);
    expect(bucket.top).toEqual(order.map((service: string) => inside.filter((e) => e.service === service).length));
    expect(bucket.other).toBe(0);
    expect(bucket.stats.count).toBe(inside.length);
    if (inside.length) expect([bucket.stats.min, bucket.stats.max]).toEqual([inside[0]!.n, inside[inside.length - 1]!.n]);
  }
});

test.each([
  [{}, "say what to aggregate: by=<field>"],
  [{ by: "a,b,c" }, "by takes at most 2 fields (got 3)"],
  [{ by: "a b" }, 'by must be field paths such as level or http.status, comma-separated (got "a b")'],
  [{ facets: Array.from({ length: FACETS_MAX + 1 }, (_, i) => `f${i}`).join(",") }, `facets takes at most ${FACETS_MAX} fields (got ${FACETS_MAX + 1})`],
  [{ by: "level", top: String(TOP_MAX + 1) }, `top must be a whole number from 1 to ${TOP_MAX} (got "${TOP_MAX + 1}")`],
  [{ by: "level", query: "status>=abc" }, "position 9"],
])("bad parameters %j: 400 naming what to write", async (params, message) => {
  const { status, body } = await aggregate(params as Record<string, string>);
  expect(status).toBe(400);
  expect(body.errors).toContain(message);
});

test("an unknown source: 404", async () => {
  const response = await lp.api("GET", "/api/v2/query/aggregate?source_ids=987654321&by=level");
  expect(response.status).toBe(404);
});

test("an integer too large for a double is left out of the statistics, not a 500", async () => {
  const other = await lp.createSource({ logs_retention: 3652 });
  const dt = new Date(BASE).toISOString();
  const body = `[{"dt":"${dt}","ms":${"9".repeat(400)}},{"dt":"${dt}","ms":-${"9".repeat(400)}},{"dt":"${dt}","ms":7},{"dt":"${dt}","ms":"3"}]`;
  expect((await lp.ingest(other.token, body)).status).toBe(202);
  await lp.flusher.flush();
  const search = new URLSearchParams({ source_ids: other.id, from: FROM, to: TO, field: "ms" });
  const response = await lp.api("GET", `/api/v2/query/aggregate?${search}`);
  expect(response.status).toBe(200);
  const { data } = (await response.json()) as any;
  expect(data.count).toBe(4);
  expect(data.stats).toMatchObject({ count: 2, min: 3, max: 7, avg: 5 });
});

test("an average over numbers near a double's limit, not a 500", async () => {
  const other = await lp.createSource({ logs_retention: 3652 });
  const dt = new Date(BASE).toISOString();
  const body = `[{"dt":"${dt}","ms":1${"0".repeat(300)}},{"dt":"${dt}","ms":2},{"dt":"${dt}","ms":"4"}]`;
  expect((await lp.ingest(other.token, body)).status).toBe(202);
  await lp.flusher.flush();
  for (const extra of [{}, { buckets: "2" }] as Record<string, string>[]) {
    const search = new URLSearchParams({ source_ids: other.id, from: FROM, to: TO, field: "ms", ...extra });
    const response = await lp.api("GET", `/api/v2/query/aggregate?${search}`);
    expect(response.status).toBe(200);
    const { data } = (await response.json()) as any;
    expect(data.stats).toMatchObject({ count: 3, min: 2, max: 1e300 });
    expect(data.stats.avg / (1e300 / 3)).toBeCloseTo(1, 9);
  }
});

test("source_id, id and dt are the row's, as the query API shows them (the stored event has no such fields)", async () => {
  const other = await lp.createSource({ logs_retention: 3652 });
  const dt = new Date(BASE + 1000).toISOString();
  expect(
    (
      await lp.ingest(
        other.token,
        JSON.stringify([
          { dt, message: "a" },
          { dt, message: "b", source_id: "sent" },
        ]),
      )
    ).status,
  ).toBe(202);
  await lp.flusher.flush();
  const { status, body } = await aggregate({ source_ids: `${source.id},${other.id}`, by: "source_id", distinct: "id", facets: "dt" });
  expect(status).toBe(200);
  expect(body.data.by.top).toEqual([
    { values: [source.id], count: 400 },
    { values: [other.id], count: 2 },
  ]);
  expect(body.data.distinct.count).toBe(402);
  expect(body.data.facets[0].present).toBe(402);
  expect(body.data.facets[0].top).toContainEqual({ value: `${dt.slice(0, 23)}000Z`, count: 3 });
});

test("buckets=1 over a window across 1970-01-01 answers (no epoch-aligned bucket holds both sides)", async () => {
  const { status, body } = await aggregate({ buckets: "1", from: "1969-12-31T00:00:00Z", to: "1970-01-02T00:00:00Z" });
  expect(status).toBe(200);
  expect(body.data.count).toBe(0);
  expect(body.data.buckets.map((b: any) => b.from)).toEqual(["1969-12-30T00:00:00.000000Z", "1970-01-01T00:00:00.000000Z"]);
  expect(body.meta.bucket_seconds).toBe(2 * 86_400);
});

test("max_events: past it the answer is partial and says so (counts of that many events), never a silently smaller number", async () => {
  // A cap below the window's 400 events (both tiers): the counts are those of the first events read.
  const capped = await aggregate({ facets: "level,service", max_events: "150" });
  expect(capped.status).toBe(200);
  expect(capped.body.data.count).toBe(150);
  expect(capped.body.meta).toMatchObject({ complete: false, partial: { reason: "max_events", max_events: 150 } });
  const counted = capped.body.data.facets.map((f: any) => f.present);
  expect(counted).toEqual([150, 150]);
  // Each counted value is at most the window's: a subset, not another window.
  const full = await aggregate({ facets: "level,service" });
  for (const [i, facet] of capped.body.data.facets.entries()) {
    for (const { value, count } of facet.top) {
      expect(count).toBeLessThanOrEqual(full.body.data.facets[i].top.find((t: any) => t.value === value)?.count ?? 0);
    }
  }
  // At or above the window's count: complete, the same answer as without a cap.
  for (const cap of ["400", "100000"]) {
    const whole = await aggregate({ facets: "level,service", max_events: cap });
    expect(whole.body).toEqual(full.body);
  }
  expect(full.body.meta.complete).toBe(true);
  expect(full.body.meta.partial).toBeUndefined();
  // A query counts its matches only: the cap is on the events that match.
  const matching = sent.filter((e) => e.message.includes("timeout")).length;
  const query = await aggregate({ by: "level", query: "timeout", max_events: String(matching) });
  expect(query.body.meta.complete).toBe(true);
  expect(query.body.data.count).toBe(matching);
});

test.each(["0", "-1", "x", "100000001"])("max_events=%s: 400", async (cap) => {
  const { status, body } = await aggregate({ by: "level", max_events: cap });
  expect({ status, errors: body.errors }).toEqual({ status: 400, errors: expect.stringContaining("max_events must be a whole number from 1 to") });
});
