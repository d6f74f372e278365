// Review of the chunk journal (HOT_TIER=chunks): interleavings of a seal and a reader.
// store/sealer.ts's header: TRUNCATE is not MVCC-safe for a snapshot taken before it and used
// after, so a reader must take its locks before its snapshot (one statement, SQL functions inlined).
// The probes of the nearest hot event were scalar SQL functions with subqueries, which PostgreSQL
// does not inline: they locked log_hot and log_chunks when they first ran, after the calling
// statement took its snapshot, and missed an event a seal moved meanwhile. They return a row now
// (logpond_hot_newest / logpond_hot_oldest, store/sql/functions.sql), inlined into the statement.
import { afterAll, beforeAll, expect, test } from "bun:test";
import postgres from "postgres";
import { eventMicros } from "../../src/codec/time";
import { tupleHead, TUPLE_HEAD, setIds, writeTuple } from "../../src/codec/tuples";
import { type FlushConnection, openFlushConnection } from "../../src/store/copy";
import { runMigrations } from "../../src/store/db";
import { sealAll } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { waitFor } from "../helpers/wait";

const ADVISORY = 4_242_421;
let db: ScratchDatabase;
let writer: FlushConnection;
beforeAll(async () => {
  db = await createScratchDatabase("chunkreview");
  await runMigrations(db.url);
  writer = openFlushConnection(db.url, 30_000, "chunks");
});
afterAll(async () => {
  await writer.close();
  await db.drop();
});

async function writeOne(source: number, dt: string, json: string): Promise<void> {
  const out = Buffer.alloc(TUPLE_HEAD + 3 * json.length);
  const length = writeTuple(out, 0, tupleHead(source), eventMicros(dt)!, json);
  const firstId = await writer.reserveIds(1);
  setIds(out.subarray(0, length), 1, firstId);
  await writer.write(crypto.randomUUID(), [out.subarray(0, length)], { firstId, lastId: firstId });
}

test("probes through logpond_hot_newest / logpond_hot_oldest during a seal's commit see the moved event in one tier, as a view read does", async () => {
  const source = 800_000_000 + Math.floor(Math.random() * 1_000_000);
  const dt = "2026-11-28T10:00:00.000000Z";
  await writeOne(source, dt, JSON.stringify({ message: "moved by the seal" }));
  // A seal that stops at its COMMIT (after its INSERTs and its TRUNCATE), holding its locks: a
  // deferred trigger on log_blocks waits for an advisory lock this test holds (past the seal's
  // lock_timeout: the trigger's own wait is not the seal's).
  await db.sql.unsafe(`create function review_hold() returns trigger language plpgsql as $$
    begin perform set_config('lock_timeout', '0', true); perform pg_advisory_xact_lock(${ADVISORY}); return null; end $$`);
  await db.sql.unsafe(
    `create constraint trigger review_hold after insert on log_blocks deferrable initially deferred for each row execute function review_hold()`,
  );
  const holder = postgres(db.url, { max: 1, onnotice: () => {} });
  const probe = postgres(db.url, { max: 1, onnotice: () => {} });
  const probe2 = postgres(db.url, { max: 1, onnotice: () => {} });
  const view = postgres(db.url, { max: 1, onnotice: () => {} });
  try {
    await holder`select pg_advisory_lock(${ADVISORY})`;
    const sealing = sealAll(db.sql as never);
    await waitFor("the seal to wait at its commit", async () => (await db.sql`select 1 from pg_stat_activity where wait_event = 'advisory'`).length > 0);
    // read.ts NEWEST_BEFORE's shape: the blocks in the statement, the hot tier through the function.
    const probed = probe<{ dt: string | null }[]>`
      select to_char(greatest(
        (select max(b.max_dt) from log_blocks b where b.source_id = ${source} and b.generation is null),
        (select h.dt from logpond_hot_newest(array[${source}::bigint], now()) h)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt`.execute();
    const after = probe2<{ dt: string | null }[]>`
      select to_char(least(
        (select min(b.max_dt) from log_blocks b where b.source_id = ${source} and b.generation is null),
        (select h.dt from logpond_hot_oldest(array[${source}::bigint], '-infinity') h)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt`.execute();
    const viewed = view<{ dt: string | null }[]>`
      select to_char(max(dt) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt from log_events where source_id = ${source}`.execute();
    await waitFor(
      "both readers to wait for the seal's locks",
      async () => (await db.sql`select 1 from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'relation'`).length >= 3,
    );
    await holder`select pg_advisory_unlock(${ADVISORY})`;
    await sealing;
    const [[p], [a], [v]] = await Promise.all([probed, after, viewed]);
    expect(v!.dt).toBe(dt);
    // As scalar functions: null and null (the snapshot before the seal's commit saw no block, the
    // locks taken after its TRUNCATE no chunk).
    expect({ newestBefore: p!.dt, oldestAfter: a!.dt }).toEqual({ newestBefore: dt, oldestAfter: dt });
  } finally {
    await holder.end({ timeout: 1 });
    await probe.end({ timeout: 1 });
    await probe2.end({ timeout: 1 });
    await view.end({ timeout: 1 });
    await db.sql.unsafe(`drop trigger if exists review_hold on log_blocks`);
  }
}, 60_000);

// A generation without its chunk twin (opened by a logpond from before drizzle/0015, which the
// sealer supports: store/sealer.ts chunksOf): this logpond's chunks of its ids go to
// log_chunks_default and are sealed from there, while SEAL_FROM=memory has staged blocks of the same
// batches under that generation: they were published too (each event twice) until the sealer
// stopped publishing the staged blocks of a twinless generation.
test("SEAL_FROM=memory: chunks of a generation without its twin are sealed from log_chunks_default once, its staged blocks dropped", async () => {
  const { startTestLogpond } = await import("../helpers/logpond");
  const { tiers } = await import("../helpers/sealing");
  // A database of its own: nothing sealed in it before this process's memory path.
  const db = await createScratchDatabase("chunkreview_memory");
  await runMigrations(db.url);
  const openStart = async () =>
    (
      await db.sql<{ start: string | null }[]>`
        select max(substring(c.relname from '^log_hot_g([0-9]+)$')::bigint)::text as start
        from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'log_hot'::regclass`
    )[0]!.start;
  const before = await openStart();
  const lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", SEAL_FROM: "memory", HOT_TIER: "chunks" });
  try {
    const source = await lp.createSource();
    // The generation this process opens at its start for the memory path (store/sealer.ts openGeneration).
    const open = { start: await waitFor("the memory path's generation", openStart, { until: (start) => start !== before }) };
    // The generation before it sealed and dropped (it was empty: "empty", no close).
    await lp.sealer.sealNow();
    // As an older logpond would have opened it: no log_chunks_g<start>.
    await db.sql.unsafe(`drop table log_chunks_g${open!.start}`);
    // A straggler of the dropped generation (ids below the open one's): to log_chunks_default.
    const straggler = openFlushConnection(db.url, 30_000, "chunks");
    try {
      const json = JSON.stringify({ message: "straggler" });
      const out = Buffer.alloc(TUPLE_HEAD + 3 * json.length);
      const length = writeTuple(out, 0, tupleHead(Number(source.id)), eventMicros(new Date().toISOString())!, json);
      setIds(out.subarray(0, length), 1, 100);
      await straggler.write(crypto.randomUUID(), [out.subarray(0, length)], { firstId: 100, lastId: 100 });
    } finally {
      await straggler.close();
    }
    const events = Array.from({ length: 50 }, (_, i) => ({ message: `twinless ${i}` }));
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
    await lp.flusher.flush();
    expect(Number((await db.sql`select coalesce(sum(n), 0)::int as n from log_chunks_default where source_id = ${Number(source.id)}`)[0]!.n)).toBe(51);
    // The older logpond's batch: rows in log_hot_g<start> and its flush_batches row.
    await db.sql.begin(async (tx) => {
      const [counter] = await tx<{ first: string }[]>`
        update logpond_counters set value = value + 1 where name = 'event_id' returning (value - 1)::text as first`;
      const first = Number(counter!.first);
      await tx`insert into log_hot (id, source_id, dt, raw) values (${first}, ${Number(source.id)}, now(), '{"message":"old logpond"}')`;
      await tx`
        with next as (update logpond_counters set value = value + 1 where name = 'commit_seq' returning value)
        insert into flush_batches (id, seq, first_id, last_id, committed_at) select gen_random_uuid(), next.value, ${first}, ${first}, now() from next`;
    });
    const first = await lp.sealer.sealNow();
    const second = await lp.sealer.sealNow();
    expect(first.fromMemory + second.fromMemory).toBe(0);
    const after = await tiers(db.sql as never, Number(source.id));
    // Before the fix: sealed 102, distinct ids 52 — the 50 chunk events in blocks twice.
    expect({ hot: after.hot, sealed: after.sealed, distinctIds: after.distinctIds }).toEqual({ hot: 0, sealed: 52, distinctIds: 52 });
  } finally {
    await lp.stop();
    await db.drop();
  }
}, 60_000);
