// In-place upgrade (docs/storage-v3.md): a database made by the first version (migrations 0000 and
// 0001 only: plain log_events, no id) with events in it is upgraded by logpond's start, through
// storage v2 (dt partitions) to v3 (hot generations and sealed blocks); every event is still
// there, byte for byte, each with a unique id, before and after sealing; new events get larger ids.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { DAY_MS } from "../../src/store/partitions";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond } from "../helpers/logpond";

const DRIZZLE = path.join(import.meta.dir, "..", "..", "drizzle");
let db: ScratchDatabase;
let firstVersion: string;
beforeAll(async () => {
  db = await createScratchDatabase("upgrade");
  // The first version's migrations folder: 0000 and 0001 and a journal that lists only them.
  firstVersion = mkdtempSync(path.join(tmpdir(), "logpond-v1-migrations-"));
  mkdirSync(path.join(firstVersion, "meta"));
  const journal = JSON.parse(readFileSync(path.join(DRIZZLE, "meta", "_journal.json"), "utf8"));
  journal.entries = journal.entries.slice(0, 2);
  writeFileSync(path.join(firstVersion, "meta", "_journal.json"), JSON.stringify(journal));
  for (const entry of journal.entries) copyFileSync(path.join(DRIZZLE, `${entry.tag}.sql`), path.join(firstVersion, `${entry.tag}.sql`));
});
afterAll(async () => {
  await db.drop();
  rmSync(firstVersion, { recursive: true, force: true });
});

test("a first-version database keeps every event through the upgrade, each with a unique id", async () => {
  await migrate(drizzle(db.sql), { migrationsFolder: firstVersion });
  const columns = await db.sql`select column_name from information_schema.columns where table_name = 'log_events' order by ordinal_position`;
  expect(columns.map((c) => c.column_name)).toEqual(["source_id", "dt", "raw"]);

  const now = Date.now();
  const ages = [0, 0.01, 1, 10, 700, -30]; // days; negative: in the future
  const raws = ['{"a": 1}', '{"text": "tab\\there, quote \\" backslash \\\\"}', '{"unicode": "žluťoučký 🦫"}', '{"nested": {"deep": [1, 2.50, null, true]}}'];
  let n = 0;
  for (let source = 101; source <= 103; source++) {
    for (const age of ages) {
      for (const raw of raws) {
        await db.sql`insert into log_events (source_id, dt, raw) values (${source}, ${new Date(now - age * DAY_MS - n).toISOString()}::timestamptz, ${raw}::jsonb)`;
        n++;
      }
    }
  }
  const before = await db.sql`select source_id, dt, raw::text as raw from log_events order by source_id, dt, raw::text`;
  expect(before).toHaveLength(n);

  const lp = await startTestLogpond({ DATABASE_URL: db.url });
  try {
    const after = await db.sql`select id, source_id, dt, raw::text as raw from log_events order by source_id, dt, raw::text`;
    expect(after.map(({ source_id, dt, raw }) => ({ source_id, dt, raw }))).toEqual(before.map(({ source_id, dt, raw }) => ({ source_id, dt, raw })));
    const ids = after.map((row) => Number(row.id));
    expect(new Set(ids).size).toBe(n);
    expect(Math.min(...ids)).toBe(1);
    expect(Math.max(...ids)).toBe(n);
    // The old table is log_hot's first generation; sealed, every event is still there, once.
    expect((await db.sql`select 1 from pg_class where relname = 'log_hot_legacy'`).length).toBe(1);
    const stats = await lp.sealer.sealNow();
    expect(stats.sealed).toBe(n);
    expect((await db.sql`select 1 from pg_class where relname = 'log_hot_legacy'`).length).toBe(0);
    const sealed = await db.sql`select id, source_id, dt, raw::text as raw from log_events order by source_id, dt, raw::text`;
    expect(sealed).toEqual(after);

    const source = await lp.createSource();
    expect((await lp.ingest(source.token, '{"after": "upgrade"}')).status).toBe(202);
    await lp.flusher.flush();
    const [fresh] = await db.sql`select id from log_events where source_id = ${Number(source.id)}`;
    expect(Number(fresh!.id)).toBeGreaterThan(n);
  } finally {
    await lp.stop();
  }
});
