// Retention and partitions as an operator meets them (found by trying the service by hand):
// a CHECK constraint (README, Durability: "e.g. a CHECK constraint you
// added" sends refused events to dead_letters) or a generated column added to log_events must not stop new days' partitions nor the
// sweeps; a dropped partition that PostgreSQL never analysed still counts its rows in
// /metrics. A database of the test's own, so every row in it is known.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { DAY_MS, ensurePartitions, listPartitions, partitionFor } from "../../src/store/partitions";
import { sweep, type SweepMemory } from "../../src/retention/sweep";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("retention_trial");
  await runMigrations(db.url);
  lp = await startTestLogpond({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

const never = new AbortController().signal;

test("with a CHECK constraint and a generated column added to log_events, new days still get partitions and sweeps still remove expired events", async () => {
  const now = new Date();
  await db.sql`alter table log_events add constraint operator_check check (coalesce(raw->>'message', '') not like 'BAD%')`;
  // A column for Grafana panels, as an operator might add (COPY names its columns, so ingestion is unaffected).
  await db.sql`alter table log_events add column operator_level text generated always as (raw->>'level') stored`;
  try {
    const source = await lp.createSource({ logs_retention: 1 });
    const old = new Date(now.getTime() - 3 * DAY_MS).toISOString();
    const far = new Date(now.getTime() + 6 * DAY_MS).toISOString();
    expect((await lp.ingest(source.token, JSON.stringify([{ dt: old, n: 1 }, { n: 2 }, { dt: far, n: 3, level: "warn" }]))).status).toBe(202);
    await lp.flusher.flush();

    // Tomorrow's sweep prepares the day after the prepared ones: the day `far` falls into among them.
    const later = new Date(now.getTime() + 3 * DAY_MS);
    const result = await sweep(db.sql, never, () => {}, later);
    expect((await listPartitions(db.sql)).map((p) => p.name)).toContain(partitionFor(new Date(far)).name);
    const kept = (await db.sql`select raw->'n' as n from log_events where source_id = ${Number(source.id)} order by id`).map((row) => Number(row.n));
    expect(kept).toEqual([3]); // 3 days later, n=2 (dated `now`) has expired too
    expect(result.rowsRemoved).toBe(2);
    // The constraint still holds on the new partition.
    const [inherited] = await db.sql`
      select count(*)::int as n from pg_constraint where conname = 'operator_check' and conrelid = ${partitionFor(new Date(far)).name}::regclass`;
    expect(inherited!.n).toBe(1);
    const [row] = await db.sql`select operator_level from log_events where source_id = ${Number(source.id)}`;
    expect(row!.operator_level).toBe("warn");
  } finally {
    await db.sql`alter table log_events drop constraint if exists operator_check`;
    await db.sql`alter table log_events drop column if exists operator_level`;
  }
});

test("a dropped partition PostgreSQL never analysed counts its rows as removed", async () => {
  const now = new Date();
  const source = await lp.createSource({ logs_retention: 2 });
  const day = new Date(now.getTime() - 40 * DAY_MS);
  await ensurePartitions(db.sql, day, day);
  const name = partitionFor(day).name;
  const events = Array.from({ length: 20 }, (_, n) => ({ dt: day.toISOString(), n }));
  expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  await lp.flusher.flush();
  const [stats] = await db.sql`select reltuples::float8 as estimate from pg_class where relname = ${name}`;
  expect(stats!.estimate).toBeLessThan(0); // never analysed: 20 rows is under autovacuum's threshold
  // Every source of this database has outlived that day (the earlier test's source is retention 1).
  const result = await sweep(db.sql, never, () => {}, now);
  expect((await listPartitions(db.sql)).map((p) => p.name)).not.toContain(name);
  expect(result.partitionsDropped).toBeGreaterThanOrEqual(1);
  expect(result.rowsRemoved).toBe(20);
});

test("sweeps days apart with one memory, retention lowered and raised, late events and a deletion: exactly the expired rows go", async () => {
  const start = new Date();
  const HOUR = 3_600_000;
  const retentions = [1, 2, 3, 5, 7, 10, 30];
  const sources = await Promise.all(retentions.map((days) => lp.createSource({ logs_retention: days })));
  const retention = new Map(sources.map((s, i) => [s.id, retentions[i]!]));
  await ensurePartitions(db.sql, new Date(start.getTime() - 20 * DAY_MS), start);
  // Every event ever ingested: its key, source, dt, and whether a sweep has made it expire.
  const events = new Map<string, { source: string; dt: number; gone: boolean }>();
  let seed = 7;
  const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  async function send(source: string, dts: number[]) {
    const token = sources.find((s) => s.id === source)!.token;
    const batch = dts.map((dt) => ({ key: `${source}-${events.size}-${Math.random()}`, dt: new Date(dt).toISOString() }));
    batch.forEach((e) => events.set(e.key, { source, dt: Date.parse(e.dt), gone: false }));
    expect((await lp.ingest(token, JSON.stringify(batch))).status).toBe(202);
  }
  for (const s of sources) await send(s.id, Array.from({ length: 25 * 4 }, (_, i) => start.getTime() + DAY_MS - i * 6 * HOUR - 17_000));
  await lp.flusher.flush();

  const memory: SweepMemory = { tombstones: new Map(), days: new Map() };
  let deleted: string | undefined;
  for (let step = 0; step < 6; step++) {
    const now = new Date(start.getTime() + step * 7 * HOUR);
    if (step === 3) {
      // Deleted behind logpond's back (no kick), so only this test's sweeps act on it.
      deleted = sources[2]!.id;
      await db.sql`delete from sources where id = ${Number(deleted)}`;
      await db.sql`insert into source_deletions (source_id) values (${Number(deleted)})`;
      retention.delete(deleted);
    } else if (step > 0) {
      const s = sources[Math.floor(random() * sources.length)]!;
      if (s.id !== deleted) {
        const days = 1 + Math.floor(random() * 12);
        expect((await lp.api("PATCH", `/api/v1/sources/${s.id}`, { logs_retention: days })).status).toBe(200);
        retention.set(s.id, days);
      }
    }
    // Late events, dated anywhere in the last 15 days (days already cleared included).
    for (const s of sources) {
      if (s.id === deleted) continue;
      await send(s.id, Array.from({ length: 6 }, () => now.getTime() - random() * 15 * DAY_MS));
    }
    await lp.flusher.flush();

    await sweep(db.sql, never, () => {}, now, memory);
    for (const e of events.values()) {
      const days = retention.get(e.source);
      if (days === undefined || e.dt < now.getTime() - days * DAY_MS) e.gone = true;
    }
    const ids = sources.map((s) => Number(s.id));
    const stored = new Set((await db.sql`select raw->>'key' as key from log_events where source_id = any(${ids})`).map((r) => r.key as string));
    const expected = [...events].filter(([, e]) => !e.gone).map(([key]) => key);
    const wrong = {
      step,
      leftBehind: [...stored].filter((key) => events.get(key)!.gone).map((key) => ({ ...events.get(key)!, dt: new Date(events.get(key)!.dt).toISOString() })).slice(0, 5),
      removedEarly: expected.filter((key) => !stored.has(key)).map((key) => ({ ...events.get(key)!, dt: new Date(events.get(key)!.dt).toISOString() })).slice(0, 5),
    };
    expect(wrong).toEqual({ step, leftBehind: [], removedEarly: [] });
  }
  await db.sql`delete from source_deletions where source_id = ${Number(deleted)}`;
}, 60_000);
