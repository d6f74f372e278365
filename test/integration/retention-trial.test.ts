// Retention and partitions as an operator meets them (found by trying the service by hand):
// a CHECK constraint (README, Durability: "e.g. a CHECK constraint you
// added" sends refused events to dead_letters) or a generated column added to log_events must not stop new days' partitions nor the
// sweeps; a dropped partition that PostgreSQL never analysed still counts its rows in
// /metrics. A database of the test's own, so every row in it is known.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { DAY_MS, ensurePartitions, listPartitions, partitionFor } from "../../src/store/partitions";
import { sweep } from "../../src/retention/sweep";
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
