// Storage v4, step 1 (drizzle/0010, codec/pgp.ts, store/seal-pool.ts): blocks whose text logpond
// deflates and frames on its seal threads open in SQL with pgcrypto and give back every event
// exactly; blocks sealed before (a text body, ids and dts) stay as they are beside the new ones and
// read through every function; a v3 database with hot rows and v3 blocks upgrades in place.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { threadId } from "node:worker_threads";
import { openPayload, PAYLOAD_PASSPHRASE } from "../../src/codec/pgp";
import { type Block, buildBlocks, type MovedRow } from "../../src/store/blocks";
import { readRowOf, SealPool } from "../../src/store/seal-pool";
import { writeBlocks } from "../../src/store/blocks-sql";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond } from "../helpers/logpond";

const DRIZZLE = path.join(import.meta.dir, "..", "..", "drizzle");
const DT = `to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
let db: ScratchDatabase;
let before: string;
beforeAll(async () => {
  db = await createScratchDatabase("storage_v4");
  // The migrations before storage v4 (a journal without it), as a v3 install has them.
  before = mkdtempSync(path.join(tmpdir(), "logpond-v3-migrations-"));
  mkdirSync(path.join(before, "meta"));
  const journal = JSON.parse(readFileSync(path.join(DRIZZLE, "meta", "_journal.json"), "utf8"));
  journal.entries = journal.entries.slice(
    0,
    journal.entries.findIndex((entry: { tag: string }) => entry.tag.endsWith("_storage_v4")),
  );
  writeFileSync(path.join(before, "meta", "_journal.json"), JSON.stringify(journal));
  for (const entry of journal.entries) copyFileSync(path.join(DRIZZLE, `${entry.tag}.sql`), path.join(before, `${entry.tag}.sql`));
});
afterAll(async () => {
  await db.drop();
  rmSync(before, { recursive: true, force: true });
});

/** Rows as the sealer reads them (raw::text's form: jsonb's), with escapes, non-ASCII and microseconds. */
function rows(sourceId: number, firstId: number, count: number, day: string): MovedRow[] {
  return Array.from({ length: count }, (_, i) => {
    const raw =
      i % 3 === 0
        ? `{"n": ${i}, "level": "info", "message": "žluťoučký ✓ ${i}"}`
        : i % 3 === 1
          ? `{"msg": "line\\nwith \\"quotes\\" and a tab\\t ${i}"}`
          : `{"a": [1, 2.50, null, true], "level": "ERROR"}`;
    const micros = ((firstId + i) * 7_919_113_117) % 86_400_000_000; // spread over the day, out of id order
    const dt = `${day}T${new Date(micros / 1000).toISOString().slice(11, 23)}${String(micros % 1000).padStart(3, "0")}Z`;
    const shape = Object.keys(JSON.parse(raw)).sort().join(",");
    const level = (JSON.parse(raw) as { level?: string }).level?.toLowerCase() ?? null;
    return { id: String(firstId + i * 3), source_id: String(sourceId), dt, line: raw, shape, level };
  });
}

const byId = (a: { id: string }, b: { id: string }) => Number(a.id) - Number(b.id);
const asEvents = (moved: MovedRow[]) => moved.map((row) => ({ id: row.id, dt: row.dt, raw: row.line })).sort(byId);

test("a block built by logpond opens with pgp_sym_decrypt in SQL and gives back every event exactly through log_events", async () => {
  await migrate(drizzle(db.sql), { migrationsFolder: DRIZZLE });
  const sourceId = 910_001;
  const moved = rows(sourceId, 5_000, 2_500, "2026-03-04");
  const items = buildBlocks(moved, 1_000);
  const blocks = items.filter((item): item is Block => item.kind === "block");
  expect(blocks.length).toBe(3);
  await writeBlocks(db.sql as never, items);

  const stored = await db.sql<{ text: string; payload: Uint8Array; body: string | null; ids: unknown; storage: string }[]>`
    select pgp_sym_decrypt(payload, ${PAYLOAD_PASSPHRASE}) as text, payload, body, ids,
      (select attstorage from pg_attribute where attrelid = 'log_blocks'::regclass and attname = 'payload') as storage
    from log_blocks where source_id = ${sourceId} order by min_dt`;
  expect(stored.map((block) => [block.body, block.ids, block.storage])).toEqual(blocks.map(() => [null, null, "e"]));
  // pgcrypto's text is the one logpond framed: ids and times as offsets, then the lines.
  expect(stored.map((block) => block.text)).toEqual(stored.map((block) => openPayload(block.payload)));
  expect(stored.map((block) => block.text.split("\n").length - 2)).toEqual(blocks.map((block) => block.n));

  const read = await db.sql`select id::text as id, ${db.sql.unsafe(DT)} as dt, raw::text as raw from log_events where source_id = ${sourceId}`;
  expect([...read].sort(byId as never)).toEqual(asEvents(moved) as never);

  // No pglz on any column of a block or a chunk (drizzle/0018): every variable-length column of
  // log_blocks, its day partitions and log_chunks is EXTERNAL, and these blocks — each spanning
  // most of a day, so their per-minute counts are kilobytes, which PostgreSQL compressed before —
  // hold no compressed value.
  const storage = await db.sql<{ table: string; column: string; storage: string }[]>`
    select c.relname as table, a.attname as column, a.attstorage as storage
    from pg_class c join pg_attribute a on a.attrelid = c.oid
    where (c.relname in ('log_blocks', 'log_chunks') or c.relname like 'log_blocks\\_%') and c.relkind in ('r', 'p')
      and a.attnum > 0 and not a.attisdropped and a.attlen = -1`;
  expect(new Set(storage.map((column) => column.table))).toContain("log_blocks_default");
  expect(storage.length).toBeGreaterThan(20);
  expect(storage.filter((column) => column.storage !== "e")).toEqual([]);
  const compressed = await db.sql<{ hist: number; methods: string }[]>`
    select pg_column_size(hist_minutes) + pg_column_size(hist_levels) + pg_column_size(hist_counts) as hist,
      concat_ws(',', pg_column_compression(hist_minutes), pg_column_compression(hist_levels), pg_column_compression(hist_counts),
        pg_column_compression(payload), pg_column_compression(bloom), pg_column_compression(fields)) as methods
    from log_blocks where source_id = ${sourceId}`;
  expect(compressed.length).toBe(3);
  for (const block of compressed) {
    expect(block.hist).toBeGreaterThan(8_000);
    expect(block.methods).toBe("");
  }
});

test("a v3 database upgrades in place: its hot rows and text blocks are kept, new blocks beside them, every event read by every function", async () => {
  const upgrade = await createScratchDatabase("storage_v4_upgrade");
  try {
    const sql = upgrade.sql;
    await migrate(drizzle(sql), { migrationsFolder: before });
    const sourceId = 910_002;
    await sql`insert into sources (id, name, platform, table_name, token, live_tail_pattern) overriding system value
      values (${sourceId}, 'v3', 'http', 'v3', 'v3-token-910002', '{message}')`;
    const day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10); // inside its retention
    // A v3 block, written as storage v3 wrote it (ids, dts, a text body), and hot rows.
    const old = rows(sourceId, 100, 40, day).sort((a, b) => (a.dt < b.dt ? -1 : 1));
    await sql`insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, ids, dts, body, hist_minutes, hist_levels, hist_counts)
      values (${sourceId}, ${old[0]!.dt}::timestamptz, ${old.at(-1)!.dt}::timestamptz, 100, ${100 + 39 * 3}, ${old.length},
        ${`{${old.map((row) => row.id).join(",")}}`}::text::bigint[], ${`{${old.map((row) => row.dt).join(",")}}`}::text::timestamptz[], ${old.map((row) => row.line).join("\n")},
        ${`{${[...new Set(old.map((row) => Math.floor(Date.parse(row.dt) / 60_000)))].join(",")}}`}::text::bigint[], '{}', '{}')`;
    const hot = rows(sourceId, 1_000, 30, day);
    for (const row of hot) await sql`insert into log_hot (id, source_id, dt, raw) values (${row.id}, ${sourceId}, ${row.dt}::timestamptz, ${row.line}::jsonb)`;
    const everything = asEvents([...old, ...hot]);

    const lp = await startTestLogpond({ DATABASE_URL: upgrade.url, SEAL_INTERVAL_MS: "600000" });
    try {
      const readAll = async () => {
        const from = `${day}T00:00:00Z`;
        const to = `${day}T23:59:59.999999Z`;
        const q = (text: string) => sql.unsafe(`select id::text as id, ${DT} as dt, raw::text as raw from ${text}`);
        const results = {
          view: await q(`log_events where source_id = ${sourceId}`),
          between: await q(`log_events_between('{${sourceId}}', '${from}', '${to}')`),
          logpondBetween: await q(`logpond_events_between('{${sourceId}}', '${from}', '${to}')`),
          matching: await q(`logpond_events_matching('{${sourceId}}', '${from}', '${to}', '{}', '{}', '{}', '{}')`),
          byId: await q(`log_events_by_id(0, 100000) where source_id = ${sourceId}`),
        };
        return Object.fromEntries(Object.entries(results).map(([name, read]) => [name, [...read].sort(byId as never)]));
      };
      const expected = { view: everything, between: everything, logpondBetween: everything, matching: everything, byId: everything };
      expect(await readAll()).toEqual(expected as never);

      // A window of one event's microsecond, hot or sealed: the v3 block's dts and a new block's minutes.
      await lp.sealer.sealNow();
      const [tierCounts] = await sql`select (select count(*)::int from log_hot where source_id = ${sourceId}) as hot,
        (select count(*)::int from log_blocks where source_id = ${sourceId} and body is not null) as v3,
        (select count(*)::int from log_blocks where source_id = ${sourceId} and payload is not null) as v4`;
      expect(tierCounts).toEqual({ hot: 0, v3: 1, v4: 1 });
      expect(await readAll()).toEqual(expected as never);
      for (const event of [everything[3]!, everything[35]!, everything[60]!]) {
        const one = await sql.unsafe(`select id::text as id from log_events_between('{${sourceId}}', '${event.dt}', '${event.dt}')`);
        expect(one.map((row) => row.id)).toEqual([event.id]);
      }
      // The query API's search over both kinds (a word in the v3 block's lines and in the new block's).
      const found = await lp.api(
        "GET",
        `/api/v2/query/live-tail?source_ids=${sourceId}&from=${day}T00:00:00Z&to=${day}T23:59:59.999999Z&batch=1000&query=quotes`,
      );
      expect(found.status).toBe(200);
      const data = ((await found.json()) as { data: { id: string }[] }).data;
      const quoted = everything.filter((event) => event.raw.includes("quotes"));
      expect(data.map((row) => String(row.id)).sort()).toEqual(quoted.map((event) => event.id).sort());
      // And counted: the v4 block on the scan threads, the v3 block by PostgreSQL (query/histogram.ts).
      const counted = await lp.api(
        "GET",
        `/api/v2/query/histogram?source_ids=${sourceId}&from=${day}T00:00:00Z&to=${day}T23:59:59.999999Z&buckets=24&query=quotes`,
      );
      expect(counted.status).toBe(200);
      expect(((await counted.json()) as { meta: { total: number; complete: boolean } }).meta).toMatchObject({ total: quoted.length, complete: true });
    } finally {
      await lp.stop();
    }
  } finally {
    await upgrade.drop();
  }
}, 120_000);

test("a chunk's blocks are built on a seal thread, not on the thread that calls", async () => {
  const pool = new SealPool(2);
  try {
    const moved = rows(910_003, 1, 3_000, "2026-03-06");
    const read = moved.map(readRowOf);
    const built = await Promise.all([pool.build(read.slice(0, 1_500), 1_000), pool.build(read.slice(1_500), 1_000)]);
    const inline = [...buildBlocks(moved.slice(0, 1_500), 1_000), ...buildBlocks(moved.slice(1_500), 1_000)];
    // The same blocks as built here (the payloads' random prefixes aside: compare their text).
    const view = (items: typeof inline) => items.map((item) => (item.kind === "block" ? { ...item, payload: openPayload(item.payload) } : item));
    expect(view(built.flat())).toEqual(view(inline));
    expect(pool.stats.chunks).toBe(2);
    expect(pool.stats.events).toBe(3_000);
    expect(pool.stats.threads.size).toBeGreaterThanOrEqual(1);
    expect(pool.stats.threads.has(threadId)).toBe(false);
  } finally {
    pool.close();
  }
});

test("the service's sealer builds on its seal threads", async () => {
  const lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", SEAL_WORKERS: "2" });
  try {
    const source = await lp.createSource();
    const sent = Array.from({ length: 50 }, (_, i) => ({ message: `event ${i}`, level: "info" }));
    const response = await fetch(`${lp.ingestUrl}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json" },
      body: JSON.stringify(sent),
    });
    expect(response.status).toBe(202);
    await lp.flusher.flush();
    const stats = await lp.sealer.sealNow();
    expect(stats.sealed).toBeGreaterThanOrEqual(50);
    expect(lp.sealer.pool.events).toBe(stats.sealed);
    expect(lp.sealer.pool.threads.size).toBeGreaterThanOrEqual(1);
    expect(lp.sealer.pool.threads.has(threadId)).toBe(false);
    const [read] = await db.sql`select count(*)::int as n from log_events where source_id = ${Number(source.id)}`;
    expect(read!.n).toBe(50);
  } finally {
    await lp.stop();
  }
}, 60_000);
