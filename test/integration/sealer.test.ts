// The sealer (store/sealer.ts) on a database of the test's own: every event reads the same from
// the hot tier and from blocks (the view, the query API, a cursor walk, the tail's catch-up, the
// histogram); hot partitions are dropped once sealed; a batch that writes into a generation already
// gone is sealed from the default partition; expired rows and deleted sources are not sealed.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { filterBits, gramHashes, sliced as slicedFilters } from "../../src/codec/grams";
import { openFlushConnection } from "../../src/store/copy";
import { runMigrations } from "../../src/store/db";
import { defaultSealWorkers } from "../../src/store/seal-pool";
import { BLOCK_EVENTS, closeGeneration, sealClosed, sealHeldBytes, startSealer } from "../../src/store/sealer";
import { latestSeq } from "../../src/store/batch-log";
import { readCatchUp } from "../../src/tail/storage";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { tiers } from "../helpers/sealing";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("sealer");
  await runMigrations(db.url);
  // The timer never fires during a test: the tests seal when they choose.
  lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000" });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

/** A small seeded generator (Math.imul: a plain product loses bits past 2^53). */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return state / 2 ** 32;
  };
}

/** Events of several shapes, with the characters JSON escapes, numbers jsonb keeps as written, nesting. */
function events(count: number, seed: number, base: number): Record<string, unknown>[] {
  const next = random(seed);
  const out: Record<string, unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const dt = new Date(base - Math.floor(next() * 3_600_000)).toISOString();
    const id = Math.floor(next() * 2 ** 32)
      .toString(16)
      .padStart(8, "0");
    switch (i % 5) {
      case 0:
        out.push({ dt, level: ["info", "warn", "error"][i % 3], message: `request ${id} done`, status: 200 + (i % 4) * 100, ms: 1.5 + i });
        break;
      case 1:
        out.push({ dt, message: `line\nwith "quotes", a tab\t, a backslash \\ and ünïcödé ✓ ${id}`, tags: ["a", id] });
        break;
      case 2:
        out.push({ dt, http: { method: "GET", path: `/users/${id}`, headers: { "x-id": id } }, big: 12345678901234567890, small: 1.5 });
        break;
      case 3:
        out.push({ dt, level: "debug", nothing: null, flag: i % 2 === 0, empty: {}, list: [] });
        break;
      default:
        out.push({ dt, message: id });
    }
  }
  return out;
}

async function ingest(source: TestSource, batch: Record<string, unknown>[]) {
  const response = await lp.ingest(source.token, JSON.stringify(batch));
  expect(response.status).toBe(202);
}

/** Every stored event of these sources through the view, as text. */
async function snapshot(sourceIds: string[]) {
  await lp.flusher.flush();
  return db.sql<{ id: string; source_id: string; dt: string; raw: string }[]>`
    select id::text, source_id::text, dt::text, raw::text from log_events where source_id = any(${sourceIds.map(Number)}::bigint[]) order by id`;
}

async function walk(sourceId: string, query: string): Promise<string[]> {
  const ids: string[] = [];
  const from = new Date(Date.now() - 2 * 3_600_000).toISOString();
  let url = `/api/v2/query/live-tail?source_ids=${sourceId}&batch=97&from=${from}&query=${encodeURIComponent(query)}`;
  for (;;) {
    const response = await lp.api("GET", url);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { id: string }[]; pagination: { next: string | null } };
    ids.push(...body.data.map((row) => row.id));
    if (!body.pagination.next) return ids;
    url = new URL(body.pagination.next).pathname + new URL(body.pagination.next).search;
  }
}

/** Events in the hot tier: log_hot's rows and the chunk journal's events. */
const hotRows = async () =>
  Number((await db.sql<{ n: string }[]>`select (select count(*) from log_hot) + (select coalesce(sum(n), 0) from log_chunks) as n`)[0]!.n);
const hotLeaves = async () =>
  (
    await db.sql<{ name: string }[]>`select c.relname as name from pg_partition_tree('log_hot') t join pg_class c on c.oid = t.relid where t.isleaf order by 1`
  ).map((r) => r.name);

test("sealed events read the same as hot ones: the view, the query API, the tail's catch-up, the histogram", async () => {
  const a = await lp.createSource();
  const b = await lp.createSource();
  const now = Date.now();
  for (let i = 0; i < 5; i++) await ingest(a, events(700, 10 + i, now));
  await ingest(b, events(150, 99, now));

  const before = await snapshot([a.id, b.id]);
  expect(before.length).toBe(3_650);
  const queries = ["", "level=error", "status>=300", "quotes", "NOT level:info", "http.method=GET"];
  const pagesBefore = await Promise.all(queries.map((q) => walk(a.id, q)));
  const seq = await latestSeq(db.sql as never);
  const tailBefore = await readCatchUp(db.sql as never, { seq: 0, id: "" }, seq, [Number(a.id), Number(b.id)], undefined, 100_000);
  // Whole-minute buckets (blocks inside the window are counted from their summaries), a window whose
  // edges cut through blocks, 10-second buckets (every block line by line), and with a query.
  const window = (from: number, to: number, buckets: number, query = "") =>
    `/api/v2/query/histogram?source_ids=${a.id}&from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}&buckets=${buckets}&query=${query}`;
  const histogramUrls = [
    window(now - 2 * 3_600_000, now, 24),
    window(now - 2_233_000, now - 300_000, 50),
    window(now - 600_000, now, 60),
    window(now - 2 * 3_600_000, now, 24, "level%3Derror"),
  ];
  const histograms = async () => Promise.all(histogramUrls.map(async (url) => (await lp.api("GET", url)).json()));
  const histogramBefore = await histograms();
  expect((histogramBefore[0] as { meta: { total: number } }).meta.total).toBe(3_500);

  const stats = await lp.sealer.sealNow();
  expect(stats.sealed).toBeGreaterThanOrEqual(3_650);
  expect(await hotRows()).toBe(0);
  const blocks = await db.sql<{ source_id: string; n: number; min_dt: Date; max_dt: Date }[]>`
    select source_id::text, n, min_dt, max_dt from log_blocks where source_id = any(${[Number(a.id), Number(b.id)]}::bigint[]) order by source_id, min_dt`;
  expect(blocks.filter((x) => x.source_id === a.id).length).toBeGreaterThanOrEqual(Math.ceil(3_500 / BLOCK_EVENTS));
  for (const block of blocks) expect(block.n).toBeLessThanOrEqual(BLOCK_EVENTS);

  expect(await snapshot([a.id, b.id])).toEqual(before);
  expect(await Promise.all(queries.map((q) => walk(a.id, q)))).toEqual(pagesBefore);
  expect(await readCatchUp(db.sql as never, { seq: 0, id: "" }, seq, [Number(a.id), Number(b.id)], undefined, 100_000)).toEqual(tailBefore);
  expect(await histograms()).toEqual(histogramBefore);
  // The closed generation is gone: the open one and the default partition are left.
  const leaves = await hotLeaves();
  expect(leaves.length).toBe(2);
  expect(leaves).toContain("log_hot_default");
}, 60_000);

test("a cursor walk is exactly-once while generations close and seal between its pages", async () => {
  const source = await lp.createSource();
  const now = Date.now();
  for (let i = 0; i < 4; i++) await ingest(source, events(500, 200 + i, now));
  await lp.flusher.flush();
  const expected = (await snapshot([source.id])).length;
  const seen: string[] = [];
  const from = new Date(now - 2 * 3_600_000).toISOString();
  let url = `/api/v2/query/live-tail?source_ids=${source.id}&batch=150&from=${from}`;
  let pages = 0;
  for (;;) {
    const response = await lp.api("GET", url);
    const body = (await response.json()) as { data: { id: string; dt: string }[]; pagination: { next: string | null } };
    seen.push(...body.data.map((row) => row.id));
    if (!body.pagination.next) break;
    // Between pages: half the time more events arrive, every time a seal moves rows under the cursor.
    if (pages++ % 2 === 0) await ingest(source, events(50, 300 + pages, now - 3 * 3_600_000));
    await lp.flusher.flush();
    await lp.sealer.sealNow();
    url = new URL(body.pagination.next).pathname + new URL(body.pagination.next).search;
  }
  expect(new Set(seen).size).toBe(seen.length);
  expect(seen.length).toBe(expected); // the later events are older than the window
  expect(pages).toBeGreaterThan(5);
}, 60_000);

test("a batch written after its generation was sealed and dropped lands in the default partition and is sealed from there", async () => {
  const source = await lp.createSource();
  // Ids reserved before a close, written after it (as a batch that took its ids, then stalled).
  const [counter] = await db.sql<{ first: string }[]>`
    update logpond_counters set value = value + 3 where name = 'event_id' returning (value - 3)::text as first`;
  expect(await closeGeneration(db.sql as never, true)).toBe("closed");
  await sealClosed(db.sql as never);
  const reserved = Number(counter!.first);
  await db.sql`insert into log_hot (id, source_id, dt, raw) select ${reserved}::bigint + i, ${Number(source.id)}, now(), jsonb_build_object('late', i) from generate_series(0, 2) i`;
  const [inDefault] = await db.sql<{ n: string }[]>`select count(*)::text as n from log_hot_default`;
  expect(inDefault!.n).toBe("3");
  const stats = await sealClosed(db.sql as never);
  expect(stats.sealed).toBe(3);
  expect((await db.sql`select 1 from log_hot_default`).length).toBe(0);
  const stored = await snapshot([source.id]);
  expect(stored.map((r) => Number(r.id))).toEqual([reserved, reserved + 1, reserved + 2]);
  expect(stored.map((r) => JSON.parse(r.raw).late)).toEqual([0, 1, 2]);
}, 60_000);

test("a generation without its chunk journal twin (opened by a logpond from before drizzle/0015) is sealed from its rows and dropped", async () => {
  const source = await lp.createSource();
  expect(await closeGeneration(db.sql as never, true)).toBe("closed");
  const [open] = await db.sql<{ start: string }[]>`
    select max(substring(c.relname from '^log_hot_g([0-9]+)$')::bigint)::text as start
    from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'log_hot'::regclass`;
  const start = open!.start;
  await db.sql.unsafe(`drop table log_chunks_g${start}`);
  const [counter] = await db.sql<{ first: string }[]>`
    update logpond_counters set value = value + 3 where name = 'event_id' returning (value - 3)::text as first`;
  const reserved = Number(counter!.first);
  expect(reserved).toBeGreaterThanOrEqual(Number(start));
  await db.sql`insert into log_hot (id, source_id, dt, raw) select ${reserved}::bigint + i, ${Number(source.id)}, now(), jsonb_build_object('twinless', i) from generate_series(0, 2) i`;
  expect(await closeGeneration(db.sql as never)).toBe("closed");
  const stats = await sealClosed(db.sql as never);
  expect(stats.sealed).toBeGreaterThanOrEqual(3);
  expect((await db.sql`select 1 from pg_class where relname = ${`log_hot_g${start}`}`).length).toBe(0);
  const stored = await snapshot([source.id]);
  expect(stored.map((r) => JSON.parse(r.raw).twinless)).toEqual([0, 1, 2]);
}, 60_000);

/** A source with 5 events committed to the hot tier. */
async function sourceWithHotRows(seed: number): Promise<TestSource> {
  const source = await lp.createSource();
  await ingest(source, events(5, seed, Date.now()));
  await lp.flusher.flush();
  return source;
}

/** A sealer of the test's own on its database, its timer never firing: sealNow() drives it. */
function testSealer(hooks: Pick<Parameters<typeof startSealer>[1], "settled" | "hold">) {
  return startSealer({ sealIntervalMs: 600_000 }, { sql: db.sql as never, log: () => {}, ...hooks });
}

test("after a close the sealer waits for the batches being written: one whose ids were taken before the close writes into the closed generation unhindered, and is sealed in that pass; the seal's memory is held from requests meanwhile", async () => {
  const source = await sourceWithHotRows(500); // the pass closes the open generation
  // A batch that took its ids in the open generation; it writes only once the sealer has closed it.
  const [counter] = await db.sql<{ first: string }[]>`
    update logpond_counters set value = value + 3 where name = 'event_id' returning (value - 3)::text as first`;
  const reserved = Number(counter!.first);
  const order: string[] = [];
  const held: number[] = [];
  const sealer = testSealer({
    hold: (bytes) => {
      held.push(bytes);
      return () => held.push(-bytes);
    },
    settled: async () => {
      const generations = await db.sql<{ name: string }[]>`
        select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'log_hot'::regclass`;
      const open = Math.max(...generations.map((g) => Number(/^log_hot_g(\d+)$/.exec(g.name)?.[1] ?? 0)));
      order.push(open > reserved ? "closed" : "still open");
      // The batch's write, which a seal holding its generation's SHARE lock would hold up (refused past 2 s here).
      await db.sql.begin(async (tx) => {
        await tx`set local lock_timeout = '2s'`;
        await tx`insert into log_hot (id, source_id, dt, raw) select ${reserved}::bigint + i, ${Number(source.id)}, now(), jsonb_build_object('late', i) from generate_series(0, 2) i`;
      });
      order.push("written");
    },
  });
  try {
    const stats = await sealer.sealNow();
    expect(order).toEqual(["closed", "written"]); // the close came first: the batch's ids lie in a closed generation
    // The seal's memory kept from requests while each table was sealed, then given back.
    expect(held.length).toBeGreaterThanOrEqual(2);
    // A chunk per seal thread, the one read here and the one before it (store/seal-pool.ts, store/seal-carry.ts).
    const perSeal = sealHeldBytes(defaultSealWorkers());
    expect(held).toEqual(held.map((_, i) => (i % 2 === 0 ? perSeal : -perSeal)));
    expect(stats.sealed).toBeGreaterThanOrEqual(8);
    const after = await tiers(db.sql as never, Number(source.id));
    expect([after.hot, after.sealed, after.distinctIds, after.badBlocks]).toEqual([0, 8, 8, 0]);
  } finally {
    await sealer.stop();
  }
}, 60_000);

test("a generation another instance closed is waited for too, once: the sealer waits for its own batches before it first seals it", async () => {
  const source = await sourceWithHotRows(600);
  let settles = 0;
  const sealer = testSealer({
    settled: async () => {
      settles++;
    },
  });
  try {
    expect(await closeGeneration(db.sql as never)).toBe("closed"); // as another instance would
    const first = await sealer.sealNow(); // its own close finds the new generation empty
    expect(first.sealed).toBeGreaterThanOrEqual(5);
    expect(settles).toBe(1);
    await sealer.sealNow(); // nothing closed since: no wait
    expect(settles).toBe(1);
    expect((await tiers(db.sql as never, Number(source.id))).hot).toBe(0);
  } finally {
    await sealer.stop();
  }
}, 60_000);

test("a reader holding the hot tier delays the seal's TRUNCATE; past its patience the rows are deleted instead: every event once, space back later", async () => {
  const source = await lp.createSource();
  await ingest(source, events(300, 7, Date.now()));
  const before = await snapshot([source.id]);
  expect(await closeGeneration(db.sql as never)).toBe("closed");
  const closed = (await hotLeaves()).filter((name) => /^log_hot_g\d+$/.test(name)).sort((a, b) => Number(a.slice(9)) - Number(b.slice(9)))[0]!;

  // A long read: its transaction holds ACCESS SHARE on every hot partition until it ends.
  const reader = await db.sql.reserve();
  await reader`begin`;
  await reader`select count(*) from log_events`;
  const sealed = sealClosed(db.sql as never);
  // The seal has written its blocks and waits for the table: still hot to everyone else, not yet in blocks.
  await waitFor(
    "the seal to reach its TRUNCATE",
    async () => (await db.sql`select 1 from pg_stat_activity where query like ${"truncate " + closed + "%"} and state = 'active'`).length > 0,
  );
  expect(await snapshot([source.id])).toEqual(before);
  // Held past the patience (10 s): the seal deletes the rows instead and commits.
  const stats = await sealed;
  await reader`commit`;
  reader.release();
  expect(stats.sealed).toBeGreaterThanOrEqual(300);
  expect(await snapshot([source.id])).toEqual(before);
  expect((await hotLeaves()).includes(closed)).toBe(true); // its dead rows wait for VACUUM
  // The next pass finds it empty: VACUUM has cut it, and it is dropped.
  await sealClosed(db.sql as never);
  expect((await hotLeaves()).includes(closed)).toBe(false);
  expect(await snapshot([source.id])).toEqual(before);
}, 60_000);

test("rows past their source's retention and rows of a deleted source are not sealed", async () => {
  const short = await lp.createSource({ logs_retention: 7 });
  const gone = await lp.createSource();
  const now = Date.now();
  await ingest(short, [
    { dt: new Date(now - 3 * 86_400_000).toISOString(), message: "expired" },
    { dt: new Date(now - 60_000).toISOString(), message: "kept" },
  ]);
  await ingest(gone, [{ message: "of a deleted source" }]);
  await lp.flusher.flush();
  // Its retention lowered once stored (ingestion redates a time its retention would delete at once).
  expect((await lp.api("PATCH", `/api/v1/sources/${short.id}`, { logs_retention: 1 })).status).toBe(200);
  await db.sql`insert into source_deletions (source_id) values (${Number(gone.id)})`;
  const stats = await lp.sealer.sealNow();
  expect(stats.moved - stats.sealed).toBeGreaterThanOrEqual(2);
  expect((await snapshot([short.id])).map((r) => JSON.parse(r.raw).message)).toEqual(["kept"]);
  expect(await snapshot([gone.id])).toHaveLength(0);
  await db.sql`delete from source_deletions where source_id = ${Number(gone.id)}`;
}, 60_000);

test("log_events_between reads a time range of some sources from both tiers", async () => {
  const source = await lp.createSource();
  const now = Date.now();
  await ingest(source, events(300, 400, now));
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  await ingest(source, events(300, 401, now)); // these stay hot
  await lp.flusher.flush();
  const from = new Date(now - 1_800_000).toISOString();
  const to = new Date(now).toISOString();
  const through = await db.sql<{ id: string }[]>`
    select id::text from log_events_between(${[Number(source.id)]}::bigint[], ${from}::timestamptz, ${to}::timestamptz) order by id`;
  const view = await db.sql<{ id: string }[]>`
    select id::text from log_events where source_id = ${Number(source.id)} and dt >= ${from}::timestamptz and dt <= ${to}::timestamptz order by id`;
  expect(through.length).toBeGreaterThan(100);
  expect(through).toEqual(view);
  expect(await hotRows()).toBe(300);
}, 60_000);

test("microseconds survive sealing: events within one millisecond page one by one and bound windows exactly, hot and sealed", async () => {
  const source = await lp.createSource();
  const base = new Date(Date.now() - 120_000).toISOString().slice(0, 23); // …T12:34:56.789
  const dts = ["200", "400", "600"].map((us) => `${base}${us}Z`);
  await ingest(
    source,
    dts.map((dt, i) => ({ dt, i })),
  );
  await lp.flusher.flush();
  const walk1 = async (order: string) => {
    const seen: number[] = [];
    let url = `/api/v2/query/live-tail?source_ids=${source.id}&batch=1&order=${order}&from=${new Date(Date.now() - 600_000).toISOString()}`;
    for (let page = 0; page < 10; page++) {
      const body = (await (await lp.api("GET", url)).json()) as { data: { i: number }[]; pagination: { next: string | null } };
      seen.push(...body.data.map((row) => row.i));
      if (!body.pagination.next) return seen;
      url = new URL(body.pagination.next).pathname + new URL(body.pagination.next).search;
    }
    return seen;
  };
  const between = async (from: string, to: string) =>
    (
      await db.sql<
        { i: number }[]
      >`select (raw->>'i')::int as i from log_events_between(${[Number(source.id)]}::bigint[], ${from}::text::timestamptz, ${to}::text::timestamptz) order by dt`
    ).map((r) => r.i);
  for (const tier of ["hot", "sealed"]) {
    if (tier === "sealed") await lp.sealer.sealNow();
    expect({ tier, oldest: await walk1("oldest_first"), newest: await walk1("newest_first") }).toEqual({ tier, oldest: [0, 1, 2], newest: [2, 1, 0] });
    expect({ tier, within: await between(`${base}300Z`, `${base}500Z`), after: await between(`${base}500Z`, `${base}999Z`) }).toEqual({
      tier,
      within: [1],
      after: [2],
    });
  }
}, 60_000);

test("events dated far ahead seal and read back in order; the histogram puts them in their minutes", async () => {
  const source = await lp.createSource();
  const events = [
    { dt: "3000-01-01T00:01:00.000000Z", i: 0 },
    { dt: "3000-01-01T00:00:59.999999Z", i: 1 },
    { dt: "9999-12-31T23:59:59.999999Z", i: 2 },
  ];
  // Written as they are dated, as a tool would (ingestion redates times this far ahead: codec/reception.ts).
  const tool = openFlushConnection(db.url, 5_000);
  await tool.write(
    crypto.randomUUID(),
    events.map((e) => `${source.id}\t${e.dt}\t${JSON.stringify(e)}\n`),
  );
  await tool.close();
  const stats = await lp.sealer.sealNow();
  expect(stats.sealed).toBeGreaterThanOrEqual(3);
  expect(await hotRows()).toBe(0);
  const [block] = await db.sql`select min_dt < max_dt as ordered from log_blocks where source_id = ${Number(source.id)} and max_dt < '3000-01-02'`;
  expect(block!.ordered).toBe(true);
  const inMinute = await db.sql`
    select raw->>'i' as i from log_events_between(${[Number(source.id)]}::bigint[], '3000-01-01T00:00:00Z', '3000-01-01T00:00:59.999999Z')`;
  expect(inMinute.map((r) => r.i)).toEqual(["1"]);
  const histogram = (await (
    await lp.api("GET", `/api/v2/query/histogram?source_ids=${source.id}&from=3000-01-01T00:00:00Z&to=3000-01-01T00:02:00Z&buckets=3`)
  ).json()) as {
    data: { count: number }[];
  };
  expect(histogram.data.map((b) => b.count)).toEqual([1, 1, 0]);
}, 60_000);

test("a query the index must not narrow finds sealed events: n=-0 matches 0, KELVIN SIGN folds to k in the filter", async () => {
  const source = await lp.createSource();
  await ingest(source, [{ n: 0 }, { n: -0.0 }, { msg: "\u212Aelvin scale" }]);
  await lp.flusher.flush();
  const count = async (query: string) => {
    const body = (await (
      await lp.api(
        "GET",
        `/api/v2/query/live-tail?source_ids=${source.id}&from=${new Date(Date.now() - 600_000).toISOString()}&query=${encodeURIComponent(query)}`,
      )
    ).json()) as { data: unknown[] };
    return body.data.length;
  };
  const before = [await count("n=-0"), await count("n=0"), await count("\u212Aelvin")];
  await lp.sealer.sealNow();
  expect([await count("n=-0"), await count("n=0"), await count("\u212Aelvin")]).toEqual(before);
  expect(before).toEqual([2, 2, 1]);
}, 60_000);

test("blocks sealed before the bit-sliced filters (a Bloom filter of their own grams) are searched as before", async () => {
  const source = await lp.createSource();
  const sent = events(300, 11, Date.now());
  await ingest(source, sent);
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  const count = async (query: string) => {
    const from = new Date(Date.now() - 7_200_000).toISOString();
    const body = (await (
      await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&from=${from}&batch=1000&query=${encodeURIComponent(query)}`)
    ).json()) as { data: unknown[] };
    return body.data.length;
  };
  const id = String((sent[5] as { message: string }).message.split(" ")[1]);
  const queries = [id, `message:${id}`, "status=300", "ms=6.5", "absent-word-xyz"];
  const sliced = await Promise.all(queries.map(count));
  // The same blocks in drizzle/0006's format: a per-block filter of grams only, no filter row.
  // A row is (partition, ctid): ctids repeat across partitions (blocks of two UTC days near midnight).
  const blocks = await db.sql<{ part: string; ctid: string; body: string }[]>`select tableoid::int::text as part, ctid::text as ctid,
      (select string_agg(e.line, E'\n') from logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e) as body
    from log_blocks b where source_id = ${Number(source.id)}`;
  expect(blocks.length).toBeGreaterThan(0);
  for (const block of blocks) {
    const hashes: number[] = [];
    for (const line of block.body.split("\n")) gramHashes(line, (h) => hashes.push(h));
    const bits = filterBits(Uint32Array.from(hashes));
    await db.sql`update log_blocks set bloom = ${Buffer.from(slicedFilters([Uint32Array.from(hashes)], bits))}, filter_id = null, filter_slot = null
      where source_id = ${Number(source.id)} and tableoid = ${block.part}::int::oid and ctid = ${block.ctid}::tid`;
  }
  await db.sql`delete from log_filters where source_id = ${Number(source.id)}`;
  expect(await Promise.all(queries.map(count))).toEqual(sliced);
  expect(sliced).toEqual([1, 1, sent.filter((e) => e.status === 300).length, 1, 0]);
}, 60_000);
