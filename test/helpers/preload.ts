// Test preload: one real PostgreSQL for the whole `bun test` run. TEST_DATABASE_URL points at
// an existing server; otherwise the embedded one starts under .data/test (a leftover from a
// killed run is stopped by the same code the service uses). The schema is reset first, so every
// run starts from the committed migrations (applied here, so tests of single parts find the tables).
import { afterAll } from "bun:test";
import * as path from "node:path";
import postgres from "postgres";
import { runMigrations } from "../../src/store/db";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../../src/store/embedded";

const root = path.join(import.meta.dir, "..", "..");
let embedded: EmbeddedPostgres | undefined;
let url = process.env.TEST_DATABASE_URL;
if (!url) {
  embedded = await startEmbeddedPostgres(path.join(root, ".data", "test"), 0);
  url = embedded.url;
}
const sql = postgres(url, { max: 1, onnotice: () => {} });
await sql.unsafe("drop schema if exists public cascade; create schema public; drop schema if exists drizzle cascade;");
await sql.end();
await runMigrations(url);
process.env.LOGPOND_TEST_DATABASE_URL = url;

afterAll(async () => {
  await embedded?.stop();
});
