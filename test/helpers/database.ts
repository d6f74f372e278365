// A database of a test's own on the test PostgreSQL, for tests that need to know every row and
// every source in it (retention, upgrade): created empty, dropped by the caller.
import postgres from "postgres";

export interface ScratchDatabase {
  url: string;
  sql: postgres.Sql;
  drop(): Promise<void>;
}

export async function createScratchDatabase(prefix: string): Promise<ScratchDatabase> {
  const base = process.env.LOGPOND_TEST_DATABASE_URL!;
  const name = `${prefix}_${crypto.randomUUID().slice(0, 8)}`;
  const admin = postgres(base, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const sql = postgres(url.toString(), { max: 4, onnotice: () => {} });
  return {
    url: url.toString(),
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end({ timeout: 5 });
    },
  };
}
