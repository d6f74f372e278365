// A PostgreSQL of the tests' own (the embedded binaries, its cluster under .data/<name>) that
// faults can be injected into: restarted fast (SIGINT) or immediately (SIGQUIT, crash recovery
// on the next start), or paused with SIGSTOP (the postmaster and each of its children) and resumed.
// Same port across restarts, so a service pointed at it sees the same DATABASE_URL come back.
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "../../src/store/embedded";

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
      while (isAlive(pg.pid)) await Bun.sleep(10);
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
