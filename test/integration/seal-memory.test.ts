// The sealer's memory path (store/staging.ts) on a database of the test's own: blocks built from the
// flusher's commits hold exactly the text the hot rows had and read the same; a batch the path did
// not see (another process's) is read back alone; a generation whose staged blocks cannot be
// trusted (a crash's leftovers) is read back whole and nothing staged of it is ever shown; a
// source deleted meanwhile is not published.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { openFlushConnection } from "../../src/store/copy";
import { closeGeneration } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { tiers } from "../helpers/sealing";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("seal_memory");
  await runMigrations(db.url);
  // The timer never fires during a test: the tests seal when they choose.
  lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", SEAL_FROM: "memory" });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

/** JSON texts as clients write them: spacing, escapes jsonb decodes, numbers it rewrites, duplicate and multi-byte keys. */
function texts(count: number, base: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const dt = new Date(base - (i % 3_600) * 1_000).toISOString();
    switch (i % 4) {
      case 0:
        out.push(`{"dt":"${dt}", "level" : "ERROR", "message":"caf\\u00e9 \\/ ${i}", "n": 1.50, "e": 1e3, "z": -0}`);
        break;
      case 1:
        out.push(`{ "dt": "${dt}", "b": 1, "a": [1 , 2, {"y": true, "x": null}], "a": "last wins", "ключ": "значение ${i}", "level": 404 }`);
        break;
      case 2:
        out.push(`{"dt":"${dt}","message":"tab\\there \\"quoted\\" \\ud83d\\ude00 ${i}","big":123456789012345678901234567890,"small":1.0E-7}`);
        break;
      default:
        out.push(`{"dt":"${dt}","level":{"name":"Warn"},"message":"plain ${i}"}`);
    }
  }
  return out;
}

async function ingest(source: TestSource, lines: string[]): Promise<void> {
  const response = await lp.ingest(source.token, lines.join("\n"), { "content-type": "application/x-ndjson" });
  expect(response.status).toBe(202);
}

/** Three events committed as another process would (ids, rows, a flush_batches row committed `ago`): the memory path never saw them. Their first id. */
async function otherProcessBatch(source: TestSource, ago: string): Promise<number> {
  return db.sql.begin(async (tx) => {
    const [counter] = await tx<{ first: string }[]>`
      update logpond_counters set value = value + 3 where name = 'event_id' returning (value - 3)::text as first`;
    const first = Number(counter!.first);
    await tx`insert into log_hot (id, source_id, dt, raw) select ${first}::bigint + i, ${Number(source.id)}, now(), jsonb_build_object('other', i) from generate_series(0, 2) i`;
    await tx`
      with next as (update logpond_counters set value = value + 1 where name = 'commit_seq' returning value)
      insert into flush_batches (id, seq, first_id, last_id, committed_at)
      select gen_random_uuid(), next.value, ${first}, ${first + 2}, now() - ${ago}::interval from next`;
    return first;
  });
}

const staged = async () => Number((await db.sql<{ n: string }[]>`select count(*)::text as n from log_blocks where generation is not null`)[0]!.n);

async function hotTexts(source: TestSource) {
  await lp.flusher.flush();
  return db.sql<
    { id: string; line: string }[]
  >`select id::text, raw::text as line from logpond_hot_between(array[${Number(source.id)}::bigint], '-infinity', 'infinity') order by id`;
}

async function blockTexts(source: TestSource) {
  return db.sql<{ id: string; line: string }[]>`
    select e.id::text, e.line from log_blocks b cross join lateral logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e
    where b.source_id = ${Number(source.id)} and b.generation is null order by e.id`;
}

test("blocks built from the flusher's commits hold exactly the text the hot rows had, and read the same", async () => {
  const source = await lp.createSource();
  const now = Date.now();
  await ingest(source, texts(2_500, now));
  const before = await hotTexts(source);
  expect(before.length).toBe(2_500);
  const histogram = async () =>
    (
      await lp.api(
        "GET",
        `/api/v2/query/histogram?source_ids=${source.id}&from=${new Date(now - 7_200_000).toISOString()}&to=${new Date(now).toISOString()}&buckets=12`,
      )
    ).json();
  const search = async (query: string) =>
    (
      (await (await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&batch=5000&from=now-7d&query=${encodeURIComponent(query)}`)).json()) as {
        data: { id: string }[];
      }
    ).data
      .map((row) => row.id)
      .sort();
  const queries = ["café", "level:error", "значение", "n=1.50", "e=1000", "quoted", "b:*", "big=123456789012345678901234567890"];
  const histogramBefore = await histogram();
  const searchesBefore = await Promise.all(queries.map(search));
  expect(Object.fromEntries(queries.map((query, i) => [query, searchesBefore[i]!.length > 0]))).toEqual(
    Object.fromEntries(queries.map((query) => [query, true])),
  );

  const stats = await lp.sealer.sealNow();
  expect(stats.fromMemory).toBeGreaterThanOrEqual(2_500);
  expect(await blockTexts(source)).toEqual(before);
  expect((await tiers(db.sql as never, Number(source.id))).hot).toBe(0);
  expect(await histogram()).toEqual(histogramBefore);
  const searchesAfter = await Promise.all(queries.map(search));
  expect(Object.fromEntries(queries.map((q, i) => [q, searchesAfter[i]!.length]))).toEqual(
    Object.fromEntries(queries.map((q, i) => [q, searchesBefore[i]!.length])),
  );
  expect(searchesAfter).toEqual(searchesBefore);
  expect(await staged()).toBe(0);
}, 60_000);

test("a batch the memory path did not see (another process's) is read back alone, the rest published: every event once, nothing staged left", async () => {
  const source = await lp.createSource();
  await ingest(source, texts(300, Date.now()));
  await lp.flusher.flush();
  // Another process's batch in the same generation: its ids, its rows, its flush_batches row.
  await otherProcessBatch(source, "0 hours");
  const stats = await lp.sealer.sealNow();
  expect(stats.sealed).toBeGreaterThanOrEqual(303);
  expect(stats.fromMemory).toBe(300);
  const after = await tiers(db.sql as never, Number(source.id));
  expect([after.hot, after.sealed, after.distinctIds, after.badBlocks]).toEqual([0, 303, 303, 0]);
  expect(await staged()).toBe(0);
}, 60_000);

test("staged blocks a crash left in a generation are deleted when it is read back, never shown", async () => {
  const source = await lp.createSource();
  const other = await lp.createSource();
  await ingest(other, texts(10, Date.now()));
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  // A generation opened by another instance (not this process's memory path), with a crash's leftovers in it.
  expect(await closeGeneration(db.sql as never, true)).toBe("closed");
  await ingest(source, texts(50, Date.now()));
  await lp.flusher.flush();
  const [open] = await db.sql<{ start: string }[]>`
    select max(substring(c.relname from 10)::bigint)::text as start from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'log_hot'::regclass and c.relname ~ '^log_hot_g[0-9]+$'`;
  await db.sql`
    insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, payload, hist_minutes, hist_levels, hist_counts, generation)
    select ${Number(source.id)}, min_dt, max_dt, min_id, max_id, n, payload, hist_minutes, hist_levels, hist_counts, ${open!.start}::bigint
    from log_blocks where source_id = ${Number(other.id)} and generation is null`;
  expect(await staged()).toBeGreaterThan(0);
  const count = async () => Number((await db.sql<{ n: string }[]>`select count(*)::text as n from log_events where source_id = ${Number(source.id)}`)[0]!.n);
  expect(await count()).toBe(50);
  await lp.sealer.sealNow();
  expect(await staged()).toBe(0);
  expect(await count()).toBe(50);
  const after = await tiers(db.sql as never, Number(source.id));
  expect([after.hot, after.sealed, after.distinctIds]).toEqual([0, 50, 50]);
}, 60_000);

test("a source deleted while its events wait in staged blocks is not published", async () => {
  const gone = await lp.createSource();
  await ingest(gone, texts(1_200, Date.now())); // more than a block: one is staged before the seal
  await lp.flusher.flush();
  await db.sql`insert into source_deletions (source_id) values (${Number(gone.id)})`;
  const stats = await lp.sealer.sealNow();
  expect(stats.moved - stats.sealed).toBeGreaterThanOrEqual(1_200);
  expect((await db.sql`select 1 from log_blocks where source_id = ${Number(gone.id)}`).length).toBe(0);
  expect((await db.sql`select 1 from log_filters where source_id = ${Number(gone.id)}`).length).toBe(0);
  await db.sql`delete from source_deletions where source_id = ${Number(gone.id)}`;
}, 60_000);

test("a generation sealed from memory whose TRUNCATE and drop a reader held off is sealed again by the next pass without counting its events twice", async () => {
  const source = await lp.createSource();
  await ingest(source, texts(400, Date.now()));
  await lp.flusher.flush();
  const before = lp.sealer.totals.sealed;
  expect(await closeGeneration(db.sql as never)).toBe("closed"); // the reader below would hold the pass's own close off
  // A long read: its transaction holds ACCESS SHARE on every hot partition until it ends.
  const reader = await db.sql.reserve();
  await reader`begin`;
  await reader`select count(*) from log_events`;
  const first = lp.sealer.sealNow(); // past its patience (10 s) the rows are DELETEd; the table stays
  const stats = await first;
  await reader`commit`;
  reader.release();
  expect(stats.fromMemory).toBe(400);
  const again = await lp.sealer.sealNow(); // the emptied table again: nothing left to publish
  expect(again.sealed).toBe(0);
  expect(lp.sealer.totals.sealed - before).toBe(400);
  const after = await tiers(db.sql as never, Number(source.id));
  expect([after.hot, after.sealed, after.distinctIds]).toEqual([0, 400, 400]);
}, 60_000);

test("a day-old batch of a generation not sealed yet is not forgotten (the seal reads back what its staged blocks miss); one of a sealed generation is", async () => {
  const source = await lp.createSource();
  await ingest(source, texts(20, Date.now()));
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  // Another process's batch committed 30 h ago into the open generation (a seal failing that long).
  const first = await otherProcessBatch(source, "30 hours");
  // And a day-old batch below every hot generation (already sealed): that one may go.
  await db.sql`insert into flush_batches (id, seq, first_id, last_id, committed_at) values (gen_random_uuid(), null, 1, 2, now() - interval '30 hours')`;
  const connection = openFlushConnection(db.url, 10_000);
  try {
    await connection.forgetBatches(24);
  } finally {
    await connection.close();
  }
  const kept = await db.sql<{ first_id: string }[]>`select first_id::text from flush_batches where committed_at < now() - interval '24 hours'`;
  expect(kept.map((row) => Number(row.first_id))).toEqual([first]);
  await ingest(source, texts(10, Date.now()));
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  await lp.sealer.sealNow();
  const after = await tiers(db.sql as never, Number(source.id));
  expect([after.hot, after.sealed, after.distinctIds, after.badBlocks]).toEqual([0, 33, 33, 0]);
}, 60_000);
