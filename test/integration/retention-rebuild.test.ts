// A day whose space is mostly deleted blocks' is rebuilt by the sweep (store/rebuild.ts
// rebuildPartition), on a database of the test's own so every byte of the day is known: the disk
// gets the space back, the other sources' events stay exactly as they were (SQL, the query API's
// search through the filters, a late event sealed into the day afterwards), a read during the
// rebuild sees every event, and a day a writer holds is left for the next sweep, unchanged.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import type { Sql } from "../../src/store/db";
import { DAY_MS, ensurePartitions, partitionFor } from "../../src/store/partitions";
import { partitionSpace, rebuildPartition } from "../../src/store/rebuild";
import { inSnapshot } from "../../src/store/snapshot";
import { sweep } from "../../src/retention/sweep";
import { sealAll } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("rebuild");
  await runMigrations(db.url);
  // No sweep of the service's own: the test's sweeps are the only ones.
  lp = await startTestLogpond({ DATABASE_URL: db.url, RETENTION_SWEEP_INTERVAL_MS: String(DAY_MS) });
  await lp.retention.idle(); // its start's sweep, over
  await ensurePartitions(db.sql, day.from, day.from);
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

const never = new AbortController().signal;
/** The day under test: noon, three days ago (its own partition, no other test's events). */
const day = partitionFor(new Date(Date.now() - 3 * DAY_MS));
const at = (i: number) => new Date(day.from.getTime() + 12 * 3_600_000 + i * 1_000).toISOString();
/** Random hex: deflate cannot shrink it, so the day's size is the events' own. */
const noise = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");

/** Deleted behind the service's back (as retention.test.ts does), so only the test's sweeps act on it. */
async function deleteSource(source: TestSource): Promise<void> {
  await db.sql`delete from sources where id = ${Number(source.id)}`;
  await db.sql`insert into source_deletions (source_id) values (${Number(source.id)})`;
}

/**
 * No autovacuum of the day (its table and TOAST table): a VACUUM truncates the empty pages at a
 * table's end, so it may give back part of what a test deletes before the sweep looks, and the
 * rebuild it expects would not come. A rebuilt day is a new table: set again after each.
 */
async function noAutovacuum(): Promise<void> {
  await db.sql.unsafe(`alter table ${day.name} set (autovacuum_enabled = false, toast.autovacuum_enabled = false)`);
}

async function send(source: TestSource, events: Record<string, unknown>[]): Promise<void> {
  for (let i = 0; i < events.length; i += 1_000) {
    const response = await lp.ingest(source.token, JSON.stringify(events.slice(i, i + 1_000)));
    expect(response.status).toBe(202);
  }
  await lp.flusher.flush();
}

/** A source's events as SQL reads them, in id order, with a digest of all of them. */
async function snapshot(sourceId: string): Promise<{ count: number; digest: string }> {
  const [row] = await db.sql<{ count: number; digest: string | null }[]>`
    select count(*)::int as count, md5(string_agg(id::text || ' ' || dt::text || ' ' || raw::text, E'\n' order by id)) as digest
    from log_events where source_id = ${Number(sourceId)}`;
  return { count: row!.count, digest: row!.digest ?? "" };
}

/** Tables a rebuild made or replaced that are still there (none: each is attached or dropped). */
const leftTables = async () =>
  (await db.sql`select relname from pg_class where relname like ${`${day.name}\\_%`} and relkind = 'r'`).map((row) => row.relname as string);

const indexesOf = async (table: string) => (await db.sql<{ n: number }[]>`select count(*)::int as n from pg_index where indrelid = ${table}::regclass`)[0]!.n;

async function search(source: TestSource, query: string): Promise<unknown[]> {
  const params = new URLSearchParams({
    source_ids: source.id,
    query,
    from: day.from.toISOString(),
    to: new Date(day.to.getTime() - 1).toISOString(),
    batch: "1000",
  });
  const response = await lp.api("GET", `/api/v2/query/live-tail?${params}`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: unknown[] }).data;
}

test("a day that is mostly deleted blocks is rebuilt: the disk gets the space back, the rest is kept as it was", async () => {
  await noAutovacuum();
  const gone = await lp.createSource();
  const kept = await lp.createSource();
  await send(
    gone,
    Array.from({ length: 6_000 }, (_, i) => ({ dt: at(i), message: `gone ${i} ${noise(400)}` })),
  );
  await send(
    kept,
    Array.from({ length: 1_500 }, (_, i) => ({ dt: at(i), message: `kept ${i} ${noise(400)}`, ...(i === 700 ? { needle: "rebuilt-needle-5e11" } : {}) })),
  );
  await sealAll(db.sql);
  const before = await snapshot(kept.id);
  expect(before.count).toBe(1_500);
  const indexes = await indexesOf(day.name);
  const full = (await partitionSpace(db.sql, day))!;

  await deleteSource(gone);
  const lines: string[] = [];
  const result = await sweep(db.sql, never, (line) => lines.push(line), new Date(), 1 << 20);
  expect(result.rowsRemoved).toBe(6_000);
  expect(result.partitionsRebuilt).toBe(1);
  expect(lines.some((line) => line.includes(`rebuilt ${day.name}`))).toBe(true);
  const after = (await partitionSpace(db.sql, day))!;
  // The kept source is a fifth of the day's events: the day shrinks to about that.
  expect(after.total).toBeLessThan(full.total * 0.4);
  expect(result.bytesReturned).toBe(full.total - after.total);

  expect(await snapshot(kept.id)).toEqual(before);
  expect(await snapshot(gone.id)).toEqual({ count: 0, digest: "" });
  // The same name, attached, with every index; the search filters still find the needle.
  const [attached] = await db.sql`select 1 from pg_inherits where inhrelid = ${day.name}::regclass and inhparent = 'log_blocks'::regclass`;
  expect(attached).toBeDefined();
  expect(await indexesOf(day.name)).toBe(indexes);
  expect(await leftTables()).toEqual([]);
  expect((await search(kept, "rebuilt-needle-5e11")).length).toBe(1);
  // Its storage settings are the old table's (the payload out of line, uncompressed; autovacuum as set).
  const [storage] = await db.sql`
    select a.attstorage as payload, c.reloptions as options from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attname = 'payload'
    where c.oid = ${day.name}::regclass`;
  expect(storage!.payload).toBe("e");
  expect(storage!.options).toEqual(["autovacuum_enabled=false"]);

  // A late event of that day is sealed into the rebuilt table; the next sweep finds nothing to rebuild.
  await send(kept, [{ dt: at(5_000), message: "late" }]);
  await sealAll(db.sql);
  expect((await snapshot(kept.id)).count).toBe(1_501);
  const [late] = await db.sql`select count(*)::int as n from ${db.sql(day.name)} where source_id = ${Number(kept.id)} and max_dt = ${at(5_000)}`;
  expect(late!.n).toBe(1);
  const again = await sweep(db.sql, never, () => {}, new Date(), 1 << 20);
  expect(again.partitionsRebuilt).toBe(0);
});

test("a read during a rebuild sees every event of the day once", async () => {
  const source = await lp.createSource();
  await send(
    source,
    Array.from({ length: 3_000 }, (_, i) => ({ dt: at(i), message: `read ${i} ${noise(200)}` })),
  );
  await sealAll(db.sql);
  const expected = await snapshot(source.id);
  let rebuilding = true;
  const counts: number[] = [];
  const reading = (async () => {
    while (rebuilding) counts.push((await snapshot(source.id)).count);
  })();
  for (let i = 0; i < 3; i++) expect(await rebuildPartition(db.sql, day, 200)).toBe(true);
  rebuilding = false;
  await reading;
  expect(counts.length).toBeGreaterThan(0);
  expect(counts.every((count) => count === expected.count)).toBe(true);
  expect(await snapshot(source.id)).toEqual(expected);
});

test("a day a writer holds is not rebuilt this time, and is left as it was", async () => {
  await noAutovacuum();
  const source = await lp.createSource();
  // More than the day holds already (the tests before), so that most of it is deleted.
  await send(
    source,
    Array.from({ length: 10_000 }, (_, i) => ({ dt: at(i), message: `held ${i} ${noise(400)}` })),
  );
  await sealAll(db.sql);
  await deleteSource(source);
  const holder = await db.sql.reserve();
  try {
    // What a seal writing a late block of that day holds until it commits.
    await holder`begin`;
    await holder.unsafe(`lock table ${day.name} in row exclusive mode`);
    const lines: string[] = [];
    const held = await sweep(db.sql, never, (line) => lines.push(line), new Date(), 1 << 20);
    expect(held.partitionsRebuilt).toBe(0);
    expect(lines.some((line) => line.includes(`${day.name} not rebuilt this time`))).toBe(true);
    expect(await leftTables()).toEqual([]);
  } finally {
    await holder`rollback`;
    holder.release();
  }
  const freed = await sweep(db.sql, never, () => {}, new Date(), 1 << 20);
  expect(freed.partitionsRebuilt).toBe(1);
});

test("rebuilds while late events of the day are ingested and sealed into it: stored = acknowledged, no duplicates", async () => {
  const source = await lp.createSource();
  const stopAt = Date.now() + 2_000;
  let rebuilds = 0;
  let busy = 0;
  let seals = 0;
  // Seals and rebuilds side by side: a seal writing the day's blocks and a rebuild copying it meet.
  const sealing = (async () => {
    while (Date.now() < stopAt) {
      await sealAll(db.sql);
      seals++;
    }
  })();
  const rebuilding = (async () => {
    while (Date.now() < stopAt) {
      try {
        if (await rebuildPartition(db.sql, day, 20)) rebuilds++;
      } catch (error) {
        // A seal held the day, or PostgreSQL ended the rebuild for a deadlock: nothing changed (as the sweep takes it).
        if (!["55P03", "40P01"].includes((error as { code?: string }).code ?? "")) throw error;
        busy++;
      }
    }
  })();
  const acknowledged = new Set<string>();
  await Promise.all(
    Array.from({ length: 3 }, async (_, sender) => {
      for (let r = 0; r < 300 && Date.now() < stopAt; r++) {
        const events = Array.from({ length: 50 }, (_, i) => ({ dt: at(r * 50 + i), key: `${sender}-${r}-${i}` }));
        const response = await lp.ingest(source.token, JSON.stringify(events));
        if (response.status === 202) for (const e of events) acknowledged.add(e.key);
      }
    }),
  );
  await Promise.all([sealing, rebuilding]);
  expect(seals).toBeGreaterThan(0);
  expect(rebuilds + busy).toBeGreaterThan(0);
  // With no writer left, the day is rebuilt.
  await lp.flusher.flush();
  await sealAll(db.sql);
  expect(await rebuildPartition(db.sql, day, 20)).toBe(true);
  await lp.flusher.flush();
  await sealAll(db.sql);
  const stored = (await db.sql`select raw->>'key' as key from log_events where source_id = ${Number(source.id)}`).map((row) => row.key as string);
  expect(acknowledged.size).toBeGreaterThan(0);
  expect(stored.length).toBe(acknowledged.size);
  expect(new Set(stored).size).toBe(stored.length);
  expect(stored.every((key) => acknowledged.has(key))).toBe(true);
  // Everything is in the day's blocks, none in the hot tier or the default partition.
  const [inDay] = await db.sql`select coalesce(sum(n), 0)::int as n from ${db.sql(day.name)} where source_id = ${Number(source.id)}`;
  expect(inDay!.n).toBe(acknowledged.size);
  console.log(`rebuilds ${rebuilds}, left for later ${busy}, seals ${seals}, events ${acknowledged.size}`);
});

test("a writer that comes for the day while the rebuild waits for log_blocks: the rebuild gives way, the writer goes on (no deadlock)", async () => {
  const reader = await db.sql.reserve();
  const writer = await db.sql.reserve();
  try {
    // A read holding log_blocks keeps the swap's DETACH waiting.
    await reader`begin`;
    await reader`select count(*) from log_blocks`;
    const rebuilding = rebuildPartition(db.sql, day, 1_000).then(
      () => "rebuilt",
      (error) => (error as { code?: string }).code ?? String(error),
    );
    await until(async () => (await db.sql`select 1 from pg_stat_activity where query like 'alter table log_blocks detach partition%'`).length > 0);
    // A seal of a late event of that day: log_blocks first, then the day (behind the rebuild's SHARE).
    await writer`begin`;
    await writer`lock table log_blocks in row exclusive mode`;
    const writing = writer.unsafe(`lock table ${day.name} in row exclusive mode`).then(
      () => "locked",
      (error) => (error as { code?: string }).code ?? String(error),
    );
    expect(await rebuilding).toBe("55P03");
    expect(await writing).toBe("locked");
  } finally {
    await writer`rollback`.catch(() => {});
    await reader`rollback`.catch(() => {});
    writer.release();
    reader.release();
  }
  expect(await leftTables()).toEqual([]);
});

/** Polls `done` until it holds, for 30 s at most. */
async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await Bun.sleep(10);
  }
}

test("a VACUUM of the day's TOAST table (what autovacuum starts after the sweep's DELETEs) does not make the rebuild fail: the old table is dropped after it", async () => {
  const gone = await lp.createSource();
  await send(
    gone,
    Array.from({ length: 6_000 }, (_, i) => ({ dt: at(i), message: `toast ${i} ${noise(400)}` })),
  );
  await sealAll(db.sql);
  await db.sql`delete from log_blocks where source_id = ${Number(gone.id)}`; // as the sweep's DELETEs do
  const toast = (await db.sql<{ toast: string }[]>`select reltoastrelid::regclass::text as toast from pg_class where oid = ${day.name}::regclass`)[0]!.toast;
  // A slow VACUUM of the TOAST table alone, as an autovacuum worker runs it: SHARE UPDATE EXCLUSIVE
  // on the TOAST table only, which the rebuild's SHARE lock on the day neither waits for nor stops.
  const vacuumer = await db.sql.reserve();
  const pid = (await vacuumer<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid;
  await vacuumer`set vacuum_cost_delay = 100`;
  await vacuumer`set vacuum_cost_limit = 1`;
  const vacuuming = vacuumer.unsafe(`vacuum ${toast}`).catch(() => {});
  try {
    await until(async () => (await db.sql`select 1 from pg_stat_progress_vacuum where pid = ${pid}`).length > 0);
    expect(await rebuildPartition(db.sql, day, 20)).toBe(true);
  } finally {
    await db.sql`select pg_cancel_backend(${pid})`;
    await vacuuming;
    vacuumer.release();
  }
  // The replaced table waited for the VACUUM (or was dropped once it was cancelled); a sweep drops what is left.
  await sweep(db.sql, never, () => {}, new Date(), 1 << 20);
  expect(await leftTables()).toEqual([]);
});

test("a reader's snapshot (store/snapshot.ts) fixed before a rebuild could commit still sees the day's blocks", async () => {
  const source = await lp.createSource();
  await send(
    source,
    Array.from({ length: 2_000 }, (_, i) => ({ dt: at(i), message: `snapshot ${i}` })),
  );
  await sealAll(db.sql);
  const count = async (tx: Sql) =>
    (await tx<{ n: number }[]>`select coalesce(sum(n), 0)::int as n from log_blocks where source_id = ${Number(source.id)} and generation is null`)[0]!.n;
  expect(await count(db.sql)).toBe(2_000);
  let rebuilt: string | undefined;
  // inSnapshot's set_config fixes the snapshot; a rebuild tries between it and the first read of log_blocks.
  const seen = await inSnapshot(db.sql, 60_000, async (tx) => {
    rebuilt = await rebuildPartition(db.sql, day, 5).then(
      () => "rebuilt",
      (error: { code?: string }) => error.code ?? String(error),
    );
    return count(tx);
  });
  expect(rebuilt).toBe("55P03"); // held off by the reader's lock
  expect(seen).toBe(2_000);
});

test("days that ended less than a day ago are not rebuilt (their late events are still being sealed)", async () => {
  const yesterday = partitionFor(new Date(Date.now() - DAY_MS));
  await ensurePartitions(db.sql, yesterday.from, yesterday.from);
  await db.sql.unsafe(`alter table ${yesterday.name} set (autovacuum_enabled = false, toast.autovacuum_enabled = false)`);
  const source = await lp.createSource();
  const noon = yesterday.from.getTime() + 12 * 3_600_000;
  await send(
    source,
    Array.from({ length: 6_000 }, (_, i) => ({ dt: new Date(noon + i * 1_000).toISOString(), message: `recent ${noise(400)}` })),
  );
  await sealAll(db.sql);
  await deleteSource(source);
  const result = await sweep(db.sql, never, () => {}, new Date(), 1 << 20);
  expect(result.rowsRemoved).toBe(6_000);
  expect(result.partitionsRebuilt).toBe(0);
  const space = (await partitionSpace(db.sql, yesterday))!;
  expect(space.total - space.live).toBeGreaterThan(2 << 20); // the space is still dead: not rebuilt
});
