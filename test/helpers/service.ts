// logpond as users run it, for a test or a bench: `bun src/main.ts` (or another launcher, such as
// `npm start`) in its own process, its banner parsed for the URLs and the database, its output
// collected for assertions, and a stop by PID: SIGTERM, then SIGKILL past a deadline (and the
// embedded PostgreSQL's postmaster, which a SIGKILLed logpond leaves running).
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { embeddedCluster, embeddedPostmaster } from "./faults";
import { waitFor } from "./wait";

const ROOT = path.join(import.meta.dir, "..", "..");
export const MAIN = path.join(ROOT, "src", "main.ts");
export const SERVICE_API_TOKEN = "service-token-0123456789abcdef";

export interface SpawnOptions {
  /** What to run (default `bun src/main.ts` of this tree). */
  command?: string[];
  /** How long the banner may take (default 60 s; an embedded PostgreSQL's first start is most of it). */
  startTimeoutMs?: number;
  /** The output kept for `output()`: its last this many characters (default 4 MiB; a long bench logs a line per flush). */
  outputChars?: number;
}

export interface Service {
  proc: ReturnType<typeof Bun.spawn>;
  apiUrl: string;
  ingestUrl: string;
  /** DATABASE_URL, or the embedded PostgreSQL's URL with its password (the banner redacts it). */
  databaseUrl: string;
  /** DATA_DIR as given in the environment (undefined: logpond's default). */
  dataDir?: string;
  output: () => string;
  /**
   * SIGTERM, then SIGKILL when logpond has not exited `timeoutMs` later (then also the embedded
   * postmaster, by the PID in its data folder). The exit code, or the signal that ended it.
   */
  stop: (timeoutMs?: number) => Promise<number | NodeJS.Signals>;
}

/** Spawns logpond and waits for its whole banner (it ends with the acknowledgement line). */
export async function spawnService(env: Record<string, string>, options: SpawnOptions = {}): Promise<Service> {
  const { command = [process.execPath, MAIN], startTimeoutMs = 60_000, outputChars = 4 << 20 } = options;
  const fullEnv = { API_PORT: "0", INGEST_PORT: "0", API_TOKEN: SERVICE_API_TOKEN, EMBEDDED_PG_PORT: "0", ...env };
  const proc = Bun.spawn(command, {
    cwd: ROOT,
    // LOG_LEVEL: callers read the log lines (a LOG_LEVEL=silent in the shell must not hide them).
    env: { ...process.env, LOG_LEVEL: "info", ...fullEnv },
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const part of stream) {
      output += decoder.decode(part, { stream: true });
      if (output.length > 2 * outputChars) output = output.slice(-outputChars);
    }
  };
  const collected = Promise.all([collect(proc.stdout as ReadableStream<Uint8Array>), collect(proc.stderr as ReadableStream<Uint8Array>)]);
  const banner = () => /^ {2}acknowledgement /m.test(output);
  const started = await waitFor("logpond's banner", () => proc.exitCode !== null || banner(), { timeoutMs: startTimeoutMs }).then(banner, () => false);
  if (!started) {
    proc.kill("SIGKILL");
    // The output to its end (a launcher's child may hold the pipes open: then what came within a second).
    await Promise.race([collected, Bun.sleep(1000)]);
    throw new Error(`logpond did not start (${proc.exitCode === null ? `no banner within ${startTimeoutMs} ms` : `exit ${proc.exitCode}`}):\n${output}`);
  }
  // An ingest node (ROLE=ingest) has no management listener: "" then.
  const apiUrl = /management API\s+(http\S+)\/api\/v1\/sources/.exec(output)?.[1] ?? "";
  const ingestUrl = /ingestion\s+(http\S+)\//.exec(output)![1]!;
  const given = (name: string) => (name in fullEnv ? (fullEnv as Record<string, string>)[name] : process.env[name]) || undefined;
  const dataDir = given("DATA_DIR");
  const external = given("DATABASE_URL");
  const databaseUrl = external ?? embeddedDatabaseUrl(output, dataDir);

  const stop = async (timeoutMs = 60_000) => {
    proc.kill("SIGTERM");
    let timer: Timer | undefined;
    const exited = await Promise.race([proc.exited.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]);
    clearTimeout(timer); // a pending timer would keep a bench alive after logpond stopped
    if (!exited) {
      proc.kill("SIGKILL");
      await proc.exited;
      if (dataDir && !external) await stopPostmaster(dataDir);
    }
    return proc.signalCode ?? proc.exitCode!;
  };
  return { proc, apiUrl, ingestUrl, databaseUrl, dataDir, output: () => output, stop };
}

/** The banner's embedded PostgreSQL URL with the password from DATA_DIR/pg-password ("" when either is missing). */
function embeddedDatabaseUrl(output: string, dataDir: string | undefined): string {
  const redacted = /database\s+embedded PostgreSQL \S+ at (postgres:\/\/\S+)/.exec(output)?.[1];
  const passwordFile = dataDir && path.join(dataDir, "pg-password");
  if (!redacted || !passwordFile || !existsSync(passwordFile)) return "";
  const password = readFileSync(passwordFile, "utf8").trim();
  return redacted.replace(":***@", `:${encodeURIComponent(password)}@`);
}

/** PostgreSQL's fast shutdown (SIGINT) of the postmaster a SIGKILLed logpond left in `dataDir`. */
async function stopPostmaster(dataDir: string): Promise<void> {
  if (!existsSync(path.join(embeddedCluster(dataDir), "postmaster.pid"))) return;
  const pid = embeddedPostmaster(dataDir);
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(pid, "SIGINT");
    await waitFor(`the postmaster (${pid}) to stop`, () => !alive(), { intervalMs: 50 });
  } catch {}
}

/** Creates a source through the service's API; returns its id and token. */
export async function createSource(service: Pick<Service, "apiUrl">, name: string, apiToken = SERVICE_API_TOKEN): Promise<{ id: number; token: string }> {
  const response = await fetch(`${service.apiUrl}/api/v1/sources`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiToken}` },
    body: JSON.stringify({ name }),
  });
  if (response.status !== 201) throw new Error(`create source: ${response.status} ${await response.text()}`);
  const { data } = (await response.json()) as { data: { id: string; attributes: { token: string } } };
  return { id: Number(data.id), token: data.attributes.token };
}
