// How logpond makes its embedded PostgreSQL's cluster (store/embedded.ts): without data checksums.
// With them, a page read for the first time after a checkpoint whose rows' hint bits get set is
// written whole into the WAL, and every hot page is read once by its seal (docs/storage.md, "WAL").
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { startEmbeddedPostgres } from "../../src/store/embedded";

test("a new embedded cluster has no data checksums; reading fresh rows after a checkpoint writes no full pages", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-cluster-"));
  const pg = await startEmbeddedPostgres(dataDir, 0);
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    expect((await sql<{ v: string }[]>`select current_setting('data_checksums') as v`)[0]!.v).toBe("off");
    // What the setting is for: rows written, a checkpoint, then their first read (hint bits set).
    await sql`create table t (id bigint, raw jsonb)`;
    await sql`insert into t select i, jsonb_build_object('message', repeat('x', 200), 'i', i) from generate_series(1, 20000) i`;
    await sql`checkpoint`;
    // A backend adds its WAL counts to pg_stat_wal at most once a second unless told to.
    const fullPages = async () => {
      await sql`select pg_stat_force_next_flush()`;
      return Number((await sql<{ n: string }[]>`select wal_fpi::text as n from pg_stat_wal`)[0]!.n);
    };
    const before = await fullPages();
    expect((await sql<{ n: string }[]>`select count(*)::text as n from t`)[0]!.n).toBe("20000");
    const after = await fullPages();
    // With checksums, each of the table's ~700 pages would be one full-page image here.
    expect(after - before).toBeLessThan(10);
  } finally {
    await sql.end({ timeout: 5 });
    await pg.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);
