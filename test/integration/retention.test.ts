// Retention (docs/storage.md; `logs_retention` in docs/api.md) on a database of the test's own, so every source and row in it is
// known: several retentions, events dated in the past (daily block partitions and the default one)
// and the future, a deleted source with dead letters, rows of no known source. Ingestion redates an
// event its source's retention would delete at once (codec/reception.ts), so expired events are
// made the way they come about: stored under a longer retention, which is then lowered. Sealing drops what
// has expired and one sweep removes the expired blocks, exactly what expired and nothing else;
// whole days every source outlived are dropped. Then sweeps and seals back to back while senders
// ingest; stored = acknowledged.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { runMigrations } from "../../src/store/db";
import { openFlushConnection } from "../../src/store/copy";
import { DAY_MS, ensurePartitions, listPartitions } from "../../src/store/partitions";
import { sweep } from "../../src/retention/sweep";
import { sealAll } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("retention");
  await runMigrations(db.url);
  // Events up to 400 days ahead are kept as dated here (the first test's).
  lp = await startTestLogpond({ DATABASE_URL: db.url, INGEST_MAX_FUTURE_MS: String(401 * DAY_MS) });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

const AGES_DAYS = [-400, 0.5, 2, 5, 40]; // negative: in the future
const never = new AbortController().signal;
const LONGEST = 3652;

/** A source's retention set through the API (as an operator lowers it once events are stored). */
async function setRetention(source: TestSource, days: number): Promise<void> {
  expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, { logs_retention: days })).status).toBe(200);
}

test("a sweep removes exactly the expired events of each source, and nothing else", async () => {
  const now = new Date();
  const retentions = { oneDay: 1, threeDays: 3, thirtyDays: 30, deleted: 30 };
  const sources: Record<string, TestSource> = {};
  for (const name of Object.keys(retentions)) sources[name] = await lp.createSource({ logs_retention: LONGEST });
  for (const [name, source] of Object.entries(sources)) {
    const events = AGES_DAYS.map((age) => ({ dt: new Date(now.getTime() - age * DAY_MS).toISOString(), name, age }));
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  }
  for (const [name, days] of Object.entries(retentions)) await setRetention(sources[name]!, days);
  // Rows of no known source (written as a tool would): retention leaves them unless their whole day goes.
  const orphan = 777_000_001;
  const tool = openFlushConnection(db.url, 5_000);
  await tool.write(
    crypto.randomUUID(),
    AGES_DAYS.map((age) => `${orphan}\t${new Date(now.getTime() - age * DAY_MS).toISOString()}\t{"age": ${age}}\n`),
  );
  await tool.close();
  await lp.flusher.flush();

  // Daily block partitions back to 45 days ago, then sealing: a block holds one source's events of
  // one day, so the default partition holds the future ones only.
  await ensurePartitions(db.sql, new Date(now.getTime() - 45 * DAY_MS), now);
  const sealed = await sealAll(db.sql);
  expect(sealed.moved - sealed.sealed).toBe(7); // 2, 5, 40 days (1-day source), 5, 40 (3 days), 40 (two 30-day ones)
  const [inDefault] = await db.sql`select sum(n)::int as n from log_blocks_default`;
  expect(inDefault!.n).toBe(5);

  const [deadLetterOfDeleted] = await db.sql`
    insert into dead_letters (source_id, dt, raw, sqlstate, error) values (${Number(sources.deleted!.id)}, 'x', '{}', '22P02', 'test') returning id`;
  await db.sql`insert into dead_letters (source_id, dt, raw, sqlstate, error, failed_at)
    values (${Number(sources.oneDay!.id)}, 'x', '{"old":true}', '22P02', 'test', now() - interval '2 days'),
           (${Number(sources.oneDay!.id)}, 'x', '{"old":false}', '22P02', 'test', now())`;
  expect((await lp.api("DELETE", `/api/v1/sources/${sources.deleted!.id}`)).status).toBe(204);

  const result = await sweep(db.sql, never, () => {}, now);

  const kept = async (sourceId: string | number) =>
    (await db.sql`select raw->'age' as age from log_events where source_id = ${Number(sourceId)} order by id`).map((row) => Number(row.age));
  expect(await kept(sources.oneDay!.id)).toEqual([-400, 0.5]);
  expect(await kept(sources.threeDays!.id)).toEqual([-400, 0.5, 2]);
  expect(await kept(sources.thirtyDays!.id)).toEqual([-400, 0.5, 2, 5]);
  expect(await kept(sources.deleted!.id)).toEqual([]);
  // The orphan's 40-day-old row was in a partition every source had outlived; the rest stays.
  expect(await kept(orphan)).toEqual([-400, 0.5, 2, 5]);

  const partitions = await listPartitions(db.sql);
  expect(partitions.every((p) => p.to.getTime() > now.getTime() - 30 * DAY_MS)).toBe(true);
  expect(partitions.at(-1)!.to.getTime()).toBeGreaterThan(now.getTime() + 3 * DAY_MS);
  // (Counts are not asserted: the DELETE also kicked logpond's own sweep, which may have done part of it.)
  const deadLetters = await db.sql`select id, raw from dead_letters order by id`;
  expect(deadLetters.map((row) => row.raw)).toEqual(['{"old":false}']);
  expect(deadLetters.some((row) => row.id === deadLetterOfDeleted!.id)).toBe(false);
  // The deleted source stays tombstoned for its grace period (late events are swept again).
  expect(await db.sql`select source_id from source_deletions`).toHaveLength(1);
  expect(result.oldestEvent?.toISOString() ?? "").toBe(new Date(now.getTime() - 5 * DAY_MS).toISOString());

  // The search filters follow their blocks: the deleted source's are gone, none is left without a
  // block, and no block is without its filter (a search would skip it).
  const [filters] = await db.sql<{ orphans: number; unfiltered: number; deleted: number; total: number }[]>`select
    (select count(*)::int from log_filters f where not exists (select 1 from log_blocks b where b.filter_id = f.id)) as orphans,
    (select count(*)::int from log_blocks b where b.filter_id is not null and not exists (select 1 from log_filters f where f.id = b.filter_id)) as unfiltered,
    (select count(*)::int from log_filters where source_id = ${Number(sources.deleted!.id)}) as deleted,
    (select count(*)::int from log_filters) as total`;
  expect({ ...filters, total: filters!.total > 0 }).toEqual({ orphans: 0, unfiltered: 0, deleted: 0, total: true });

  // A second sweep finds nothing more to do.
  const again = await sweep(db.sql, never, () => {}, now);
  expect([again.rowsRemoved, again.partitionsDropped, again.deadLettersRemoved]).toEqual([0, 0, 0]);
});

test("a deleted source's blocks go at the next sweep; its late rows are not sealed", async () => {
  const source = await lp.createSource();
  expect((await lp.ingest(source.token, JSON.stringify([{ before: 1 }, { before: 2 }]))).status).toBe(202);
  await lp.flusher.flush();
  await sealAll(db.sql);
  // Deleted behind logpond's back, so only this test's sweeps act on it.
  await db.sql`delete from sources where id = ${Number(source.id)}`;
  await db.sql`insert into source_deletions (source_id) values (${Number(source.id)})`;
  const first = await sweep(db.sql, never, () => {});
  expect(first.rowsRemoved).toBe(2);
  expect(first.bytesRemoved).toBeGreaterThan(30);

  // Late rows (another instance's buffer), one dated long ago, written with the flush path.
  const tool = openFlushConnection(db.url, 5_000);
  const old = new Date(Date.now() - 20 * DAY_MS).toISOString();
  await tool.write(crypto.randomUUID(), [`${source.id}\t${new Date().toISOString()}\t{"late": 1}\n${source.id}\t${old}\t{"late": 2}\n`]);
  await tool.close();
  const sealed = await sealAll(db.sql);
  expect(sealed.moved - sealed.sealed).toBe(2);
  expect(await db.sql`select 1 from log_events where source_id = ${Number(source.id)}`).toHaveLength(0);
  await db.sql`delete from source_deletions where source_id = ${Number(source.id)}`;
});

test("a late event dated in an expired day is dropped when sealed; a sweep keeps the rest", async () => {
  const now = new Date();
  const source = await lp.createSource({ logs_retention: LONGEST });
  const old = new Date(now.getTime() - 10 * DAY_MS).toISOString();
  expect((await lp.ingest(source.token, JSON.stringify([{ dt: old, n: 1 }, { n: 2 }]))).status).toBe(202);
  await lp.flusher.flush();
  await setRetention(source, 1);
  await sealAll(db.sql);
  await sweep(db.sql, never, () => {}, now);
  const kept = async () => (await db.sql`select raw->'n' as n from log_events where source_id = ${Number(source.id)} order by id`).map((row) => Number(row.n));
  expect(await kept()).toEqual([2]);

  await setRetention(source, LONGEST);
  expect((await lp.ingest(source.token, JSON.stringify([{ dt: old, n: 3 }, { n: 4 }]))).status).toBe(202);
  await lp.flusher.flush();
  await setRetention(source, 1);
  await sealAll(db.sql);
  await sweep(db.sql, never, () => {}, now);
  expect(await kept()).toEqual([2, 4]);
});

test("/metrics reports partitions, the oldest event and what retention removed", async () => {
  await lp.retention.idle(); // the gauges are the last finished sweep's (the start's, run alone)
  const text = await (await fetch(`${lp.apiUrl}/metrics`)).text();
  expect(text).toMatch(/^logpond_storage_partitions [1-9]\d*$/m);
  expect(text).toMatch(/^logpond_storage_oldest_event_timestamp_seconds \d+/m);
  expect(text).toMatch(/^logpond_retention_rows_removed_total \d+$/m);
  expect(text).toMatch(/^logpond_retention_bytes_removed_total \d+$/m);
  expect(text).toMatch(/^logpond_retention_partitions_rebuilt_total \d+$/m);
  expect(text).toMatch(/^logpond_retention_bytes_returned_total \d+$/m);
  expect(text).toMatch(/^logpond_retention_sweep_duration_seconds_sum [\d.e-]+$/m);
});

test("a sweep on a client wrapped by drizzle (as the service's is: timestamptz comes back as text) succeeds", async () => {
  const wrapped = postgres(db.url, { max: 1, onnotice: () => {} });
  drizzle(wrapped);
  try {
    const result = await sweep(wrapped, never, () => {});
    expect(result.oldestEvent).toBeInstanceOf(Date);
    expect(Number.isNaN(result.oldestEvent!.getTime())).toBe(false);
  } finally {
    await wrapped.end({ timeout: 5 });
  }
});

test("sweeps and seals running back to back under load: stored = acknowledged, no duplicates", async () => {
  const busy = await lp.createSource({ logs_retention: 30 });
  const expiring = await lp.createSource({ logs_retention: LONGEST });
  // Something for the sweeps to delete in the same partitions the load writes to.
  const old = Array.from({ length: 2_000 }, (_, i) => ({ dt: new Date(Date.now() - 2 * DAY_MS).toISOString(), i }));
  expect((await lp.ingest(expiring.token, JSON.stringify(old))).status).toBe(202);
  await lp.flusher.flush();
  await setRetention(expiring, 1);

  const stopAt = Date.now() + 1_500;
  let sweeps = 0;
  const sweeping = (async () => {
    while (Date.now() < stopAt) {
      await sweep(db.sql, never, () => {});
      await sealAll(db.sql);
      sweeps++;
    }
  })();
  const acknowledged = new Set<string>();
  await Promise.all(
    Array.from({ length: 4 }, async (_, sender) => {
      for (let r = 0; Date.now() < stopAt; r++) {
        const events = Array.from({ length: 50 }, (_, i) => ({ key: `${sender}-${r}-${i}` }));
        const response = await lp.ingest(busy.token, JSON.stringify(events));
        if (response.status === 202) for (const e of events) acknowledged.add(e.key);
      }
    }),
  );
  await sweeping;
  expect(sweeps).toBeGreaterThan(0);
  await lp.flusher.flush();
  await sealAll(db.sql); // the expiring source's last hot rows are dropped as they are sealed
  const stored = (await db.sql`select raw->>'key' as key from log_events where source_id = ${Number(busy.id)}`).map((row) => row.key as string);
  expect(stored.length).toBe(acknowledged.size);
  expect(new Set(stored).size).toBe(stored.length);
  expect(stored.every((key) => acknowledged.has(key))).toBe(true);
  expect(await db.sql`select 1 from log_events where source_id = ${Number(expiring.id)}`).toHaveLength(0);
});
