// GET /api/v2/query/histogram over real HTTP against the real PostgreSQL: counts per bucket and
// level equal to what was ingested (the window's edges inclusive, levels folded by the one table of
// level names, others lowercased, the rarest
// folded into "other"), the query and source filters, the parameters' 400s and 404s, the token,
// and the statement timeout. Also the query API's answer for an empty window (meta.older).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { BUCKETS_MAX, LEVELS_MAX } from "../../src/query/histogram";
import { foldLevel, levelOf } from "../../src/query/levels";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

const HISTOGRAM = "/api/v2/query/histogram";
const iso = (ms: number) => new Date(ms).toISOString();
const micro = (ms: number) => iso(ms).replace(/Z$/, "000Z");
// A whole hour that ended at least two hours ago: its minutes are the buckets.
const BASE = Math.floor((Date.now() - 3 * 3_600_000) / 3_600_000) * 3_600_000;
const FROM = micro(BASE);
const TO = iso(BASE + 3_599_999).replace(/Z$/, "999Z"); // the hour's last microsecond
const ms = (dt: string) => Date.parse(`${dt.slice(0, 23)}Z`);
const LEVELS = ["info", "INFO", "error", "Warn", undefined, 30, ""] as const;

let lp: TestLogpond;
let web: TestSource;
let jobs: TestSource;
let events: { dt: string; level?: unknown; message: string }[];

beforeAll(async () => {
  lp = await startTestLogpond();
  web = await lp.createSource();
  jobs = await lp.createSource();
  // 200 events every 17.9 s from the window's first microsecond, cycling through levels (mixed
  // case, none, a number, empty), plus one just outside each edge and one on the last microsecond.
  events = Array.from({ length: 200 }, (_, i) => {
    const level = LEVELS[i % LEVELS.length];
    return { dt: iso(BASE + Math.floor(i * 17_900)), ...(level === undefined ? {} : { level }), message: i % 10 === 0 ? `needle ${i}` : `hay ${i}` };
  });
  events.push({ dt: TO, level: "error", message: "last microsecond" });
  const outside = [
    { dt: iso(BASE - 1), level: "error", message: "just before" },
    { dt: iso(BASE + 3_600_000), level: "error", message: "just after" },
  ];
  expect((await lp.ingest(web.token, JSON.stringify([...events, ...outside]))).status).toBe(202);
  expect((await lp.ingest(jobs.token, JSON.stringify([{ dt: iso(BASE + 90_000), level: "debug", message: "job ran" }]))).status).toBe(202);
  await lp.flusher.flush();
});
afterAll(async () => {
  await lp.stop();
});

const get = (query: string) => lp.api("GET", `${HISTOGRAM}?${query}`);
const window = `from=${encodeURIComponent(FROM)}&to=${encodeURIComponent(TO)}`;

/** What the answer should say, computed here from the events sent. */
function expected(selected: typeof events, bucketSeconds: number) {
  const counts = new Map<number, { count: number; levels: Record<string, number> }>();
  for (const event of selected) {
    const index = Math.floor((ms(event.dt) - BASE) / 1000 / bucketSeconds);
    const bucket = counts.get(index) ?? { count: 0, levels: {} };
    bucket.count++;
    const level = event.level === undefined ? "" : foldLevel(String(event.level));
    if (level !== "") bucket.levels[level] = (bucket.levels[level] ?? 0) + 1;
    counts.set(index, bucket);
  }
  return Array.from({ length: 3600 / bucketSeconds }, (_, i) => ({
    from: micro(BASE + i * bucketSeconds * 1000),
    to: micro(BASE + (i + 1) * bucketSeconds * 1000),
    ...(counts.get(i) ?? { count: 0, levels: {} }),
  }));
}

describe("counts", () => {
  test("per minute and level, equal to what was ingested; the window's edges inclusive", async () => {
    const response = await get(`source_ids=${web.id}&${window}&buckets=60`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("application/json");
    const body: any = await response.json();
    expect(body.meta).toEqual({ from: FROM, to: TO, bucket_seconds: 60, buckets: 60, total: 201, levels: ["info", "error", "warn"], complete: true });
    expect(body.data).toEqual(expected(events, 60));
  });

  test("several sources add up; a source not asked for is not counted", async () => {
    const both: any = await (await get(`source_ids=${web.id},${jobs.id}&${window}&buckets=12`)).json();
    expect(both.meta.bucket_seconds).toBe(300);
    expect(both.meta.total).toBe(202);
    expect(both.data).toEqual(expected([...events, { dt: iso(BASE + 90_000), level: "debug", message: "job ran" }], 300));
    const one: any = await (await get(`source_ids=${jobs.id}&${window}&buckets=1`)).json();
    expect(one.data).toEqual([{ from: micro(BASE), to: micro(BASE + 3_600_000), count: 1, levels: { debug: 1 } }]);
    expect(one.meta).toMatchObject({ bucket_seconds: 3600, buckets: 1, total: 1 });
  });

  test.each([
    ["level:error", (e: (typeof events)[number]) => levelOf(String(e.level)) === "error"],
    ["needle", (e: (typeof events)[number]) => e.message.startsWith("needle")],
    ["NOT level:info", (e: (typeof events)[number]) => levelOf(String(e.level)) !== "info"],
  ])("query %s counts only the events it matches", async (query, matches) => {
    const body: any = await (await get(`source_ids=${web.id}&${window}&buckets=60&query=${encodeURIComponent(query)}`)).json();
    const selected = events.filter(matches);
    expect(body.meta.total).toBe(selected.length);
    expect(body.data).toEqual(expected(selected, 60));
  });

  test(`the ${LEVELS_MAX} most frequent levels are named, the rest count as "other" (with a query too: slices add up)`, async () => {
    const many = await lp.createSource();
    const names = Array.from({ length: LEVELS_MAX + 3 }, (_, i) => `L${i}`);
    // Each level's events in two minutes that fall in different slices of a query's count.
    const sent = names.flatMap((name, i) =>
      Array.from({ length: names.length - i }, (_, k) => ({ dt: iso(BASE + (k % 2 === 0 ? 30_000 : 3_570_000)), level: name, message: "m" })),
    );
    expect((await lp.ingest(many.token, JSON.stringify(sent))).status).toBe(202);
    await lp.flusher.flush();
    const named = names.slice(0, LEVELS_MAX).map((name) => name.toLowerCase());
    const first = names.map((name, i) => [name.toLowerCase(), Math.ceil((names.length - i) / 2)] as const);
    const last = names.map((name, i) => [name.toLowerCase(), Math.floor((names.length - i) / 2)] as const);
    const fold = (counts: (readonly [string, number])[]) => {
      const levels: Record<string, number> = {};
      for (const [name, n] of counts) if (n > 0) levels[named.includes(name) ? name : "other"] = (levels[named.includes(name) ? name : "other"] ?? 0) + n;
      return levels;
    };
    for (const query of ["", "&query=m"]) {
      const body: any = await (await get(`source_ids=${many.id}&${window}&buckets=60${query}`)).json();
      expect(body.meta.levels).toEqual([...named, "other"]);
      expect(body.meta.complete).toBe(true);
      const sum = (counts: (readonly [string, number])[]) => counts.reduce((total, [, n]) => total + n, 0);
      expect(body.data[0]).toEqual({ from: micro(BASE), to: micro(BASE + 60_000), count: sum(first), levels: fold(first) });
      expect(body.data[59]).toEqual({ from: micro(BASE + 59 * 60_000), to: micro(BASE + 3_600_000), count: sum(last), levels: fold(last) });
      expect(body.data.slice(1, 59).every((bucket: any) => bucket.count === 0)).toBe(true);
    }
  });

  test("relative windows and the default: every bucket aligned to its size, the window inside them", async () => {
    for (const [query, span] of [
      ["from=now-1h", 3_600_000],
      ["", 30 * 60_000],
    ] as const) {
      const body: any = await (await get(`source_ids=${web.id}&${query}`)).json();
      const { from, to, bucket_seconds: size } = body.meta;
      expect(ms(to) - ms(from)).toBe(span);
      expect(body.data.length).toBe(body.meta.buckets);
      expect(body.data.length).toBeLessThanOrEqual(100);
      expect(body.data.every((b: any) => ms(b.from) % (size * 1000) === 0 && ms(b.to) - ms(b.from) === size * 1000)).toBe(true);
      expect(body.data[0].from <= from && body.data.at(-1).to > to).toBe(true);
    }
  });

  test("a window of centuries (buckets wider than 2^31 seconds), with and without a query", async () => {
    for (const query of ["", "&query=level:error"]) {
      const response = await get(`source_ids=${web.id}&from=now-999999999w&buckets=2${query}`);
      expect(response.status).toBe(200);
      const body: any = await response.json();
      expect(body.meta.from).toBe("1000-01-01T00:00:00.000000Z");
      expect(body.meta.bucket_seconds).toBeGreaterThan(2 ** 31);
      expect(body.data.length).toBe(2);
    }
  });
});

describe("by a field", () => {
  // Service names with falling counts, so the ranking is unambiguous; every seventh event has none,
  // and one service is literally named "other" (it joins the rest, as a level of that name does).
  const NAMES = ["api", "billing", "search", "auth", "mail", "cron", "queue", "other", "ws"];
  let many: TestSource;
  let sent: { dt: string; service?: string; level: string; message: string }[];
  beforeAll(async () => {
    many = await lp.createSource();
    sent = [];
    NAMES.forEach((name, i) => {
      for (let k = 0; k < (NAMES.length - i) * 3; k++)
        sent.push({ dt: iso(BASE + ((i * 37 + k * 101) % 3600) * 1000), service: name, level: "info", message: k % 2 ? "odd" : "even" });
    });
    for (let k = 0; k < 20; k++) sent.push({ dt: iso(BASE + k * 170_000), level: "error", message: "no service" });
    expect((await lp.ingest(many.token, JSON.stringify(sent))).status).toBe(202);
    await lp.flusher.flush();
  });

  /** The answer computed here: the LEVELS_MAX most frequent services named, the rest "other". */
  function expectedBy(selected: typeof sent, bucketSeconds: number) {
    const totals = new Map<string, number>();
    for (const e of selected) if (e.service !== undefined) totals.set(e.service, (totals.get(e.service) ?? 0) + 1);
    const named = [...totals]
      .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))
      .slice(0, LEVELS_MAX)
      .map(([name]) => name)
      .filter((name) => name !== "other");
    const data = Array.from({ length: 3600 / bucketSeconds }, (_, i) => ({
      from: micro(BASE + i * bucketSeconds * 1000),
      to: micro(BASE + (i + 1) * bucketSeconds * 1000),
      count: 0,
      values: {} as Record<string, number>,
    }));
    const seriesTotals = new Map<string, number>();
    for (const e of selected) {
      const bucket = data[Math.floor((ms(e.dt) - BASE) / 1000 / bucketSeconds)]!;
      bucket.count++;
      if (e.service === undefined) continue;
      const series = named.includes(e.service) ? e.service : "other";
      bucket.values[series] = (bucket.values[series] ?? 0) + 1;
      seriesTotals.set(series, (seriesTotals.get(series) ?? 0) + 1);
    }
    const values = [...seriesTotals].sort(([a, x], [b, y]) => Number(a === "other") - Number(b === "other") || y - x || (a < b ? -1 : 1)).map(([v]) => v);
    return { data, values, total: selected.length };
  }

  test.each(["", "even"])("by=service (query %p): top values per bucket, the rest as other, events without it in count only", async (query) => {
    const response = await get(`source_ids=${many.id}&${window}&buckets=60&by=service${query ? `&query=${query}` : ""}`);
    expect(response.status).toBe(200);
    const body: any = await response.json();
    const want = expectedBy(query ? sent.filter((e) => e.message === query) : sent, 60);
    expect(body.meta).toEqual({ from: FROM, to: TO, bucket_seconds: 60, buckets: 60, total: want.total, by: "service", values: want.values, complete: true });
    expect(body.data).toEqual(want.data);
  });

  test("by=level is the default answer (levels by severity, from the blocks' summaries)", async () => {
    const byLevel: any = await (await get(`source_ids=${web.id}&${window}&buckets=60&by=level`)).json();
    const plain: any = await (await get(`source_ids=${web.id}&${window}&buckets=60`)).json();
    expect(byLevel).toEqual(plain);
  });

  test.each([
    ["by=", "by must be one field path"],
    ["by=a,b", "by must be one field path"],
    ["by=a%20b", "by must be one field path"],
    ["by=a&by=b", "by was sent 2 times"],
  ])("%s → 400", async (params, fragment) => {
    const response = await get(`source_ids=${many.id}&${params}`);
    expect({ status: response.status, errors: ((await response.json()) as any).errors }).toEqual({ status: 400, errors: expect.stringContaining(fragment) });
  });
});

describe("refusals", () => {
  const errorOf = async (response: Response) => ({ status: response.status, errors: ((await response.json()) as any).errors as string });
  test.each([
    ["", 400, "source_ids is required"],
    ["source_ids=987654321", 404, "Source 987654321 was not found"],
    ["source_ids=abc", 404, "Source abc was not found"],
    ["source_ids=SELF&buckets=0", 400, `buckets must be a whole number from 1 to ${BUCKETS_MAX}`],
    [`source_ids=SELF&buckets=${BUCKETS_MAX + 1}`, 400, `buckets must be a whole number from 1 to ${BUCKETS_MAX}`],
    ["source_ids=SELF&from=yesterday", 400, "from must be an RFC 3339"],
    ["source_ids=SELF&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", 400, "is after to"],
    [`source_ids=SELF&query=${encodeURIComponent("level:error AND (a OR")}`, 400, "position 22"],
  ])("%s → %d", async (query, status, fragment) => {
    expect(await errorOf(await get(query.replace("SELF", web.id)))).toEqual({ status, errors: expect.stringContaining(fragment) });
  });
  test("needs the API token", async () => {
    for (const authorization of [undefined, "Bearer wrong-token-0123456789", `Bearer ${web.token}`]) {
      const response = await fetch(`${lp.apiUrl}${HISTOGRAM}?source_ids=${web.id}`, { headers: authorization ? { authorization } : {} });
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toBe("Bearer");
    }
  });
  test("a histogram running past QUERY_TIMEOUT_MS is cancelled → 503 with the reason", async () => {
    const impatient = await startTestLogpond({ QUERY_TIMEOUT_MS: "300" });
    const locker = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    try {
      await locker.begin(async (tx) => {
        await tx`lock table log_events in access exclusive mode`;
        expect(await errorOf(await impatient.api("GET", `${HISTOGRAM}?source_ids=${web.id}`))).toEqual({
          status: 503,
          errors: expect.stringContaining("longer than 300 ms (QUERY_TIMEOUT_MS)"),
        });
      });
    } finally {
      await locker.end();
      await impatient.stop();
    }
  });
});

describe("the query API's empty window", () => {
  const live = (query: string) => lp.api("GET", `/api/v2/query/live-tail?${query}`).then((r) => r.json() as Promise<any>);
  test("says there is older data and where its newest event is", async () => {
    const after = `from=${encodeURIComponent(iso(BASE + 3_600_001))}&to=${encodeURIComponent(iso(BASE + 7_200_000))}`;
    expect(await live(`source_ids=${web.id}&${after}`)).toEqual({
      data: [],
      pagination: { next: null },
      meta: { empty_window: true, older: true, older_dt: micro(BASE + 3_600_000) },
    });
    // The query decides what counts as older: the newest "needle" is in the hour before.
    const needles = events.filter((e) => e.message.startsWith("needle"));
    expect((await live(`source_ids=${web.id}&${after}&query=needle`)).meta).toEqual({
      empty_window: true,
      older: true,
      older_dt: micro(ms(needles.at(-1)!.dt)),
    });
    expect((await live(`source_ids=${web.id}&${after}&query=nothing-matches-this`)).meta).toEqual({ empty_window: true, older: false, older_dt: null });
  });
  test("nothing older: older is false; a page with rows has no meta", async () => {
    expect((await live(`source_ids=${web.id}&from=${encodeURIComponent(iso(BASE - 7_200_000))}&to=${encodeURIComponent(iso(BASE - 3_600_000))}`)).meta).toEqual(
      { empty_window: true, older: false, older_dt: null },
    );
    const full = await live(`source_ids=${web.id}&${window}&batch=5`);
    expect(full.data).toHaveLength(5);
    expect(full.meta).toBeUndefined();
  });
});
