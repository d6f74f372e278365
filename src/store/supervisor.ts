// Keeps the embedded PostgreSQL that logpond started running: when its postmaster exits (killed,
// crashed, stopped by a full disk), a new one is launched on the same port, at once and then with
// capped backoff, until one comes up or logpond stops. The pools reconnect by themselves; the
// flusher is told to retry at once (onRestart). Counted in /metrics, told to /ready and the log.
// Never supervises a server given by DATABASE_URL (nothing of ours to restart); launches nothing
// once stop() has begun, and stop() ends a launch under way.
import type { Registry } from "../metrics";
import { backoff, realClock, type Clock } from "../timers";
import type { EmbeddedPostgres } from "./embedded";

export interface Supervisor {
  /** Whether the postmaster runs (it may still be recovering: ping tells). */
  readonly up: boolean;
  /** Postmasters started after one died. */
  readonly restarts: number;
  /** Why the database is down, for /ready; undefined while the postmaster runs. */
  readonly down: string | undefined;
  /** `listener` is called after each restart. */
  onRestart(listener: () => void): void;
  /** No launch from now on (one under way is stopped); then the postmaster is stopped. */
  stop(): Promise<void>;
}

/**
 * Launches once the dead postmaster's children are gone (embedded.ts waits for them), then after
 * 0.1–0.2 s, doubling up to 1–2 s: a full disk fails every launch until space is freed, so the cap
 * is about how soon logpond is back once it is (a 2.5–5 s cap made it 11.5 s in one run of
 * bench/storage-down.ts disk-full --kill), and a failed launch costs one short-lived postmaster.
 */
const RELAUNCH_BACKOFF = { firstMs: 200, maxMs: 2_000 };
/** A failed launch is logged in full the first time, then once every this many. */
const LOG_EVERY = 10;

export function superviseEmbedded(pg: EmbeddedPostgres, log: (line: string) => void, clock: Clock = realClock): Supervisor {
  const supervisor = new PostmasterSupervisor(pg, log, clock);
  supervisor.watch();
  return supervisor;
}

/** Its /metrics series (docs/metrics.md). */
export function supervisorSeries(supervisor: Supervisor, metrics: Registry): void {
  metrics.gauge("logpond_postgres_up", "1 while the embedded PostgreSQL's postmaster runs, 0 while it is down.", () => (supervisor.up ? 1 : 0));
  metrics.counter("logpond_postgres_restarts_total", "Times the embedded PostgreSQL was started again after its postmaster died.", () => supervisor.restarts);
}

class PostmasterSupervisor implements Supervisor {
  up = true;
  restarts = 0;
  down: string | undefined;
  private stopping = false;
  private readonly abort = new AbortController();
  private restarting: Promise<void> | undefined;
  private cancelWait: (() => void) | undefined;
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly pg: EmbeddedPostgres,
    private readonly log: (line: string) => void,
    private readonly clock: Clock,
  ) {}

  /** Waits for the current postmaster's end. */
  watch(): void {
    const pid = this.pg.pid;
    void this.pg.exited.then((how) => {
      if (this.stopping) return;
      this.up = false;
      this.down = `The embedded PostgreSQL (pid ${pid}) ${how}; restarting it`;
      this.log(`postgres: the embedded PostgreSQL (pid ${pid}) ${how}; restarting it`);
      this.restarting = this.restart(this.clock.now());
    });
  }

  onRestart(listener: () => void): void {
    this.listeners.push(listener);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort();
    this.cancelWait?.();
    await this.restarting;
    await this.pg.stop();
  }

  private async restart(since: number): Promise<void> {
    for (let attempt = 0; !this.stopping; attempt++) {
      if (attempt > 0) await this.wait(backoff(attempt - 1, RELAUNCH_BACKOFF));
      if (this.stopping) return;
      try {
        await this.pg.relaunch(this.abort.signal);
      } catch (error) {
        if (this.stopping) return;
        const message = (error as Error).message;
        const last = message.trim().split("\n").at(-1);
        this.down = `The embedded PostgreSQL is down and could not be started again (${attempt + 1} tries; last: ${last})`;
        if (attempt === 0) this.log(`postgres: could not restart the embedded PostgreSQL, retrying with backoff: ${message}`);
        else if ((attempt + 1) % LOG_EVERY === 0) this.log(`postgres: still down after ${attempt + 1} tries (last: ${last})`);
        continue;
      }
      this.restarts++;
      this.up = true;
      this.down = undefined;
      const seconds = ((this.clock.now() - since) / 1000).toFixed(1);
      this.log(`postgres: the embedded PostgreSQL is running again (pid ${this.pg.pid}, ${attempt + 1} tries, down ${seconds} s)`);
      this.watch();
      for (const listener of this.listeners) listener();
      return;
    }
  }

  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const cancel = this.clock.after(ms, resolve);
      this.cancelWait = () => {
        cancel();
        resolve();
      };
    });
  }
}
