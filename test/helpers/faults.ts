// A PostgreSQL of the tests' own (the embedded binaries, its cluster under .data/<name>) that
// faults can be injected into: restarted fast (SIGINT) or immediately (SIGQUIT, crash recovery
// on the next start), or paused with SIGSTOP (the postmaster and each of its children) and resumed.
// Same port across restarts, so a service pointed at it sees the same DATABASE_URL come back.
// Below, for a logpond that runs its own PostgreSQL: its postmaster (to kill), a URL to it (to
// count what it stored), and a small disk (a tmpfs, root only) to fill and free.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../../src/store/embedded";
import { waitFor } from "./wait";

const root = path.join(import.meta.dir, "..", "..");

export interface FaultyPostgres {
  readonly url: string;
  restart(mode: "fast" | "immediate", downMs?: number): Promise<void>;
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

export async function startFaultyPostgres(name: string): Promise<FaultyPostgres> {
  const dataDir = path.join(root, ".data", name);
  let pg: EmbeddedPostgres = await startEmbeddedPostgres(dataDir, 0);
  const port = Number(new URL(pg.url).port);
  let paused = false;

  const signalGroup = (signal: NodeJS.Signals) => {
    // Every PostgreSQL child calls setsid(), so no process group holds them all: signal the
    // postmaster and each of its children.
    for (const pid of [pg.pid, ...childrenOf(pg.pid)]) {
      try {
        process.kill(pid, signal);
      } catch {}
    }
  };

  return {
    url: pg.url,
    async restart(mode, downMs = 0) {
      process.kill(pg.pid, mode === "fast" ? "SIGINT" : "SIGQUIT");
      await waitFor(`the postmaster (${pg.pid}) to exit`, () => !isAlive(pg.pid), { intervalMs: 10, timeoutMs: 60_000 });
      if (downMs > 0) await Bun.sleep(downMs);
      pg = await startEmbeddedPostgres(dataDir, port);
    },
    pause() {
      signalGroup("SIGSTOP");
      paused = true;
    },
    resume() {
      signalGroup("SIGCONT");
      paused = false;
    },
    async stop() {
      if (paused) signalGroup("SIGCONT");
      await pg.stop();
    },
  };
}

function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // pid (comm) state ppid ...: the comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === parent) children.push(Number(entry));
    } catch {}
  }
  return children;
}

/** Whether a process with this PID runs (signal 0). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The postmaster of the embedded PostgreSQL a logpond runs for `dataDir` (its cluster is in
 * DATA_DIR/pg/cluster, or where DATA_DIR/pg/WHERE.txt says when root's postgres user cannot reach
 * DATA_DIR): the first line of its postmaster.pid.
 */
export function embeddedPostmaster(dataDir: string): number {
  return Number(readFileSync(path.join(embeddedCluster(dataDir), "postmaster.pid"), "utf8").split("\n")[0]);
}

export function embeddedCluster(dataDir: string): string {
  const where = path.join(dataDir, "pg", "WHERE.txt");
  if (!existsSync(where)) return path.join(dataDir, "pg", "cluster");
  return /is in (\S+?)\/cluster/.exec(readFileSync(where, "utf8"))![1]! + "/cluster";
}

/** A URL to the embedded PostgreSQL of a running logpond: the port from its banner, the password from DATA_DIR. */
export function embeddedUrl(output: string, dataDir: string): string {
  const port = /embedded PostgreSQL \S+ at postgres:\/\/\S+@127\.0\.0\.1:(\d+)\//.exec(output)![1]!;
  const password = readFileSync(path.join(dataDir, "pg-password"), "utf8").trim();
  return `postgres://logpond:${encodeURIComponent(password)}@127.0.0.1:${port}/logpond`;
}

/**
 * Why a tmpfs cannot be mounted here (not root, or a container that forbids it), or undefined
 * when it can: tried once on a throwaway folder.
 */
export function tmpfsRefusal(): string | undefined {
  if (process.platform !== "linux") return `tmpfs is Linux's (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "mounting a tmpfs needs root";
  const probe = mkdtempSync(path.join(tmpdir(), "logpond-tmpfs-probe-"));
  try {
    const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { encoding: "utf8" });
    if (mounted.status !== 0) return `mount -t tmpfs failed: ${(mounted.stderr || mounted.error?.message || "").trim()}`;
    spawnSync("umount", [probe]);
    return undefined;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/** A small filesystem of its own (tmpfs, root only): a disk that fills up. */
export interface SmallDisk {
  readonly dir: string;
  /** Writes a ballast file until the filesystem is full (ENOSPC); returns its bytes. */
  fill(): number;
  /** Removes the ballast: the space is back. */
  free(): void;
  unmount(): void;
}

export function mountSmallDisk(bytes: number): SmallDisk {
  const dir = mkdtempSync(path.join(tmpdir(), "logpond-disk-"));
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { encoding: "utf8" });
  if (mounted.status !== 0) throw new Error(`mount -t tmpfs failed: ${mounted.stderr}`);
  const ballast = path.join(dir, "ballast");
  return {
    dir,
    fill() {
      const fd = openSync(ballast, "a");
      let written = 0;
      try {
        // Big writes, then page-sized ones for what is left.
        for (const size of [1 << 20, 4096]) {
          const block = Buffer.alloc(size, 0x5a);
          try {
            for (;;) written += writeSync(fd, block);
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
          }
        }
      } finally {
        closeSync(fd);
      }
      return written;
    },
    free() {
      rmSync(ballast, { force: true });
    },
    unmount() {
      spawnSync("umount", ["-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
