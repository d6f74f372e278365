// Shared by the bench's parts (run.ts, ceilings.ts, scenarios.ts, report.ts, and extra modules
// such as storage.ts / read.ts): the row and context types, medians, formatting and /proc reads.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type postgres from "postgres";
import { runMigrations } from "../src/store/db";
import { startEmbeddedPostgres } from "../src/store/embedded";
import type { Corpus } from "./payloads";

/** One timed run of a row. Client and server counts differ only for wrk rows (see scenarios.ts). */
export interface Run {
  eventsPerSecond: number;
  requestsPerSecond: number;
  megabytesPerSecond: number;
  p50: number;
  p99: number;
  peakRssMiB: number;
  /** CPU time of the service process per request (µs): steadier than req/s on a loaded machine. */
  serviceCpuUsPerRequest: number;
  generatorCpu: number;
  /** Events the client saw acknowledged (202). */
  acked: number;
  /** Events the service counted as accepted (its metrics); equals `acked` for the JS generator. */
  serverAcked: number;
  stored: number;
  refused: number;
}

export interface Row {
  name: string;
  corpus: Corpus | "—";
  kind: "ceiling" | "scenario" | "extra";
  /** What drove it: wrk, the JS generator, psql, or something else an extra module names. */
  tool: string;
  note: string;
  runs: Run[];
  median: Run;
  /** The ratio shown in the report; `to` names the ceiling row. */
  ratio?: { to: string; value: number };
  /** Set when the row's runs broke conservation (stored ≠ acknowledged). */
  mismatch?: string;
}

/** What an extra bench module gets (see EXTRA_MODULES in run.ts). */
export interface BenchContext {
  /** PostgreSQL URL (embedded, or DATABASE_URL). */
  url: string;
  sql: postgres.Sql;
  /** A temporary directory of this run; removed at the end. */
  work: string;
  quick: boolean;
  runs: number;
  seconds: number;
  corpora: Corpus[];
  /** Path of wrk, or undefined (then wrk rows are skipped). */
  wrk?: string;
  want(name: string): boolean;
  progress(line: string): void;
  /** Processes to SIGTERM when the bench ends, whatever happens. */
  children: { kill(signal?: number | NodeJS.Signals): void }[];
}

export interface BenchModule {
  run(ctx: BenchContext): Promise<Row[]>;
}

export function emptyRun(): Run {
  return {
    eventsPerSecond: 0,
    requestsPerSecond: 0,
    megabytesPerSecond: 0,
    p50: 0,
    p99: 0,
    peakRssMiB: 0,
    serviceCpuUsPerRequest: 0,
    generatorCpu: 0,
    acked: 0,
    serverAcked: 0,
    stored: 0,
    refused: 0,
  };
}

export function median(runs: Run[]): Run {
  const pick = (key: keyof Run) => {
    const sorted = runs.map((r) => r[key]).sort((a, b) => a - b);
    return sorted[sorted.length >> 1]!;
  };
  return Object.fromEntries((Object.keys(runs[0]!) as (keyof Run)[]).map((k) => [k, pick(k)])) as unknown as Run;
}

export const fmt = (n: number, digits = 0) => n.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });

export function progress(line: string) {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

export function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

export function resetPeakRss(pid: number) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5"); // Linux: resets VmHWM to the current RSS
  } catch {}
}

/** User + system CPU seconds of a process, all its threads (Linux /proc, USER_HZ = 100). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/**
 * A temporary folder for a bench's PostgreSQL and files. World-traversable (mkdtemp makes it
 * 0700): run as root, the embedded PostgreSQL runs as `postgres`, and a DATA_DIR below a folder
 * it cannot enter is kept in /var/lib/logpond instead, where removing this folder never reaches
 * it (bench runs left 34 GB of clusters there).
 */
export function benchDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  return dir;
}

/** DATABASE_URL's PostgreSQL, or an embedded one in `work` (stopped by `stop`); migrations applied. */
export async function benchPostgres(work: string): Promise<{ url: string; stop: () => Promise<void> }> {
  let url = process.env.DATABASE_URL;
  let stop = async () => {};
  if (!url) {
    const pg = await startEmbeddedPostgres(path.join(work, "pg"), 0);
    url = pg.url;
    stop = () => pg.stop();
  }
  await runMigrations(url);
  return { url, stop };
}

/**
 * A counter or gauge from /metrics text, summed over its series (ingest counters are per protocol
 * and source: a family with no series yet is 0); undefined when there is no such family.
 */
export function metricSum(text: string, name: string): number | undefined {
  let sum = text.includes(`\n# TYPE ${name} `) ? 0 : undefined;
  for (const match of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) sum = (sum ?? 0) + Number(match[1]);
  return sum;
}

/** CPU seconds of logpond's processes and of the PostgreSQL serving it. */
export interface Cpu {
  /** logpond's processes (all their threads): the one process, or the supervisor and its ingest workers. */
  logpond: number;
  /** The postmaster, its backends and workers, those that exited included (0 when not on this machine). */
  postgres: number;
  /** Each logpond process apart, the first the one started (INGEST_WORKERS > 1: the supervisor, then its workers). */
  processes: { pid: number; seconds: number }[];
}

/** Where a process's CPU went, by kind of thread (threadCpu). */
export type ThreadKind = "main thread" | "worker threads" | "allocator" | "JIT" | "garbage collector" | "other";

/**
 * CPU seconds of each kind of thread of `pid` (Linux /proc/PID/task, USER_HZ = 100), the threads
 * alive now, each with its count: the main thread (HTTP, flushes' hand-offs, the sealer's reads
 * and writes), Bun's Worker threads (seal, merge, flush and decode threads: Bun names them all
 * "Worker"), mimalloc's scavenger (it returns freed memory to the system), JavaScriptCore's JIT
 * and collector threads, and the rest (Bun's I/O pool). How the allocator's share was found
 * (docs/storage.md, "What a read-back costs logpond").
 */
export function threadCpu(pid: number): Map<ThreadKind, { threads: number; seconds: number }> {
  const kinds = new Map<ThreadKind, { threads: number; seconds: number }>();
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {}
  for (const task of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const kind: ThreadKind =
        Number(task) === pid
          ? "main thread"
          : name === "Worker"
            ? "worker threads"
            : name.startsWith("mi-")
              ? "allocator"
              : /JIT|WarmUp/.test(name)
                ? "JIT"
                : /Heap|ollector/.test(name)
                  ? "garbage collector"
                  : "other";
      const entry = kinds.get(kind) ?? { threads: 0, seconds: 0 };
      entry.threads++;
      entry.seconds += (Number(fields[11]) + Number(fields[12])) / 100;
      kinds.set(kind, entry);
    } catch {} // gone in between
  }
  return kinds;
}

/**
 * CPU seconds (user + system, Linux /proc, USER_HZ = 100) of logpond and of PostgreSQL: the tree
 * under `postmaster` (itself included) when given, else the `postgres` processes among logpond's
 * descendants (the embedded PostgreSQL) and theirs; every other descendant of logpond is logpond's
 * (its ingest workers). Each process counts with the CPU of its children already reaped (cutime +
 * cstime), so a backend that exited still counts, in its postmaster's figure.
 */
export function treeCpu(logpond: number, postmaster?: number): Cpu {
  const procs = new Map<number, { parent: number; seconds: number; name: string }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      procs.set(Number(entry), { parent: Number(fields[1]), seconds: ticks / 100, name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) });
    } catch {} // gone in between
  }
  /** The first of pid's ancestors (pid itself included) for which `stop` holds, or undefined. */
  const ancestor = (pid: number, stop: (at: number) => boolean): number | undefined => {
    for (let at: number | undefined = pid; at !== undefined && at > 1; at = procs.get(at)?.parent) if (stop(at)) return at;
    return undefined;
  };
  const isPostgres = postmaster
    ? (pid: number) => ancestor(pid, (at) => at === postmaster) !== undefined
    : (pid: number) =>
        ancestor(pid, (at) => at === logpond || procs.get(at)?.name === "postgres") !== logpond && ancestor(pid, (at) => at === logpond) !== undefined;
  let postgres = 0;
  const processes: Cpu["processes"] = [];
  for (const [pid, proc] of procs) {
    if (isPostgres(pid)) postgres += proc.seconds;
    else if (ancestor(pid, (at) => at === logpond) !== undefined) processes.push({ pid, seconds: proc.seconds });
  }
  processes.sort((a, b) => (a.pid === logpond ? -1 : b.pid === logpond ? 1 : a.pid - b.pid));
  return { logpond: processes.reduce((sum, p) => sum + p.seconds, 0), postgres, processes };
}

/** The postmaster of the server `sql` talks to, when it runs on this machine (a backend's parent). */
export async function postmasterPid(sql: postgres.Sql): Promise<number | undefined> {
  const [row] = await sql`select pg_backend_pid() as pid`;
  try {
    const stat = readFileSync(`/proc/${row!.pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

export const cpuSince = (from: Cpu, to: Cpu): Cpu => ({
  logpond: to.logpond - from.logpond,
  postgres: to.postgres - from.postgres,
  processes: to.processes.map((p) => ({ pid: p.pid, seconds: p.seconds - (from.processes.find((f) => f.pid === p.pid)?.seconds ?? 0) })),
});
export const cpuTotal = (cpu: Cpu) => cpu.logpond + cpu.postgres;
/** µs per event: logpond + PostgreSQL = total. */
export const cpuPerEvent = (cpu: Cpu, events: number) => {
  const us = (seconds: number) => fmt((seconds * 1e6) / Math.max(1, events), 1);
  return `logpond ${us(cpu.logpond)} + PostgreSQL ${us(cpu.postgres)} = ${us(cpu.logpond + cpu.postgres)} µs CPU/event`;
};
