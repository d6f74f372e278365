// A histogram (by level or by a field), a page and an aggregation with a query open their sealed
// v4 blocks on the scan threads (query/scan.ts; query/histogram.ts countScanned, query/read.ts
// readScanned, query/aggregate.ts) and read the rest in PostgreSQL: the answer is the one PostgreSQL gives alone (logpond_events_matching, query/sql.ts),
// for words, fields, levels, negations and their combinations, over windows and buckets whose
// edges cut blocks, page after page both ways, with events still hot beside the sealed ones; and a
// seal between the two reads moves nothing out of sight. A third of the blocks are made v3 blocks
// (no payload), which PostgreSQL reads beside the threads. Events are made to be awkward: levels in every case and type, 40+ characters,
// non-ASCII capitals, escapes, the word in keys and values, numbers written several ways.
import { afterAll, beforeAll, expect, test } from "bun:test";
import postgres from "postgres";
import { readAggregate, readAggregateRequest } from "../../src/query/aggregate";
import { readHistogram, readHistogramRequest } from "../../src/query/histogram";
import { readHistogramBy } from "../../src/query/histogram-by";
import { readEvents, tiers } from "../../src/query/read";
import { compileQuery } from "../../src/query/sql";
import { readRequest } from "../../src/query/request";
import { SCAN_HELD_BYTES, ScanPool } from "../../src/query/scan-pool";
import { type CountRequest, type MatchRequest, TallyTotals, type TallyRequest, TooManyTallies } from "../../src/query/scan";
import type { Sql } from "../../src/store/db";
import { sealAll } from "../../src/store/sealer";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

const HOUR = 3_600_000;
// Six whole hours that ended at least two hours ago.
const BASE = Math.floor((Date.now() - 8 * HOUR) / HOUR) * HOUR;
const micro = (ms: number, us = 0) => `${new Date(ms).toISOString().slice(0, 23)}${String(us).padStart(3, "0")}Z`;

const LEVELS: unknown[] = [
  "info",
  "INFO",
  "Error",
  "warn",
  "WARNING",
  50,
  30,
  "",
  null,
  { severity: "x" },
  "é-Level",
  "ÉRROR",
  "x".repeat(45),
  'we"ird',
  undefined,
];
/** Values of a numeric field: fractions, a negative zero, past a double's digits and range, numbers in strings, a long text. */
const LATS: unknown[] = [
  1.5,
  12,
  -0.0,
  12345678901234567890,
  1e300,
  1.7976931348623157e308,
  " 12.5 ",
  "1e5",
  "7",
  true,
  { ms: 3 },
  null,
  "x".repeat(250),
  -3.25,
];
const WORDS = ["timeout", "TimeOut", "time-out", "retry", "user", "日本語 timeout", 'a "quoted" timeout', "back\\slash", "line\nbreak", "ünïcode"];

let lp: TestLogpond;
let web: TestSource;
let jobs: TestSource;
const pool = new ScanPool(2);
let calls = 0;
/** Characters of `field=` values the threads sent back. */
let fieldChars = 0;
/** The pool, counting the blocks handed to it. */
const counting = {
  size: pool.size,
  count(request: CountRequest) {
    calls += request.payloads.length;
    return pool.count(request);
  },
  match(request: MatchRequest) {
    calls += request.payloads.length;
    return pool.match(request);
  },
  async tally(request: TallyRequest) {
    calls += request.payloads.length;
    const answer = await pool.tally(request);
    for (const text of answer.joint.field) fieldChars += text?.length ?? 0;
    return answer;
  },
  spread: pool.spread.bind(pool),
  maxTallies: pool.maxTallies,
} as unknown as ScanPool;

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

function eventsOf(count: number, seed: number, from: number, span: number): Record<string, unknown>[] {
  const next = random(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)]!;
  const events: Record<string, unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const event: Record<string, unknown> = { dt: micro(from + Math.floor(next() * span), Math.floor(next() * 1000)), message: `${pick(WORDS)} ${i}` };
    const level = pick(LEVELS);
    if (level !== undefined) event.level = level;
    if (next() < 0.5) event.status = pick([200, 404, 500, 500.5, "500", 1e21]);
    if (next() < 0.3) event.user = { plan: pick(["pro", "free", "Pro"]), timeout_ms: Math.floor(next() * 100) };
    if (next() < 0.1) event.tags = ["a", pick(["b", "timeout"])];
    // Numbers as statistics meet them (not drawn: the other fields keep their draws).
    if (i % 7 === 0) event.lat = LATS[(i / 7) % LATS.length];
    events.push(event);
  }
  return events;
}

/** Events a microsecond before, on, and a microsecond after the edges of the window that cuts blocks. */
const EDGES = [
  [micro(BASE + HOUR + 1_234, 566), micro(BASE + HOUR + 1_234, 567), micro(BASE + HOUR + 1_234, 568)],
  [micro(BASE + 4 * HOUR + 98_765, 0), micro(BASE + 4 * HOUR + 98_765, 1), micro(BASE + 4 * HOUR + 98_765, 2)],
];

/** The instant forty events share. */
const TIE = micro(BASE + 2 * HOUR + 777, 5);

beforeAll(async () => {
  lp = await startTestLogpond();
  web = await lp.createSource();
  jobs = await lp.createSource();
  // Sealed: 4,000 + 500 events over the six hours, plus one on the window's last microsecond.
  const sealed = eventsOf(4_000, 7, BASE, 6 * HOUR);
  sealed.push({ dt: micro(BASE + 6 * HOUR - 1, 999), level: "error", message: "timeout at the last microsecond" });
  // On each hour (a bucket's and a slice's edge) and a microsecond before it, and around the edges
  // of the window that cuts blocks.
  const edges = [...[1, 2, 3, 4, 5].flatMap((k) => [micro(BASE + k * HOUR), micro(BASE + k * HOUR - 1, 999)]), ...EDGES.flat()];
  for (const dt of edges) sealed.push({ dt, level: "warn", message: "timeout on an edge" });
  // Forty events at one instant: pages cut between them by id.
  for (let i = 0; i < 40; i++) sealed.push({ dt: TIE, level: "info", message: `a tie ${i}` });
  for (let i = 0; i < sealed.length; i += 1_000) expect((await lp.ingest(web.token, JSON.stringify(sealed.slice(i, i + 1_000)))).status).toBe(202);
  expect((await lp.ingest(jobs.token, JSON.stringify(eventsOf(500, 8, BASE, 6 * HOUR)))).status).toBe(202);
  await lp.flusher.flush();
  await sealAll(lp.sql as unknown as Sql);
  // A third of the blocks as storage v3 wrote them (ids, dts, a text body, no payload), kept in
  // their filter groups: PostgreSQL reads those beside the threads. Every third of this test's
  // blocks in time order, so the layout is the same whatever ids the suite's other files took.
  const ours = [Number(web.id), Number(jobs.id)];
  await lp.sql`
    update log_blocks b set (ids, dts, body, payload) = (
      select array_agg(e.id order by e.n), array_agg(e.dt order by e.n), string_agg(e.line, E'\n' order by e.n), null::bytea
      from logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) with ordinality e(id, dt, line, n))
    from (select source_id, min_id, row_number() over (order by source_id, min_dt, min_id) as k
          from log_blocks where generation is null and source_id = any(${ours}::bigint[])) r
    where b.source_id = r.source_id and b.min_id = r.min_id and b.generation is null and r.k % 3 = 0`;
  const [blocks] = await lp.sql<{ n: number; payloads: number; grouped: number }[]>`
    select count(*)::int as n, count(payload)::int as payloads, count(*) filter (where payload is null and filter_id is not null)::int as grouped
    from log_blocks where generation is null and source_id = any(${ours}::bigint[])`;
  expect(blocks!.payloads).toBeGreaterThan(1);
  expect(blocks!.grouped).toBeGreaterThan(0);
  // Hot beside them: 600 more over the same hours.
  expect((await lp.ingest(web.token, JSON.stringify(eventsOf(600, 9, BASE, 6 * HOUR)))).status).toBe(202);
  await lp.flusher.flush();
}, 120_000);

afterAll(async () => {
  pool.close();
  await lp.stop();
});

const QUERIES = [
  "timeout",
  "TIMEOUT",
  "time",
  "timeout user",
  "timeout OR retry",
  "-timeout",
  "日本語",
  "ünïcode",
  "ÜNÏCODE",
  '"quoted"',
  "status:500",
  "status>=400",
  "status=500",
  "level:error",
  "level:warn timeout",
  "user.plan:pro",
  "user.timeout_ms<50",
  "tags:timeout",
  "-level:info -retry",
];

const WINDOWS: [string, string, string, number][] = [
  ["six hours, 7 buckets", micro(BASE), micro(BASE + 6 * HOUR - 1, 999), 7],
  ["six hours, 96 buckets", micro(BASE), micro(BASE + 6 * HOUR - 1, 999), 96],
  ["edges inside blocks", micro(BASE + HOUR + 1_234, 567), micro(BASE + 4 * HOUR + 98_765, 1), 500],
];

test.each(QUERIES)("%s: the scan threads' histogram is PostgreSQL's, over every window", async (query) => {
  for (const [name, from, to, buckets] of WINDOWS) {
    const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=${encodeURIComponent(query)}&from=${from}&to=${to}&buckets=${buckets}`);
    const request = readHistogramRequest(url);
    const before = calls;
    const scanned = await readHistogram(lp.sql as unknown as Sql, request, 120_000, counting);
    const alone = await readHistogram(lp.sql as unknown as Sql, request, 120_000);
    expect({ name, complete: scanned.meta.complete }).toEqual({ name, complete: true });
    expect({ name, scanned }).toEqual({ name, scanned: alone });
    expect({ name, opened: calls > before }).toEqual({ name, opened: true });
  }
});

/** Pages of `query` over [from, to] read with the scan threads and by PostgreSQL alone, compared page after page (at most `most`). */
async function comparePages(query: string, from: string, to: string, batch: number, most: number, scanShort = true): Promise<void> {
  // Whether the threads opened a block, by order: a page may fill from the hot tier and the v3
  // blocks PostgreSQL reads before a v4 block is reached, in one order, not in both.
  const opened: Record<string, boolean> = {};
  for (const order of ["newest_first", "oldest_first"]) {
    const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=${encodeURIComponent(query)}&from=${from}&to=${to}&batch=${batch}&order=${order}`);
    const request = readRequest(url);
    const before = calls;
    let after = request.after;
    let pages = 0;
    while (pages < most) {
      const scanned = await readEvents(lp.sql as unknown as Sql, { ...request, after }, 120_000, { scanShort }, counting);
      const alone = await readEvents(lp.sql as unknown as Sql, { ...request, after }, 120_000);
      expect({ query, order, pages, scanned }).toEqual({ query, order, pages, scanned: alone });
      pages++;
      if (!scanned.next) break;
      after = scanned.next;
    }
    opened[order] = calls > before;
  }
  expect({ query, opened: Object.values(opened).some(Boolean) }).toEqual({ query, opened: true });
}

test.each(QUERIES)("%s: pages read with the scan threads are PostgreSQL's, the first six both ways, in a window that cuts blocks", async (query) => {
  const [, from, to] = WINDOWS[2]!;
  await comparePages(query, from, to, 61, 6);
});

test("pages of 7 cut between events of the same instant as PostgreSQL cuts them, by id, both ways", async () => {
  await comparePages("tie", micro(BASE + 2 * HOUR), micro(BASE + 3 * HOUR), 7, 1_000);
});

test.each(["timeout", "-timeout"])(
  "%s: every page of six hours read with the scan threads is PostgreSQL's, both ways",
  async (query) => {
    const [, from, to] = WINDOWS[0]!;
    await comparePages(query, from, to, 400, 1_000);
  },
  120_000,
);

test.each(["timeout", "retry", "level:error"])(
  "%s: as the API reads them (the threads for slices of an hour or more, one statement for shorter ones), pages are PostgreSQL's",
  async (query) => {
    // Two days on either side: the first slices are empty and the data is reached in long ones.
    await comparePages(query, micro(BASE - 48 * HOUR), micro(BASE + 8 * HOUR), 97, 1_000, false);
  },
  120_000,
);

test("with a bound on held payloads below one batch's, each read's calls go one at a time and answer as PostgreSQL", async () => {
  const narrow = new ScanPool(2, 1);
  try {
    const [, from, to, buckets] = WINDOWS[2]!;
    const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=timeout&from=${from}&to=${to}&buckets=${buckets}`);
    const request = readHistogramRequest(url);
    const [scanned, other] = await Promise.all([
      readHistogram(lp.sql as unknown as Sql, request, 120_000, narrow),
      readHistogram(lp.sql as unknown as Sql, readHistogramRequest(new URL(url.href.replace("query=timeout", "query=retry"))), 120_000, narrow),
    ]);
    expect(scanned).toEqual(await readHistogram(lp.sql as unknown as Sql, request, 120_000));
    expect(other.meta.complete).toBe(true);
    const page = readRequest(new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=timeout&from=${from}&to=${to}&batch=61&order=newest_first`));
    expect(await readEvents(lp.sql as unknown as Sql, page, 120_000, { scanShort: true }, narrow)).toEqual(
      await readEvents(lp.sql as unknown as Sql, page, 120_000),
    );
  } finally {
    narrow.close();
  }
});

test("what the threads count is added to the hot tier's: the word's events all counted once", async () => {
  const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=timeout&from=${micro(BASE)}&to=${micro(BASE + 6 * HOUR - 1, 999)}&buckets=7`);
  const answer = await readHistogram(lp.sql as unknown as Sql, readHistogramRequest(url), 120_000, counting);
  const [expected] = await lp.sql<{ n: number }[]>`
    select count(*)::int as n from log_events where source_id in (${Number(web.id)}, ${Number(jobs.id)}) and raw::text ilike '%timeout%'`;
  expect(answer.meta.total).toBe(expected!.n);
  expect(expected!.n).toBeGreaterThan(1_000);
});

test("a seal between the threads' count and PostgreSQL's moves nothing out of sight: the hot events it seals are counted once", async () => {
  // Connections of its own for the seal and the probes: the histogram's transaction holds one of lp.sql's two.
  const own = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 4, onnotice: () => {} });
  try {
    const source = await lp.createSource();
    const hot = Array.from({ length: 800 }, (_, i) => ({ dt: micro(BASE + 5 * HOUR + i * 1_000), level: "info", message: `timeout ${i}` }));
    expect((await lp.ingest(source.token, JSON.stringify(hot))).status).toBe(202);
    await lp.flusher.flush();
    const url = new URL(`http://x/?source_ids=${source.id}&query=timeout&from=${micro(BASE)}&to=${micro(BASE + 6 * HOUR - 1, 999)}&buckets=7`);
    let sealing: Promise<unknown> | undefined;
    let sealed = false;
    const answer = await readHistogram(lp.sql as unknown as Sql, readHistogramRequest(url), 120_000, counting, {
      // In the newest slice's snapshot: a seal of the hot tier starts, and the count goes on once it
      // has ended or waits for a lock (the snapshot's hold on the hot tier: store/snapshot.ts).
      async beforeRest() {
        if (sealing) return;
        sealing = sealAll(own as unknown as Sql).then(() => {
          sealed = true;
        });
        await waitFor("the seal to end or wait for a lock", async () => {
          const [waiting] = await own<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock'`;
          return sealed || waiting!.n > 0;
        });
      },
    });
    await sealing;
    expect(answer.meta.total).toBe(800);
    // A seal that found the snapshot's lock waited, or gave up (then its generation is sealed now):
    // either way the events end up in blocks, still counted once.
    await waitFor("the hot events to be sealed", async () => {
      await sealAll(own as unknown as Sql);
      const [left] = await own<{ n: number }[]>`select count(*)::int as n from logpond_hot_between(${[Number(source.id)]}::bigint[], '-infinity', 'infinity')`;
      return left!.n === 0;
    });
    expect((await readHistogram(lp.sql as unknown as Sql, readHistogramRequest(url), 120_000, counting)).meta.total).toBe(800);
  } finally {
    await own.end();
  }
}, 120_000);

const BY_FIELDS = ["status", "user.plan", "tags", "tags.1", "lat", "source_id", "message"];

test.each(["timeout", "status>=400", "-level:info -retry", "user.plan:pro"])(
  "%s: a histogram by a field counted with the scan threads is PostgreSQL's, over every window",
  async (query) => {
    for (const by of BY_FIELDS) {
      for (const [name, from, to, buckets] of WINDOWS) {
        const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=${encodeURIComponent(query)}&from=${from}&to=${to}&buckets=${buckets}&by=${by}`);
        const request = { ...readHistogramRequest(url), by };
        const before = calls;
        const scanned = await readHistogramBy(lp.sql as unknown as Sql, request, 120_000, counting);
        const alone = await readHistogramBy(lp.sql as unknown as Sql, request, 120_000);
        expect({ by, name, complete: scanned.meta.complete }).toEqual({ by, name, complete: true });
        expect({ by, name, scanned }).toEqual({ by, name, scanned: alone });
        expect({ by, name, opened: calls > before }).toEqual({ by, name, opened: true });
      }
    }
  },
  120_000,
);

/** Aggregations as the page and the API ask for them, each with and without buckets. */
const AGGREGATIONS = [
  "by=status",
  "by=user.plan,level&top=3",
  "by=tags,tags.0&top=100",
  "facets=status,level,user.plan,tags,message,lat&top=5",
  "distinct=user.timeout_ms",
  "distinct=message",
  "field=lat",
  "field=status",
  "by=level&field=user.timeout_ms",
  "by=source_id",
  "by=dt&top=5",
  "by=id&top=7",
];

test.each(["timeout", "status>=400", "-level:info -retry", "user.plan:pro", "lat>=1"])(
  "%s: aggregations tallied on the scan threads are PostgreSQL's, over every window",
  async (query) => {
    for (const asked of AGGREGATIONS) {
      for (const [name, from, to, buckets] of WINDOWS) {
        for (const bucketed of [false, true]) {
          const url = new URL(
            `http://x/?source_ids=${web.id},${jobs.id}&query=${encodeURIComponent(query)}&from=${from}&to=${to}&${asked}${bucketed ? `&buckets=${buckets}` : ""}`,
          );
          const request = readAggregateRequest(url);
          const before = calls;
          const scanned = await readAggregate(lp.sql as unknown as Sql, request, 120_000, counting);
          const alone = await readAggregate(lp.sql as unknown as Sql, request, 120_000);
          expect({ asked, name, bucketed, scanned }).toEqual({ asked, name, bucketed, scanned: alone });
          expect({ asked, name, opened: calls > before }).toEqual({ asked, name, opened: true });
        }
      }
    }
  },
  120_000,
);

test("without a query, aggregations the block summaries cannot answer are tallied on the scan threads, as PostgreSQL counts them", async () => {
  // A single field's top values and facets are counted from the summaries (query/aggregate.ts readCounted).
  const counted = new Set(["by=status", "facets=status,level,user.plan,tags,message,lat&top=5"]);
  for (const asked of AGGREGATIONS) {
    for (const [name, from, to, buckets] of WINDOWS) {
      for (const bucketed of [false, true]) {
        const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&from=${from}&to=${to}&${asked}${bucketed ? `&buckets=${buckets}` : ""}`);
        const request = readAggregateRequest(url);
        const before = calls;
        const scanned = await readAggregate(lp.sql as unknown as Sql, request, 120_000, counting);
        const alone = await readAggregate(lp.sql as unknown as Sql, request, 120_000);
        expect({ asked, name, bucketed, scanned }).toEqual({ asked, name, bucketed, scanned: alone });
        expect({ asked, name, opened: calls > before }).toEqual({ asked, name, opened: !counted.has(asked) });
      }
    }
  }
}, 120_000);

test("with a cap the threads tally the first matches in their blocks' order: exactly the cap, each a real match once, partial only past it", async () => {
  const [, from, to] = WINDOWS[0]!;
  const base = `http://x/?source_ids=${web.id},${jobs.id}&query=timeout&from=${from}&to=${to}`;
  const all = await readAggregate(lp.sql as unknown as Sql, readAggregateRequest(new URL(`${base}&by=id&top=100`)), 120_000);
  const matches = all.data.count;
  expect(matches).toBeGreaterThan(1_000);
  // The matches' ids as PostgreSQL alone finds them (query/sql.ts over both tiers).
  const query = readAggregateRequest(new URL(`${base}&by=id`)).query!;
  const params: unknown[] = [[Number(web.id), Number(jobs.id)], from, to];
  const condition = compileQuery(query, params.length + 1, "line");
  params.push(...condition.params);
  const events = tiers(params, "$1::bigint[]", "$2::text::timestamptz", "$3::text::timestamptz", query);
  const found = await lp.sql.unsafe<{ id: string }[]>(
    `select id::text as id from ${events} where dt >= $2::text::timestamptz and dt <= $3::text::timestamptz and source_id = any($1::bigint[]) and ${condition.text}`,
    params as never[],
  );
  const ids = new Set(found.map((row) => row.id));
  expect(ids.size).toBe(matches);
  for (const cap of [1, 50, 999, matches - 1]) {
    const before = calls;
    const answer = await readAggregate(lp.sql as unknown as Sql, readAggregateRequest(new URL(`${base}&by=id&top=100&max_events=${cap}`)), 120_000, counting);
    expect(calls).toBeGreaterThan(before);
    expect({ cap, count: answer.data.count, meta: answer.meta }).toEqual({
      cap,
      count: cap,
      meta: { ...answer.meta, complete: false, partial: { reason: "max_events", max_events: cap } },
    });
    expect(answer.data.by!.groups).toBe(cap);
    for (const { values, count } of answer.data.by!.top)
      expect({ id: values[0], count, real: ids.has(values[0]!) }).toEqual({ id: values[0], count: 1, real: true });
  }
  // At or past the number of matches: the whole count, complete, PostgreSQL's answer.
  for (const cap of [matches, matches + 1, 100_000]) {
    for (const asked of ["facets=status,level&top=5", "by=user.plan,level&field=lat&buckets=7"]) {
      const request = readAggregateRequest(new URL(`${base}&${asked}&max_events=${cap}`));
      const scanned = await readAggregate(lp.sql as unknown as Sql, request, 120_000, counting);
      expect({ cap, asked, scanned }).toEqual({ cap, asked, scanned: await readAggregate(lp.sql as unknown as Sql, request, 120_000) });
      expect(scanned.meta.complete).toBe(true);
    }
  }
});

test("statistics of a field of texts send nothing back from the threads: a text that cannot be a number is null to PostgreSQL too", async () => {
  const [, from, to] = WINDOWS[0]!;
  const request = readAggregateRequest(new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=timeout&from=${from}&to=${to}&field=message`));
  const before = fieldChars;
  const scanned = await readAggregate(lp.sql as unknown as Sql, request, 120_000, counting);
  expect(scanned).toEqual(await readAggregate(lp.sql as unknown as Sql, request, 120_000));
  expect(scanned.data.stats!.count).toBe(0);
  expect(fieldChars - before).toBe(0);
  // A field of numbers still sends its values: the check above is not vacuous.
  await readAggregate(
    lp.sql as unknown as Sql,
    readAggregateRequest(new URL(`http://x/?source_ids=${web.id},${jobs.id}&from=${from}&to=${to}&field=lat`)),
    120_000,
    counting,
  );
  expect(fieldChars - before).toBeGreaterThan(0);
});

test("the statistics the threads tally see every kind of value as PostgreSQL does: some numbers, the rest left out", async () => {
  const [, from, to] = WINDOWS[0]!;
  const url = new URL(`http://x/?source_ids=${web.id},${jobs.id}&query=${encodeURIComponent("lat>=-1000 OR lat:*")}&from=${from}&to=${to}&field=lat`);
  const answer = await readAggregate(lp.sql as unknown as Sql, readAggregateRequest(url), 120_000, counting);
  const stats = answer.data.stats!;
  // 1.5, 12, -0, 1.2e19, 1e300, " 12.5 ", "7", -3.25 count; 1.79e308 (past 1e308), "1e5", true, an object, null, a long text do not.
  expect(stats.max).toBe(1e300);
  expect(stats.min).toBe(-3.25);
  expect(stats.count).toBeGreaterThan(0);
});

test("past the pool's bound on values to add up, aggregations and histograms are PostgreSQL's alone: the same answers", async () => {
  const small = new ScanPool(2, SCAN_HELD_BYTES, 20);
  try {
    const [, from, to, buckets] = WINDOWS[1]!;
    const base = `http://x/?source_ids=${web.id},${jobs.id}&query=timeout&from=${from}&to=${to}`;
    for (const asked of ["by=id&top=7", "distinct=message", "facets=message,status&top=3", "by=status"]) {
      const request = readAggregateRequest(new URL(`${base}&${asked}&buckets=${buckets}`));
      expect({ asked, answer: await readAggregate(lp.sql as unknown as Sql, request, 120_000, small) }).toEqual({
        asked,
        answer: await readAggregate(lp.sql as unknown as Sql, request, 120_000),
      });
    }
    for (const by of ["id", "message", "status"]) {
      const request = { ...readHistogramRequest(new URL(`${base}&buckets=${buckets}&by=${by}`)), by };
      expect({ by, answer: await readHistogramBy(lp.sql as unknown as Sql, request, 120_000, small) }).toEqual({
        by,
        answer: await readHistogramBy(lp.sql as unknown as Sql, request, 120_000),
      });
    }
    const levels = readHistogramRequest(new URL(`${base}&buckets=500`));
    expect(await readHistogram(lp.sql as unknown as Sql, levels, 120_000, small)).toEqual(await readHistogram(lp.sql as unknown as Sql, levels, 120_000));
  } finally {
    small.close();
  }
});

test("the bound is what makes the difference: past it an aggregation's tallies are refused", () => {
  const totals = new TallyTotals(1, 0, 2);
  const tallies = (values: string[]) => ({
    joint: {
      buckets: values.map(() => null),
      by: [values],
      distinct: values.map(() => null),
      field: values.map(() => null),
      numbers: values.map(() => false),
      counts: values.map(() => 1),
    },
    facets: [],
    matched: values.length,
  });
  totals.add(tallies(["a", "b"]));
  totals.add(tallies(["a", "b"]));
  expect(totals.totals.joint.counts).toEqual([2, 2]);
  expect(() => totals.add(tallies(["c"]))).toThrow(TooManyTallies);
});
