// Opens storage: DATABASE_URL, or the embedded PostgreSQL under DATA_DIR, supervised (restarted
// when it dies: store/supervisor.ts). Runs the committed drizzle migrations under an advisory lock
// (several instances may start at once), then hands out the management pool (the flusher opens its
// own connections, store/copy.ts), so a long COPY never makes a management query wait.
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
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
/** The live SQL view and functions, applied with CREATE OR REPLACE after the migrations. */
const FUNCTIONS_FILE = path.join(import.meta.dir, "sql", "functions.sql");
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
    await runMigrations(url);
  } catch (error) {
    await embedded?.stop();
    throw new Error(`could not prepare the database (${redact(url)}): ${(error as Error).message}`);
  }
  const supervisor = embedded ? superviseEmbedded(embedded, log) : undefined;
  if (supervisor) supervisorSeries(supervisor, metrics);

  const options = { onnotice: () => {}, connection: { application_name: "logpond" }, backoff: reconnectSeconds };
  const sql = postgres(url, { ...options, max: 8 });
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
    // is stopped by the next start.
    async stop(deadline) {
      await within(close(), Math.max(1_000, timeLeft(deadline)));
    },
  };
}

export async function runMigrations(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(drizzle(sql), { migrationsFolder: MIGRATIONS_DIR });
    // The view and functions as they are now (one home: store/sql/functions.sql), under the same lock.
    await sql.unsafe(await Bun.file(FUNCTIONS_FILE).text()).simple();
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function shellQuote(text: string): string {
  return /^[\w./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

export function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@");
}
