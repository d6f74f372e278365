// The migrations' journal (drizzle/meta/_journal.json) as drizzle's migrator reads it: a database
// runs every migration whose time is later than the last one it ran, so the times must grow with
// the files, or an upgrade skips one (0015's first time was before 0014's). A database migrated up
// to 0014, and one that ran 0015 under its first time, both reach this build's schema at the
// next start (runMigrations, store/db.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";

const DRIZZLE = path.join(import.meta.dir, "..", "..", "drizzle");
interface Entry {
  idx: number;
  when: number;
  tag: string;
}
const journal = JSON.parse(readFileSync(path.join(DRIZZLE, "meta", "_journal.json"), "utf8")) as { entries: Entry[] };
const folders: string[] = [];
const databases: ScratchDatabase[] = [];
afterAll(async () => {
  for (const db of databases) await db.drop();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** A migrations folder holding `entries` (as an older logpond shipped them). */
function folderOf(entries: Entry[]): string {
  const folder = mkdtempSync(path.join(tmpdir(), "logpond-migrations-"));
  folders.push(folder);
  mkdirSync(path.join(folder, "meta"));
  writeFileSync(path.join(folder, "meta", "_journal.json"), JSON.stringify({ ...journal, entries }));
  for (const entry of entries) copyFileSync(path.join(DRIZZLE, `${entry.tag}.sql`), path.join(folder, `${entry.tag}.sql`));
  return folder;
}

async function scratch(): Promise<ScratchDatabase> {
  const db = await createScratchDatabase("migrations");
  databases.push(db);
  return db;
}

const chunkColumns = async (db: ScratchDatabase) =>
  (await db.sql`select column_name from information_schema.columns where table_name = 'log_chunks' order by ordinal_position`).map((row) => row.column_name);
const ALL_COLUMNS = ["first_id", "last_id", "source_id", "min_dt", "max_dt", "n", "payload", "hist_minutes", "hist_levels", "hist_counts"];

test("each migration's time in the journal is later than the one before it, in file order", () => {
  const files = journal.entries.map((entry) => entry.tag);
  expect(files).toEqual([...files].sort());
  for (let i = 1; i < journal.entries.length; i++) {
    const [before, entry] = [journal.entries[i - 1]!, journal.entries[i]!];
    expect({ tag: entry.tag, later: entry.when > before.when }).toEqual({ tag: entry.tag, later: true });
  }
});

let at0014: string;
beforeAll(() => {
  at0014 = folderOf(
    journal.entries.slice(
      0,
      journal.entries.findIndex((entry) => entry.tag === "0015_chunk_journal"),
    ),
  );
});

test("a database migrated up to 0014 gets the chunk journal, with its per-minute counts, at the next start", async () => {
  const db = await scratch();
  await migrate(drizzle(db.sql), { migrationsFolder: at0014 });
  expect(await chunkColumns(db)).toEqual([]);
  await runMigrations(db.url);
  expect(await chunkColumns(db)).toEqual(ALL_COLUMNS);
  // The twin of each generation that existed before (drizzle/0015's loop), and the default partition.
  const partitions = async (table: string) =>
    (await db.sql`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = ${table}::regclass order by 1`).map(
      (row) => row.relname as string,
    );
  const generations = (await partitions("log_hot")).filter((name) => /^log_hot_g[0-9]+$/.test(name));
  expect(generations.length).toBeGreaterThan(0);
  expect(await partitions("log_chunks")).toEqual(["log_chunks_default", ...generations.map((name) => name.replace("log_hot", "log_chunks"))].sort());
});

test("a database that ran 0015 under its first time (before 0014's) runs it again without harm, then 0016", async () => {
  const db = await scratch();
  const first = journal.entries.slice(0, journal.entries.findIndex((entry) => entry.tag === "0015_chunk_journal") + 1);
  first[first.length - 1] = { ...first.at(-1)!, when: 1795886562379 };
  await migrate(drizzle(db.sql), { migrationsFolder: folderOf(first) });
  expect(await chunkColumns(db)).toEqual(ALL_COLUMNS.slice(0, 7));
  await db.sql`insert into log_chunks (first_id, last_id, source_id, min_dt, max_dt, n, payload) values (5, 6, 1, now(), now(), 2, '\\x00')`;
  await runMigrations(db.url);
  expect(await chunkColumns(db)).toEqual(ALL_COLUMNS);
  const [kept] = await db.sql`select count(*)::int as n, bool_and(hist_minutes is null) as unset from log_chunks`;
  expect(kept).toEqual({ n: 1, unset: true });
  // And a start after that changes nothing.
  await runMigrations(db.url);
  expect(await chunkColumns(db)).toEqual(ALL_COLUMNS);
});
