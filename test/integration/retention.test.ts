// Retention (CONTRACT §5.1) on a database of the test's own, so every source and row in it is
// known: several retentions, events dated in the past (daily partitions and the default one) and
// the future, a deleted source with dead letters, rows of no known source. One sweep must remove
// exactly what expired and nothing else; whole partitions every source outlived are dropped.
// Then the sweep under load: sweeps back to back while senders ingest; stored = acknowledged.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { runMigrations } from "../../src/store/db";
import { openFlushConnection } from "../../src/store/copy";
import { DAY_MS, ensurePartitions, listPartitions } from "../../src/store/partitions";
import { sweep, type SweepMemory } from "../../src/retention/sweep";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("retention");
  await runMigrations(db.url);
  lp = await startTestLogpond({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

const AGES_DAYS = [-400, 0.5, 2, 5, 40]; // negative: in the future
const never = new AbortController().signal;

test("a sweep removes exactly the expired events of each source, and nothing else", async () => {
  const now = new Date();
  const sources: Record<string, TestSource> = {
    oneDay: await lp.createSource({ logs_retention: 1 }),
    threeDays: await lp.createSource({ logs_retention: 3 }),
    thirtyDays: await lp.createSource({ logs_retention: 30 }),
    deleted: await lp.createSource({ logs_retention: 30 }),
  };
  for (const [name, source] of Object.entries(sources)) {
    const events = AGES_DAYS.map((age) => ({ dt: new Date(now.getTime() - age * DAY_MS).toISOString(), name, age }));
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  }
  // Rows of no known source (written as a tool would): retention leaves them unless their whole day goes.
  const orphan = 777_000_001;
  const tool = openFlushConnection(db.url, 5_000);
  await tool.write(crypto.randomUUID(), AGES_DAYS.map((age) => `${orphan}\t${new Date(now.getTime() - age * DAY_MS).toISOString()}\t{"age": ${age}}\n`));
  await tool.close();
  await lp.flusher.flush();

  // Daily partitions back to 45 days ago: the rows of those days move out of the default partition.
  await ensurePartitions(db.sql, new Date(now.getTime() - 45 * DAY_MS), now);
  const [inDefault] = await db.sql`select count(*)::int as n from log_events_default`;
  expect(inDefault!.n).toBe(5); // the future events only

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

  // A second sweep finds nothing more to do.
  const again = await sweep(db.sql, never, () => {}, now);
  expect([again.rowsRemoved, again.partitionsDropped, again.deadLettersRemoved]).toEqual([0, 0, 0]);
});

test("a deleted source is searched everywhere once; then rows committed later are found through their batches", async () => {
  const source = await lp.createSource();
  expect((await lp.ingest(source.token, JSON.stringify([{ before: 1 }, { before: 2 }]))).status).toBe(202);
  await lp.flusher.flush();
  // Deleted behind logpond's back, so only this test's sweeps (and their memory) act on it.
  await db.sql`delete from sources where id = ${Number(source.id)}`;
  await db.sql`insert into source_deletions (source_id) values (${Number(source.id)})`;
  const memory: SweepMemory = { tombstones: new Map(), days: new Map() };
  const first = await sweep(db.sql, never, () => {}, new Date(), memory);
  expect(first.rowsRemoved).toBeGreaterThanOrEqual(2);
  // Row deletes count their rows' estimated stored size (a few dozen bytes each at least).
  expect(first.bytesRemoved).toBeGreaterThanOrEqual(first.rowsRemoved * 30);
  expect(memory.tombstones.has(Number(source.id))).toBe(true);

  // Late rows (another instance's buffer), one dated long ago, written with the flush path (seq).
  const tool = openFlushConnection(db.url, 5_000);
  const old = new Date(Date.now() - 20 * DAY_MS).toISOString();
  await tool.write(crypto.randomUUID(), [`${source.id}\t${new Date().toISOString()}\t{"late": 1}\n${source.id}\t${old}\t{"late": 2}\n`]);
  await tool.close();
  const second = await sweep(db.sql, never, () => {}, new Date(), memory);
  expect(second.rowsRemoved).toBe(2);
  expect(second.bytesRemoved).toBeGreaterThanOrEqual(60);
  expect(await db.sql`select 1 from log_events where source_id = ${Number(source.id)}`).toHaveLength(0);
  await db.sql`delete from source_deletions where source_id = ${Number(source.id)}`;
});

test("a day cleared for a source is searched again only for rows committed since", async () => {
  const now = new Date();
  const source = await lp.createSource({ logs_retention: 1 });
  const old = new Date(now.getTime() - 10 * DAY_MS).toISOString();
  expect((await lp.ingest(source.token, JSON.stringify([{ dt: old, n: 1 }, { n: 2 }]))).status).toBe(202);
  await lp.flusher.flush();
  await ensurePartitions(db.sql, new Date(now.getTime() - 10 * DAY_MS), now);
  const memory: SweepMemory = { tombstones: new Map(), days: new Map() };
  await sweep(db.sql, never, () => {}, now, memory);
  const kept = async () => (await db.sql`select raw->'n' as n from log_events where source_id = ${Number(source.id)} order by id`).map((row) => Number(row.n));
  expect(await kept()).toEqual([2]);

  // A late event dated in that (cleared) day, and a second sweep: it searches fully only the
  // default partition and the days it has no memory of, yet finds the late event.
  expect((await lp.ingest(source.token, JSON.stringify([{ dt: old, n: 3 }, { n: 4 }]))).status).toBe(202);
  await lp.flusher.flush();
  const second = await sweep(db.sql, never, () => {}, now, memory);
  expect(await kept()).toEqual([2, 4]);
  expect(second.fullSearches).toBeLessThan((await listPartitions(db.sql)).length);
});

test("/metrics reports partitions, the oldest event and what retention removed", async () => {
  const text = await (await fetch(`${lp.apiUrl}/metrics`)).text();
  expect(text).toMatch(/^logpond_storage_partitions [1-9]\d*$/m);
  expect(text).toMatch(/^logpond_storage_oldest_event_timestamp_seconds \d+/m);
  expect(text).toMatch(/^logpond_retention_rows_removed_total \d+$/m);
  expect(text).toMatch(/^logpond_retention_bytes_removed_total \d+$/m);
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

test("sweeps running back to back under load: stored = acknowledged, no duplicates", async () => {
  const busy = await lp.createSource({ logs_retention: 30 });
  const expiring = await lp.createSource({ logs_retention: 1 });
  // Something for the sweeps to delete in the same partitions the load writes to.
  const old = Array.from({ length: 2_000 }, (_, i) => ({ dt: new Date(Date.now() - 2 * DAY_MS).toISOString(), i }));
  expect((await lp.ingest(expiring.token, JSON.stringify(old))).status).toBe(202);
  await lp.flusher.flush();

  const stopAt = Date.now() + 1_500;
  let sweeps = 0;
  const sweeping = (async () => {
    while (Date.now() < stopAt) {
      await sweep(db.sql, never, () => {});
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
  const stored = (await db.sql`select raw->>'key' as key from log_events where source_id = ${Number(busy.id)}`).map((row) => row.key as string);
  expect(stored.length).toBe(acknowledged.size);
  expect(new Set(stored).size).toBe(stored.length);
  expect(stored.every((key) => acknowledged.has(key))).toBe(true);
  expect(await db.sql`select 1 from log_events where source_id = ${Number(expiring.id)}`).toHaveLength(0);
});
