// bench/scale.ts's logpond: `bun src/main.ts` of its own (test/helpers/service.ts: a temporary
// DATA_DIR, the embedded PostgreSQL unless DATABASE_URL), the bench's sources, and the clean-ups
// that undo it all once, newest first, also on error or Ctrl-C.
import { rmSync } from "node:fs";
import * as path from "node:path";
import postgres from "postgres";
import { createSource, SERVICE_API_TOKEN, spawnService, type Service } from "../../test/helpers/service";
import { benchDir, progress } from "../lib";
import { DAY_MS } from "./options";

export const AUTH = { authorization: `Bearer ${SERVICE_API_TOKEN}` };
/** How long logpond may take to stop after SIGTERM (a drain of a full buffer included) before SIGKILL. */
const STOP_TIMEOUT_MS = 90_000;

export interface Source {
  id: number;
  token: string;
  name: string;
}

/** Steps run once at the end, newest first, each whatever the others did. */
export class Cleanups {
  private steps: (() => Promise<void>)[] = [];
  private running: Promise<void> | undefined;

  push(step: () => Promise<void>): void {
    this.steps.push(step);
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of this.steps.reverse()) await step().catch((error) => console.error(`cleanup: ${(error as Error).message}`));
    })();
    return this.running;
  }
}

export interface ScaleService {
  logpond: Service;
  sql: postgres.Sql;
  sources: Source[];
  /** Stops logpond, removes its folder unless kept; safe to call again from the cleanups. */
  stop: () => Promise<void>;
}

export interface ServiceSettings {
  sealIntervalMs: number;
  /** Keep the DATA_DIR; on DATABASE_URL keep the sources too. */
  keep: boolean;
  keepSources: boolean;
  queryTimeoutMs: string;
  /** PostgreSQL logs statements slower than this to its log (bench/scale/options.ts); 0: none. */
  logSlowMs?: number;
  /** Shares of the sources: one source each. */
  split: number[];
  /** Names the sources (a run's stamp). */
  label: string;
  /** More settings for logpond (bench/workers.ts: INGEST_WORKERS). */
  env?: Record<string, string>;
}

/** A logpond of its own and the sources, its undoing registered in `cleanups`. */
export async function startScaleService(settings: ServiceSettings, cleanups: Cleanups): Promise<ScaleService> {
  const work = benchDir("logpond-bench-scale-");
  const remove = async () => rmSync(work, { recursive: true, force: true });
  if (!settings.keep) cleanups.push(remove);
  progress(
    `starting logpond, SEAL_INTERVAL_MS=${settings.sealIntervalMs}${Object.entries(settings.env ?? {})
      .map(([k, v]) => `, ${k}=${v}`)
      .join("")} (DATA_DIR ${work}/data${process.env.DATABASE_URL ? ", DATABASE_URL" : ", embedded PostgreSQL"})`,
  );
  const env: Record<string, string> = {
    DATA_DIR: path.join(work, "data"),
    // No sweep during the run: it would read the partitions being measured.
    RETENTION_SWEEP_INTERVAL_MS: String(DAY_MS),
    SEAL_INTERVAL_MS: String(settings.sealIntervalMs),
    // Merges every 30 s unless the environment says otherwise: the bench waits for them to settle
    // after the seal (bench/scale.ts), and 5 minutes between passes would be most of a small run.
    MERGE_INTERVAL_MS: process.env.MERGE_INTERVAL_MS ?? "30000",
    LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
    ...settings.env,
  };
  if (settings.queryTimeoutMs) env.QUERY_TIMEOUT_MS = settings.queryTimeoutMs;
  // BENCH_CPU_PROF_DIR: a CPU profile of logpond's main thread (Markdown), written there when it exits.
  const profile = process.env.BENCH_CPU_PROF_DIR;
  const command = profile ? [process.execPath, "--cpu-prof-md", `--cpu-prof-dir=${profile}`, "src/main.ts"] : undefined;
  const logpond = await spawnService(env, { startTimeoutMs: 120_000, outputChars: 100_000, command });
  let stopped: Promise<unknown> | undefined;
  const stopLogpond = async () => {
    stopped ??= logpond.stop(STOP_TIMEOUT_MS).then((exit) => {
      if (exit !== 0) progress(`logpond ended with ${exit}${exit === "SIGKILL" ? ` (no exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM)` : ""}`);
    });
    await stopped;
  };
  cleanups.push(stopLogpond);
  const sql = postgres(logpond.databaseUrl, { max: 4, onnotice: () => {} });
  const end = () => sql.end({ timeout: 5 });
  if (settings.logSlowMs) {
    // A reload reaches every backend, logpond's pooled ones too; the text goes with its parameters.
    await sql.unsafe(`alter system set log_min_duration_statement = ${settings.logSlowMs}`);
    await sql.unsafe("alter system set log_parameter_max_length = -1");
    await sql.unsafe("select pg_reload_conf()");
    progress(`PostgreSQL logs statements slower than ${settings.logSlowMs} ms to ${process.env.DATABASE_URL ? "its log" : `${work}/data/pg/postgres.log`}`);
  }
  cleanups.push(end);
  const sources: Source[] = [];
  for (const [i, share] of settings.split.entries()) {
    const name = `scale ${settings.label} ${i + 1} (${share}%)`;
    sources.push({ ...(await createSource(logpond, name)), name });
  }
  // On a shared DATABASE_URL the events go with their sources (purged in the background).
  if (process.env.DATABASE_URL && !settings.keep && !settings.keepSources)
    cleanups.push(async () => {
      for (const s of sources) await fetch(`${logpond.apiUrl}/api/v1/sources/${s.id}`, { method: "DELETE", headers: AUTH }).then((r) => r.arrayBuffer());
    });
  const stop = async () => {
    await end();
    await stopLogpond();
    if (!settings.keep) await remove();
  };
  return { logpond, sql, sources, stop };
}
