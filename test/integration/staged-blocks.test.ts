// Staged blocks (drizzle/0011): a block written while its events are still hot rows carries their
// generation and no reader may see it until that generation is sealed. Here every sealed block of
// a source gets a staged copy (same events, same filter slot) beside the hot rows and the visible
// blocks, and every reader must answer exactly what it answered before: the query API (newest and
// oldest first, a needle, a pattern), the histogram (by the blocks' counts and line by line), the
// context, the aggregate, the live tail's catch-up, the view and the SQL functions. Then: their
// definitions come from src/store/sql/, applied at every start (store/db.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { latestSeq } from "../../src/store/batch-log";
import { readCatchUp } from "../../src/tail/storage";
import { createScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

/** Events of a fixed stretch of 2025: the longest retention keeps their time as sent (codec/reception.ts). */
const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const FROM = new Date(BASE - 3_600_000).toISOString();
const TO = new Date(BASE + 3_600_000).toISOString();
const SEALED = 120;
const HOT = 30;
const STAGED_GENERATION = 123_456;

let lp: TestLogpond;
let source: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
  const send = async (from: number, to: number) => {
    const events = [];
    for (let n = from; n < to; n++) {
      events.push({ dt: new Date(BASE + n * 7_000).toISOString(), n, level: n % 4 === 0 ? "error" : "info", message: `event ${n} word${n % 7}` });
    }
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  };
  await send(0, SEALED);
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  await send(SEALED, SEALED + HOT);
  await lp.flusher.flush();
});

afterAll(async () => {
  await lp?.stop();
});

async function get(pathname: string, params: Record<string, string>): Promise<any> {
  const response = await lp.api("GET", `${pathname}?${new URLSearchParams(params)}`);
  const body = await response.json();
  if (response.status !== 200) throw new Error(`${pathname}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** Every page of the query API, as the events' n in the order served. */
async function listing(params: Record<string, string>): Promise<number[]> {
  const seen: number[] = [];
  let body = await get("/api/v2/query/live-tail", { source_ids: source.id, from: FROM, to: TO, batch: "40", ...params });
  for (;;) {
    seen.push(...body.data.map((row: { n: number }) => row.n));
    if (!body.pagination.next) return seen;
    const next = new URL(body.pagination.next);
    body = await get(next.pathname, Object.fromEntries(next.searchParams));
  }
}

/** The readers whose answer differs from `before`'s (named, so a failure says which). */
function changed(before: Awaited<ReturnType<typeof observe>>, after: Awaited<ReturnType<typeof observe>>): string[] {
  return Object.keys(before).filter((key) => !Bun.deepEquals(after[key as keyof typeof after], before[key as keyof typeof before]));
}

/** What every reader answers for the source now. */
async function observe() {
  const sourceId = Number(source.id);
  const window = { source_ids: source.id, from: FROM, to: TO };
  const [anchor] = await lp.sql<{ id: string }[]>`
    select id::text as id from log_events where source_id = ${sourceId} and raw->>'n' = '60'`;
  // With the dt given, a sealed anchor (60) is looked for in its blocks' rows only, a hot one (130) by its row.
  const withDt = async (n: number) => {
    const [row] = await lp.sql<{ id: string; dt: string }[]>`
      select id::text as id, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt from log_events
      where source_id = ${sourceId} and raw->>'n' = ${String(n)}`;
    const body = await get("/api/v2/query/context", { source_id: source.id, id: row!.id, dt: row!.dt, before: "70", after: "70" });
    return body.data.map((event: { n: number }) => event.n);
  };
  const histogram = async (query?: string) => {
    const body = await get("/api/v2/query/histogram", { ...window, buckets: "24", ...(query ? { query } : {}) });
    return body.data.map((bucket: { count: number; levels: Record<string, number> }) => [bucket.count, bucket.levels]);
  };
  const aggregate = async (query?: string) => (await get("/api/v2/query/aggregate", { ...window, by: "level", ...(query ? { query } : {}) })).data;
  const upTo = await latestSeq(lp.sql);
  const tail = await readCatchUp(lp.sql, { seq: 0, id: "" }, upTo, [sourceId], undefined, 10_000);
  const ids = (rows: { id: string }[]) => rows.map((row) => row.id).sort((a, b) => Number(a) - Number(b));
  const [range] = await lp.sql<{ first: string; last: string }[]>`
    select min(id)::text as first, max(id)::text as last from log_events where source_id = ${sourceId}`;
  return {
    newest: await listing({}),
    oldest: await listing({ order: "oldest_first" }),
    needle: await listing({ query: "word3" }),
    pattern: await listing({ query: 'message=~"word[25]$"' }),
    histogram: await histogram(),
    histogramQuery: await histogram("word4"),
    context: (await get("/api/v2/query/context", { source_id: source.id, id: anchor!.id, before: "70", after: "70" })).data.map((row: { n: number }) => row.n),
    contextDt: await withDt(60),
    contextHotDt: await withDt(130),
    aggregate: await aggregate(),
    aggregateQuery: await aggregate("word1"),
    tail: tail.map((row) => row.id),
    view: (await lp.sql`select count(*)::int as n from log_events where source_id = ${sourceId}`)[0]!.n,
    between: ids(await lp.sql`select id::text as id from logpond_events_between(array[${sourceId}]::bigint[], ${FROM}::timestamptz, ${TO}::timestamptz)`),
    publicBetween: ids(await lp.sql`select id::text as id from log_events_between(array[${sourceId}]::bigint[], ${FROM}::timestamptz, ${TO}::timestamptz)`),
    byId: ids(await lp.sql`select id::text as id from log_events_by_id(${range!.first}::bigint, ${range!.last}::bigint) where source_id = ${sourceId}`),
  };
}

test("blocks staged for a generation are read by no reader until it is sealed", async () => {
  const before = await observe();
  // The readers see every event once before: the comparison below is with a true answer.
  const all = Array.from({ length: SEALED + HOT }, (_, n) => n);
  expect(before.oldest).toEqual(all);
  expect(before.newest).toEqual(all.toReversed());
  expect(before.needle).toEqual(all.filter((n) => n % 7 === 3).toReversed());
  expect(before.pattern).toEqual(all.filter((n) => n % 7 === 2 || n % 7 === 5).toReversed());
  expect(before.context).toEqual(all.slice(60 - 60, 60 + 71));
  expect(before.contextDt).toEqual(before.context);
  expect(before.contextHotDt).toEqual(all.slice(130 - 70, 130 + 71));
  expect(before.aggregate.count).toBe(SEALED + HOT);
  expect(before.aggregateQuery.count).toBe(all.filter((n) => n % 7 === 1).length);
  expect(before.tail).toHaveLength(SEALED + HOT);
  expect(before.view).toBe(SEALED + HOT);
  expect(new Set(before.between).size).toBe(SEALED + HOT);
  expect(before.byId).toEqual(before.between);
  const [tiers] = await lp.sql<{ hot: number; blocks: number }[]>`
    select (select count(*)::int from logpond_hot_between(array[${Number(source.id)}::bigint], '-infinity', 'infinity')) as hot,
      (select count(*)::int from log_blocks where source_id = ${Number(source.id)}) as blocks`;
  expect(tiers).toEqual({ hot: HOT, blocks: expect.any(Number) });
  expect(tiers!.blocks).toBeGreaterThan(0);

  // A staged copy of every visible block: its events, times, counts and filter slot.
  const staged = await lp.sql`
    insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, ids, dts, body, payload, bloom, filter_id, filter_slot,
      hist_minutes, hist_levels, hist_counts, generation)
    select source_id, min_dt, max_dt, min_id, max_id, n, ids, dts, body, payload, bloom, filter_id, filter_slot,
      hist_minutes, hist_levels, hist_counts, ${STAGED_GENERATION}
    from log_blocks where source_id = ${Number(source.id)} and generation is null`;
  expect(staged.count).toBe(tiers!.blocks);

  const staging = await observe();
  expect(changed(before, staging)).toEqual([]);
  expect(staging).toEqual(before);

  // Once its generation is sealed the staged blocks are the blocks: made visible while the
  // originals go, every reader still answers the same.
  await lp.sql.begin(async (tx) => {
    await tx`delete from log_blocks where source_id = ${Number(source.id)} and generation is null`;
    await tx`update log_blocks set generation = null where source_id = ${Number(source.id)} and generation = ${STAGED_GENERATION}`;
  });
  const sealed = await observe();
  expect(changed(before, sealed)).toEqual([]);
  expect(sealed).toEqual(before);
});

test("the view and functions come from src/store/sql/ at start: two starts at once on a new database, replaced only when a file changed", async () => {
  const db = await createScratchDatabase("sql_files");
  try {
    await Promise.all([runMigrations(db.url), runMigrations(db.url)]);
    const definitions = async () =>
      db.sql<{ name: string; xmin: string; staged: boolean }[]>`
        select proname as name, xmin::text as xmin, prosrc like '%generation%' as staged from pg_proc
        where proname in ('logpond_events_uncounted', 'log_events_by_id', 'logpond_events_matching_in', 'logpond_block_summaries') order by 1`;
    const first = await definitions();
    // (logpond_events_between reads through logpond_events_uncounted, logpond_events_matching through logpond_events_matching_in.)
    expect(first.map((row) => [row.name, row.staged])).toEqual([
      ["log_events_by_id", true],
      ["logpond_block_summaries", true],
      ["logpond_events_matching_in", true],
      ["logpond_events_uncounted", true],
    ]);
    const [view] = await db.sql<{ staged: boolean }[]>`select pg_get_viewdef('log_events') like '%generation IS NULL%' as staged`;
    expect(view!.staged).toBe(true);
    // A start with the same files leaves the definitions as they are (no lock taken on the view).
    await runMigrations(db.url);
    expect(await definitions()).toEqual(first);
    // A file that changed since (here: its digest forgotten) is applied again.
    await db.sql`update logpond_sql set digest = 'changed'`;
    await runMigrations(db.url);
    const again = await definitions();
    expect(again.map((row) => row.xmin)).not.toEqual(first.map((row) => row.xmin));
    expect((await db.sql`select digest from logpond_sql`).map((row) => row.digest)).not.toContain("changed");
  } finally {
    await db.drop();
  }
});
