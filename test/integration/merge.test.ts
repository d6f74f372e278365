// Merges (store/merge.ts) on a database of the test's own, with the sealer's memory path on two
// seal threads: a sparse source gets a small block per generation, and requests sealed one by one
// whose events interleave in time make blocks that overlap.
// A merge pass must leave every reader's answer as it was (log_events, newest, a search through
// the filters, context, the histogram), the day's blocks fewer and non-overlapping, no filter row
// without its blocks; it never rewrites a deleted source's blocks nor a run whose blocks another
// transaction holds; and a seal publishing into the same day meanwhile loses and doubles nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { buildBlocks } from "../../src/store/blocks";
import { runMigrations } from "../../src/store/db";
import { mergePass, mergeRun } from "../../src/store/merge";
import type { BlockInfo, Run } from "../../src/store/merge-plan";
import { decodeRows, type ReadRow } from "../../src/store/seal-pool";
import { BLOCK_EVENTS } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("merge");
  await runMigrations(db.url);
  // No timed seal nor merge: the tests run them when they choose.
  lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", SEAL_FROM: "memory", SEAL_WORKERS: "2", MERGE_INTERVAL_MS: "0" });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

/** A past day (a day before today is merged from two blocks on); the longest retention keeps it. */
const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const DAY = "2025-11-20";
const build = (rows: ReadRow[]) => Promise.resolve(buildBlocks(decodeRows(rows), BLOCK_EVENTS));
const DT = `to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * `generations` pairs of requests of a sparse source whose events interleave in time, each
 * request sealed on its own (one generation, one block: a source-day's events of a generation go to
 * one builder), so the pair's blocks overlap.
 */
async function sparse(source: TestSource, generations: number, perRequest: number, from = 0): Promise<void> {
  for (let g = from; g < from + generations; g++) {
    for (const r of [0, 1]) {
      const events = [];
      for (let i = 0; i < perRequest; i++) {
        const n = g * 2 * perRequest + 2 * i + r;
        events.push({
          dt: new Date(BASE + n * 1000).toISOString(),
          n,
          level: n % 3 === 0 ? "error" : "info",
          message: `event ${n}${n % 7 === 0 ? " zebraquartz" : ""}`,
        });
      }
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
      await lp.flusher.flush();
      await lp.sealer.sealNow();
    }
  }
}

interface Row {
  min_id: string;
  min_dt: string;
  max_dt: string;
  n: number;
  filter_id: string | null;
}
const blocks = (source: TestSource) =>
  db.sql<Row[]>`
    select min_id::text, to_char(min_dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as min_dt,
      to_char(max_dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as max_dt, n, filter_id::text
    from log_blocks where source_id = ${Number(source.id)} and generation is null order by min_dt, max_dt`;
const overlaps = (rows: Row[]) => rows.filter((row, i) => i > 0 && row.min_dt < rows[i - 1]!.max_dt).length;

/** Every answer a reader can get about the source. */
async function observe(source: TestSource, anchorId: string) {
  const window = `from=${new Date(BASE - 3_600_000).toISOString()}&to=${new Date(BASE + 86_400_000 - 3_600_001).toISOString()}`;
  const json = async (path: string) => {
    const response = await lp.api("GET", path);
    expect(response.status).toBe(200);
    return response.json();
  };
  const ids = (answer: any) => (answer.data as { id: string; dt: string }[]).map((row) => `${row.id} ${row.dt}`);
  return {
    events: await db.sql`select id::text, ${db.sql.unsafe(DT)} as dt, raw::text from log_events where source_id = ${Number(source.id)} order by id`,
    newest: ids(await json(`/api/v2/query/live-tail?source_ids=${source.id}&batch=50&${window}`)),
    search: ids(await json(`/api/v2/query/live-tail?source_ids=${source.id}&batch=5000&${window}&query=zebraquartz`)),
    errors: ids(await json(`/api/v2/query/live-tail?source_ids=${source.id}&batch=5000&${window}&query=${encodeURIComponent("level:error")}`)),
    context: ids(await json(`/api/v2/query/context?source_id=${source.id}&id=${anchorId}&before=40&after=40`)),
    histogram: await json(`/api/v2/query/histogram?source_ids=${source.id}&${window}&buckets=24`),
  };
}

test("a merge pass leaves every answer as it was, and the day's blocks fewer, non-overlapping, every filter row with its blocks", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  await sparse(source, 8, 30);
  const before = await blocks(source);
  expect(before.length).toBeGreaterThanOrEqual(16);
  expect(overlaps(before)).toBeGreaterThan(0);
  const [anchor] = await db.sql<{ id: string }[]>`select id::text from log_events where source_id = ${Number(source.id)} and raw->>'n' = '250'`;
  const seen = await observe(source, anchor!.id);
  expect(seen.events.length).toBe(480);
  expect(seen.search.length).toBe(Math.ceil(480 / 7));
  expect(seen.context.length).toBe(81);

  const stats = await lp.merger.mergeNow();
  expect(await observe(source, anchor!.id)).toEqual(seen);
  expect(stats.blocksMerged).toBe(before.length);
  const after = await blocks(source);
  expect(after.length).toBe(1); // 480 events: one block
  expect(stats.blocksWritten).toBe(after.length);
  expect(overlaps(after)).toBe(0);
  const [orphans] = await db.sql<{ filters: number; blocks: number }[]>`
    select (select count(*)::int from log_filters f where f.source_id = ${Number(source.id)} and not exists (select 1 from log_blocks b where b.filter_id = f.id)) as filters,
      (select count(*)::int from log_blocks b where b.source_id = ${Number(source.id)} and b.filter_id is not null and not exists (select 1 from log_filters f where f.id = b.filter_id)) as blocks`;
  expect(orphans).toEqual({ filters: 0, blocks: 0 });

  // Merged: the next pass finds nothing to do for it.
  const again = await lp.merger.mergeNow();
  expect(await blocks(source)).toEqual(after);
  expect(again.tooBig).toBe(0);
}, 120_000);

test("more than a block's events become even, full blocks; late small blocks are merged into them again", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  await sparse(source, 6, 200); // 2,400 events in 12 overlapping blocks of 200
  await lp.merger.mergeNow();
  const merged = await blocks(source);
  expect(merged.map((row) => row.n)).toEqual([800, 800, 800]);
  expect(overlaps(merged)).toBe(0);
  // Late events into the same stretch of the day: small blocks overlapping the merged ones.
  await sparse(source, 2, 10, 3);
  const late = await blocks(source);
  expect(overlaps(late)).toBeGreaterThan(0);
  const [anchor] = await db.sql<{ id: string }[]>`select id::text from log_events where source_id = ${Number(source.id)} and raw->>'n' = '1300' limit 1`;
  const seen = await observe(source, anchor!.id);
  await lp.merger.mergeNow();
  const after = await blocks(source);
  expect(overlaps(after)).toBe(0);
  expect(after.length).toBeLessThan(late.length);
  expect(await observe(source, anchor!.id)).toEqual(seen);
}, 120_000);

test("a deleted source's blocks are never rewritten, nor a source's whose deletion is under way", async () => {
  const gone = await lp.createSource({ logs_retention: 3652 });
  const deleting = await lp.createSource({ logs_retention: 3652 });
  await sparse(gone, 2, 5);
  await sparse(deleting, 2, 5);
  const goneBefore = await blocks(gone);
  const deletingBefore = await blocks(deleting);
  expect(goneBefore.length).toBeGreaterThanOrEqual(4);
  // Deleted as the API does (the row gone, a tombstone), before its sweep removed the blocks.
  await db.sql.begin(async (tx) => {
    await tx`delete from sources where id = ${Number(gone.id)}`;
    await tx`insert into source_deletions (source_id) values (${Number(gone.id)})`;
  });
  // The other one's DELETE holds its row while the merge looks at it.
  const holder = await db.sql.reserve();
  await holder`begin`;
  await holder`select 1 from sources where id = ${Number(deleting.id)} for update`;
  try {
    await lp.merger.mergeNow();
    expect(await blocks(gone)).toEqual(goneBefore);
    expect(await blocks(deleting)).toEqual(deletingBefore);
    // Asked directly (a plan made before the deletion): both refused, nothing changed.
    const day = { start: `${DAY}T00:00:00Z`, end: "2025-11-21T00:00:00.000Z" };
    const run = (rows: Row[]): Run => ({
      blocks: rows.map((row): BlockInfo => ({ minId: row.min_id, minDt: row.min_dt, maxDt: row.max_dt, n: row.n, filterId: row.filter_id })),
      sliceMinutes: null,
      overlaps: true,
    });
    expect(await mergeRun(db.sql as never, gone.id, day.start, day.end, run(goneBefore), build)).toBe("busy");
    expect(await mergeRun(db.sql as never, deleting.id, day.start, day.end, run(deletingBefore), build)).toBe("busy");
    expect(await blocks(gone)).toEqual(goneBefore);
    expect(await blocks(deleting)).toEqual(deletingBefore);
  } finally {
    await holder`rollback`;
    holder.release();
  }
  // Once the row is free, the merge goes through.
  await lp.merger.mergeNow();
  expect((await blocks(deleting)).length).toBe(1);
  await db.sql`delete from source_deletions where source_id = ${Number(gone.id)}`;
}, 120_000);

test("a run one of whose blocks another transaction holds (a sweep deleting it) is left for a later pass", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  await sparse(source, 3, 5);
  const before = await blocks(source);
  const holder = await db.sql.reserve();
  await holder`begin`;
  await holder`select 1 from log_blocks where source_id = ${Number(source.id)} and min_id = ${before[1]!.min_id}::bigint for update`;
  try {
    const stats = await lp.merger.mergeNow();
    expect(stats.busy).toBeGreaterThanOrEqual(1);
    expect(await blocks(source)).toEqual(before);
  } finally {
    await holder`rollback`;
    holder.release();
  }
  await lp.merger.mergeNow();
  expect((await blocks(source)).length).toBe(1);
}, 120_000);

test("a merge running while a seal publishes the same day loses and doubles nothing", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  await sparse(source, 6, 40);
  let expected = 480;
  for (let round = 0; round < 3; round++) {
    // Events of the same stretch of the day, waiting in the seal threads (staged at the seal).
    for (const r of [0, 1]) {
      const events = Array.from({ length: 40 }, (_, i) => ({
        dt: new Date(BASE + (100 + round * 80 + 2 * i + r) * 1000).toISOString(),
        n: 10_000 + round * 100 + i,
        r,
      }));
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
      await lp.flusher.flush();
    }
    expected += 80;
    await Promise.all([lp.sealer.sealNow(), lp.merger.mergeNow()]);
    const [counts] = await db.sql<{ events: number; ids: number }[]>`
      select count(*)::int as events, count(distinct id)::int as ids from log_events where source_id = ${Number(source.id)}`;
    expect(counts).toEqual({ events: expected, ids: expected });
  }
  await lp.merger.mergeNow();
  const after = await blocks(source);
  expect(overlaps(after)).toBe(0);
  expect(after.reduce((sum, row) => sum + row.n, 0)).toBe(expected);
}, 180_000);

test("v3 blocks (ids, dts, a text body) that overlap are merged too, into v4 blocks, every answer kept", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  await sparse(source, 3, 20);
  // The same blocks as storage v3 wrote them: no payload, no sliced filter (a search opens them).
  await db.sql`
    update log_blocks b set ids = x.ids, dts = x.dts, body = x.body, payload = null, filter_id = null, filter_slot = null
    from (
      select b2.min_id, array_agg(e.id order by e.dt, e.id) as ids, array_agg(e.dt order by e.dt, e.id) as dts, string_agg(e.line, E'\n' order by e.dt, e.id) as body
      from log_blocks b2 cross join lateral logpond_block_events(b2.min_id, b2.min_dt, b2.ids, b2.dts, b2.body, b2.payload) e
      where b2.source_id = ${Number(source.id)} and b2.generation is null group by b2.min_id) x
    where b.source_id = ${Number(source.id)} and b.min_id = x.min_id`;
  await db.sql`delete from log_filters where source_id = ${Number(source.id)}`;
  const v3 = await db.sql<{ n: number }[]>`select 1 from log_blocks where source_id = ${Number(source.id)} and payload is null and body is not null`;
  expect(v3.length).toBeGreaterThanOrEqual(6);
  const [anchor] = await db.sql<{ id: string }[]>`select id::text from log_events where source_id = ${Number(source.id)} and raw->>'n' = '60'`;
  const seen = await observe(source, anchor!.id);
  expect(seen.events.length).toBe(120);
  await lp.merger.mergeNow();
  expect(await observe(source, anchor!.id)).toEqual(seen);
  const after = await db.sql<{ v4: boolean; filtered: boolean }[]>`
    select payload is not null and body is null and ids is null as v4, filter_id is not null as filtered from log_blocks where source_id = ${Number(source.id)}`;
  expect([...after]).toEqual([{ v4: true, filtered: true }]);
}, 120_000);

test("a day whose blocks all overlap, past what one transaction may rewrite, is split into slices then merged: every answer kept, no overlap left", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  // Each request's events anywhere in the day (as a load that sends a day's times at once).
  for (let g = 0; g < 6; g++) {
    for (const r of [0, 1]) {
      const events = Array.from({ length: 200 }, (_, i) => {
        const n = g * 400 + r * 200 + i;
        return {
          dt: new Date(Date.parse(`${DAY}T00:00:00Z`) + ((n * 7_919_333) % 86_399_000)).toISOString(),
          n,
          message: `spread ${n}${n % 11 === 0 ? " zebraquartz" : ""}`,
        };
      });
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
      await lp.flusher.flush();
      await lp.sealer.sealNow();
    }
  }
  const before = await blocks(source);
  expect(before.length).toBe(12);
  expect(overlaps(before)).toBeGreaterThanOrEqual(11);
  const [anchor] = await db.sql<{ id: string }[]>`select id::text from log_events where source_id = ${Number(source.id)} and raw->>'n' = '1234'`;
  const seen = await observe(source, anchor!.id);
  expect(seen.events.length).toBe(2_400);
  // One transaction may rewrite 1,000 events: the 2,400 are split, then merged, over a few passes.
  const passes: { runs: number; tooBig: number }[] = [];
  for (let pass = 0; pass < 20; pass++) {
    const stats = await mergePass(db.sql as never, { mergeMaxEvents: 1_000, mergeMinBlocks: 16 }, build, { full: true });
    passes.push({ runs: stats.runs, tooBig: stats.tooBig });
    if (stats.runs === 0) break;
  }
  expect(passes.length).toBeGreaterThanOrEqual(3); // a split, a merge, nothing left
  expect(passes.at(-1)).toEqual({ runs: 0, tooBig: 0 });
  const after = await blocks(source);
  expect(overlaps(after)).toBe(0);
  expect(after.reduce((sum, row) => sum + row.n, 0)).toBe(2_400);
  expect(Math.max(...after.map((row) => row.n))).toBeLessThanOrEqual(1_000);
  expect(await observe(source, anchor!.id)).toEqual(seen);
}, 180_000);

test("a run that would come out as many blocks as it is, none overlapping (blocks cut by size), is left and not tried again", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  // One request per seal: one small block each, in time order, none overlapping.
  for (let g = 0; g < 4; g++) {
    const events = Array.from({ length: 5 }, (_, i) => ({ dt: new Date(BASE + (g * 5 + i) * 1000).toISOString(), n: g * 5 + i }));
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
    await lp.flusher.flush();
    await lp.sealer.sealNow();
  }
  const before = await blocks(source);
  expect(before.map((row) => row.n)).toEqual([5, 5, 5, 5]);
  expect(overlaps(before)).toBe(0);
  // A builder that cuts every 5 events stands for events so big that BLOCK_MAX_BYTES cuts them.
  const small = (rows: ReadRow[]) => Promise.resolve(buildBlocks(decodeRows(rows), 5));
  const futile = new Set<string>();
  const settings = { mergeMaxEvents: 50_000, mergeMinBlocks: 16 };
  const first = await mergePass(db.sql as never, settings, small, { full: true, futile });
  expect([first.futile, first.runs]).toEqual([1, 0]);
  expect(await blocks(source)).toEqual(before);
  const second = await mergePass(db.sql as never, settings, small, { full: true, futile });
  expect([second.futile, second.runs]).toEqual([0, 0]);
  // Without the memory of it (another process), or with blocks that do merge: merged.
  const merged = await mergePass(db.sql as never, settings, build, { full: true, futile: new Set() });
  expect(merged.runs).toBeGreaterThanOrEqual(1);
  expect((await blocks(source)).map((row) => row.n)).toEqual([20]);
}, 120_000);

test("with MERGE_INTERVAL_MS set, the timed passes merge on their own and /metrics counts them", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  await sparse(source, 2, 10);
  expect((await blocks(source)).length).toBeGreaterThanOrEqual(4);
  const timed = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", MERGE_INTERVAL_MS: "100" });
  try {
    await waitFor("the timed merge to leave one block", () => blocks(source), { until: (rows) => rows.length === 1, timeoutMs: 60_000 });
    const scrape = await (await timed.api("GET", "/metrics")).text();
    const counter = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(scrape)?.[1] ?? "NaN");
    expect(counter("logpond_merge_blocks_merged_total")).toBeGreaterThanOrEqual(4);
    expect(counter("logpond_merge_passes_total")).toBeGreaterThanOrEqual(1);
  } finally {
    await timed.stop();
  }
}, 120_000);
