// Retention and partitions as an operator meets them (found by trying the service by hand):
// a CHECK constraint added to log_hot (docs/durability.md: "e.g. a CHECK constraint you added"
// sends refused events to dead_letters) must not stop new generations, sealing nor the sweeps; a
// dropped day counts its events in /metrics; seals and sweeps on simulated days never remove an
// event that has not expired. A database of the test's own, so every row in it is known.
// Ingestion redates an event its source's retention would delete at once (codec/reception.ts):
// expired events are made the way they come about, stored under a longer retention that is then
// lowered, or written as another instance's late batch would be.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { DAY_MS, ensurePartitions, listPartitions, partitionFor } from "../../src/store/partitions";
import { sweep } from "../../src/retention/sweep";
import { openFlushConnection } from "../../src/store/copy";
import { closeGeneration, sealAll } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("retention_trial");
  await runMigrations(db.url);
  // Events up to a week ahead are kept as dated here (the first test's).
  // The row journal: a CHECK constraint on log_hot applies to its rows only (README, HOT_TIER).
  lp = await startTestLogpond({ DATABASE_URL: db.url, INGEST_MAX_FUTURE_MS: String(7 * DAY_MS), HOT_TIER: "rows" });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

const never = new AbortController().signal;

test("with a CHECK constraint added to log_hot, new generations keep it, its refusals go to dead letters, and sealing and sweeps go on", async () => {
  const now = new Date();
  await db.sql`alter table log_hot add constraint operator_check check (coalesce(raw->>'message', '') not like 'BAD%')`;
  try {
    expect(await closeGeneration(db.sql, true)).toBe("closed");
    const source = await lp.createSource({ logs_retention: 5 });
    const old = new Date(now.getTime() - 3 * DAY_MS).toISOString();
    const far = new Date(now.getTime() + 6 * DAY_MS).toISOString();
    const batch = [{ dt: old, n: 1 }, { n: 2 }, { dt: far, n: 3, level: "warn" }, { n: 4, message: "BAD one" }];
    expect((await lp.ingest(source.token, JSON.stringify(batch))).status).toBe(202);
    await lp.flusher.flush();
    expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, { logs_retention: 1 })).status).toBe(200);
    const [letter] = await db.sql`select raw from dead_letters where source_id = ${Number(source.id)}`;
    expect(JSON.parse(letter!.raw).n).toBe(4);
    // Every generation made since carries the constraint.
    const generations = await db.sql<{ name: string; checks: number }[]>`
      select c.relname as name, (select count(*)::int from pg_constraint k where k.conrelid = c.oid and k.conname = 'operator_check') as checks
      from pg_partition_tree('log_hot') t join pg_class c on c.oid = t.relid where t.isleaf and c.relname like 'log_hot_g%'`;
    expect(generations.length).toBeGreaterThan(0);
    for (const generation of generations) expect(generation).toEqual({ name: generation.name, checks: 1 });

    await sealAll(db.sql);
    // Three days later: n=2 (dated now) has expired too; the far future one stays.
    const later = new Date(now.getTime() + 3 * DAY_MS);
    await sweep(db.sql, never, () => {}, later);
    expect((await listPartitions(db.sql)).map((p) => p.name)).toContain(partitionFor(new Date(now.getTime() + 4 * DAY_MS)).name);
    const kept = (await db.sql`select raw->'n' as n from log_events where source_id = ${Number(source.id)} order by id`).map((row) => Number(row.n));
    expect(kept).toEqual([3]);
  } finally {
    await db.sql`alter table log_hot drop constraint if exists operator_check`;
  }
});

test("a dropped day counts its events as removed", async () => {
  const now = new Date();
  const source = await lp.createSource({ logs_retention: 2 });
  const day = new Date(now.getTime() - 40 * DAY_MS);
  await ensurePartitions(db.sql, day, day);
  const name = partitionFor(day).name;
  const events = Array.from({ length: 20 }, (_, n) => ({ dt: day.toISOString(), n }));
  // Written as a tool would (past the source's retention, the sealer would drop them first).
  const tool = openFlushConnection(db.url, 5_000);
  await tool.write(
    crypto.randomUUID(),
    events.map((e) => `${source.id}\t${e.dt}\t${JSON.stringify(e)}\n`),
  );
  await tool.close();
  await db.sql`update sources set logs_retention = 60 where id = ${Number(source.id)}`;
  await sealAll(db.sql);
  await db.sql`update sources set logs_retention = 2 where id = ${Number(source.id)}`;
  expect(Number((await db.sql.unsafe(`select sum(n)::int as n from ${name}`))[0]!.n)).toBe(20);
  // Every source of this database has outlived that day.
  const result = await sweep(db.sql, never, () => {}, now);
  expect((await listPartitions(db.sql)).map((p) => p.name)).not.toContain(name);
  expect(result.partitionsDropped).toBeGreaterThanOrEqual(1);
  expect(result.rowsRemoved).toBe(20);
});

test("seals and sweeps days apart, retention lowered and raised, late events and a deletion: nothing kept goes; what expired goes with its block", async () => {
  const start = new Date();
  const HOUR = 3_600_000;
  const retentions = [1, 2, 3, 5, 7, 10, 30];
  const sources = await Promise.all(retentions.map((days) => lp.createSource({ logs_retention: days })));
  const retention = new Map(sources.map((s, i) => [s.id, retentions[i]!]));
  await ensurePartitions(db.sql, new Date(start.getTime() - 20 * DAY_MS), start);
  // Every event ever ingested: its key, source, dt, and whether a sweep has made it expire.
  const events = new Map<string, { source: string; dt: number; gone: boolean }>();
  let seed = 7;
  const random = () => (seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
  // Written through the flush path as they are dated (as another instance's late batches would be):
  // ingestion would redate those the current retention has passed.
  const tool = openFlushConnection(db.url, 5_000);
  async function send(source: string, dts: number[]) {
    const batch = dts.map((dt) => ({ key: `${source}-${events.size}-${Math.random()}`, dt: new Date(dt).toISOString() }));
    batch.forEach((e) => events.set(e.key, { source, dt: Date.parse(e.dt), gone: false }));
    await tool.write(
      crypto.randomUUID(),
      batch.map((e) => `${source}\t${e.dt}\t${JSON.stringify(e)}\n`),
    );
  }
  for (const s of sources)
    await send(
      s.id,
      Array.from({ length: 25 * 4 }, (_, i) => start.getTime() + DAY_MS - i * 6 * HOUR - 17_000),
    );
  await lp.flusher.flush();

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
      await send(
        s.id,
        Array.from({ length: 6 }, () => now.getTime() - random() * 15 * DAY_MS),
      );
    }
    await lp.flusher.flush();

    await sealAll(db.sql);
    await sweep(db.sql, never, () => {}, now);
    for (const e of events.values()) {
      const days = retention.get(e.source);
      if (days === undefined || e.dt < now.getTime() - days * DAY_MS) e.gone = true;
    }
    const ids = sources.map((s) => Number(s.id));
    const stored = new Set((await db.sql`select raw->>'key' as key from log_events where source_id = any(${ids})`).map((r) => r.key as string));
    const expected = [...events].filter(([, e]) => !e.gone).map(([key]) => key);
    // A block goes when its newest event expires: an expired event may stay only beside a kept event
    // of its source and UTC day (a block holds one source's events of one day).
    const keptDays = new Set(expected.map((key) => `${events.get(key)!.source} ${Math.floor(events.get(key)!.dt / DAY_MS)}`));
    const wrong = {
      step,
      leftBehind: [...stored]
        .filter((key) => events.get(key)!.gone && !keptDays.has(`${events.get(key)!.source} ${Math.floor(events.get(key)!.dt / DAY_MS)}`))
        .map((key) => ({ ...events.get(key)!, dt: new Date(events.get(key)!.dt).toISOString() }))
        .slice(0, 5),
      removedEarly: expected
        .filter((key) => !stored.has(key))
        .map((key) => ({ ...events.get(key)!, dt: new Date(events.get(key)!.dt).toISOString() }))
        .slice(0, 5),
    };
    expect(wrong).toEqual({ step, leftBehind: [], removedEarly: [] });
  }
  await tool.close();
  await db.sql`delete from source_deletions where source_id = ${Number(deleted)}`;
}, 60_000);
