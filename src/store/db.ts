// Opens storage: DATABASE_URL, or the embedded PostgreSQL under DATA_DIR, supervised (restarted
// when it dies: store/supervisor.ts). Runs the committed drizzle migrations and then the view and
// functions of store/sql/ under an advisory lock (several instances may start at once), then hands out the management pool (the flusher opens its
// own connections, store/copy.ts), so a long COPY never makes a management query wait.
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import postgres from "postgres";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { type Service, timeLeft } from "../service";
import { reconnectSeconds, timeout, within } from "../timers";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "./embedded";
import { superviseEmbedded, type Supervisor, supervisorSeries } from "./supervisor";
import * as schema from "./schema";

export type Sql = postgres.Sql;
export type Db = PostgresJsDatabase<typeof schema>;

export interface Store extends Service {
  readonly sql: Sql;
  readonly db: Db;
  readonly url: string;
  /** For the banner: where the data is, with no password in it. */
  readonly description: string;
  /** For the banner: a psql command that works when pasted, with no password in it. */
  readonly psql: string;
  /** The embedded PostgreSQL's supervisor; none for DATABASE_URL (nothing of ours to restart). */
  readonly supervisor: Supervisor | undefined;
  ping(): Promise<boolean>;
  /** Why the database cannot be used now, for /ready; undefined when it answers. */
  ready(): Promise<string | undefined>;
  /** Closes the pool, ends the supervisor, stops the embedded PostgreSQL (a failed start's cleanup too). */
  close(): Promise<void>;
}

const MIGRATIONS_DIR = path.join(import.meta.dir, "..", "..", "drizzle");
const SQL_DIR = path.join(import.meta.dir, "sql");
const MIGRATION_LOCK = 73_615_401; // any constant, the same in every instance
const PING_TIMEOUT_MS = 2_000;

/** Storage, opened and migrated; the embedded PostgreSQL's supervisor started and its series declared. */
export async function openStore(config: Config, { metrics, log }: { metrics: Registry; log: (line: string) => void }): Promise<Store> {
  let embedded: EmbeddedPostgres | undefined;
  let url = config.databaseUrl;
  if (url === undefined) {
    embedded = await startEmbeddedPostgres(config.dataDir, config.embeddedPgPort, log);
    url = embedded.url;
  }
  try {
    // An ingest node (ROLE=ingest) changes no schema: the logpond that owns the database migrates it.
    if (config.role === "ingest") await waitForSchema(url, log);
    else await runMigrations(url);
  } catch (error) {
    await embedded?.stop();
    throw new Error(`could not prepare the database (${redact(url)}): ${(error as Error).message}`);
  }
  const supervisor = embedded ? superviseEmbedded(embedded, log) : undefined;
  if (supervisor) supervisorSeries(supervisor, metrics);

  const options = { onnotice: () => {}, connection: { application_name: "logpond" }, backoff: reconnectSeconds };
  // An ingest node asks little of the pool (its sources' cache; the flusher has its own): several share max_connections.
  const sql = postgres(url, { ...options, max: config.role === "ingest" ? 2 : 8 });
  const db = drizzle(sql, { schema });
  const description = embedded ? `embedded PostgreSQL ${embedded.version} at ${redact(url)} (cluster ${embedded.clusterDir})` : `PostgreSQL at ${redact(url)}`;
  const { hostname, port, username, pathname } = new URL(url);
  const passwordFile = path.join(path.resolve(config.dataDir), "pg-password");
  const psql = embedded
    ? `PGPASSWORD="$(cat ${shellQuote(passwordFile)})" psql -h ${hostname} -p ${port} -U ${username} ${pathname.slice(1)}`
    : `psql "$DATABASE_URL"`;

  const ping = () => {
    // A paused or unreachable server must not hang a readiness probe.
    const probe = sql`select 1`.execute().then(
      () => true,
      () => false,
    );
    return timeout(probe, PING_TIMEOUT_MS, () => false);
  };
  const close = async () => {
    await sql.end({ timeout: 5 }).catch(() => {});
    // The supervisor first (at once if the stop's list stopped it already): a postmaster stopped
    // here must not be started again.
    await supervisor?.stop();
    await embedded?.stop();
  };
  return {
    name: "storage",
    sql,
    db,
    url,
    description,
    psql,
    supervisor,
    ping,
    async ready() {
      if (supervisor?.down !== undefined) return supervisor.down;
      return (await ping()) ? undefined : "Database is unreachable";
    },
    close,
    // A frozen PostgreSQL must not hold the stop past its deadline: an embedded one left running
    // is stopped by the next start. The services stopped before keep time for this one (the
    // drain keeps SPILL_RESERVE_MS back: buffer/spill.ts).
    async stop(deadline) {
      await within(close(), timeLeft(deadline));
    },
  };
}

export async function runMigrations(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(drizzle(sql), { migrationsFolder: MIGRATIONS_DIR });
    await applySqlFiles(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** How often an ingest node asks whether the schema it was built for is there. */
const SCHEMA_POLL_MS = 500;

/**
 * Waits until the database has this build's schema: every file of store/sql/ applied with the
 * digest runMigrations gives it (which covers the last migration's tag), so an ingest node that
 * starts before the logpond that migrates, or is newer than it, waits instead of writing rows into
 * a schema it does not know. Says once that it waits.
 */
export async function waitForSchema(url: string, log: (line: string) => void): Promise<void> {
  const wanted = sqlFileDigests();
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    for (let said = false; ; said = true) {
      const applied = await sql<{ name: string; digest: string }[]>`select name, digest from logpond_sql`.catch(() => []);
      const have = new Map(applied.map((row) => [row.name, row.digest]));
      if (wanted.every(({ name, digest }) => have.get(name) === digest)) return;
      if (!said) log("storage: waiting for the schema (a logpond with ROLE=all migrates this database)");
      await Bun.sleep(SCHEMA_POLL_MS);
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Each file of store/sql/ (in name order) and its digest: its text and the last migration's tag. */
function sqlFileDigests(): { name: string; text: string; digest: string }[] {
  const journal = JSON.parse(readFileSync(path.join(MIGRATIONS_DIR, "meta", "_journal.json"), "utf8")) as { entries: { tag: string }[] };
  const lastMigration = journal.entries.at(-1)?.tag ?? "";
  return readdirSync(SQL_DIR)
    .filter((file) => file.endsWith(".sql"))
    .sort()
    .map((name) => {
      const text = readFileSync(path.join(SQL_DIR, name), "utf8");
      return { name, text, digest: createHash("sha256").update(`${lastMigration}\n${text}`).digest("hex") };
    });
}

/**
 * The live definitions of the view and functions (store/sql/*.sql, in name order), each file in a
 * transaction with its digest: a file whose digest logpond_sql already holds is not run again, so
 * a start takes no exclusive lock on log_events (CREATE OR REPLACE VIEW's) unless the file
 * changed. The digest covers the last migration's tag too: a migration that drops or replaces a
 * definition is followed by the file's. The caller holds the migration lock: two starts never run
 * a file at once.
 */
async function applySqlFiles(sql: Sql): Promise<void> {
  for (const { name, text, digest } of sqlFileDigests()) {
    await sql.begin(async (tx) => {
      const [applied] = await tx<{ digest: string }[]>`select digest from logpond_sql where name = ${name}`;
      if (applied?.digest === digest) return;
      await tx.unsafe(text); // no parameters: the simple protocol, which runs every statement of the file
      await tx`insert into logpond_sql (name, digest) values (${name}, ${digest})
        on conflict (name) do update set digest = excluded.digest`;
    });
  }
}

function shellQuote(text: string): string {
  return /^[\w./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

export function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@");
}
