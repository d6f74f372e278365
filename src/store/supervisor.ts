// Keeps the embedded PostgreSQL that logpond started running: when its postmaster exits (killed,
// crashed, stopped by a full disk), a new one is launched on the same port, at once and then with
// capped backoff, until one comes up or logpond stops: a job of periodic.ts's, with no interval,
// kicked by the death and retried by its backoff. The pools reconnect by themselves; the flusher is
// told to retry at once (onRestart). Counted in /metrics, told to /ready and the log. Never
// supervises a server given by DATABASE_URL (nothing of ours to restart); launches nothing once
// stop() has begun, and stop() ends a launch under way. Stopping the postmaster is storage's
// (db.ts's close()).
import type { Registry } from "../metrics";
import { periodic } from "../periodic";
import type { Service } from "../service";
import { realClock, type Clock } from "../timers";
import type { EmbeddedPostgres } from "./embedded";

export interface Supervisor extends Service {
  /** Whether the postmaster runs (it may still be recovering: ping tells). */
  readonly up: boolean;
  /** Postmasters started after one died. */
  readonly restarts: number;
  /** Why the database is down, for /ready; undefined while the postmaster runs. */
  readonly down: string | undefined;
  /** `listener` is called after each restart. */
  onRestart(listener: () => void): void;
  /**
   * No launch from now on; one under way is aborted and waited for, until `deadline` at most
   * (performance.now() ms; none: as long as it takes). Again: at once. The postmaster is left as it is.
   */
  stop(deadline?: number): Promise<void>;
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
  const listeners: (() => void)[] = [];
  let stopping = false;
  /** The current outage: when it began, and the launches tried. */
  let outage = { since: 0, tries: 0 };
  const state = { up: true, restarts: 0, down: undefined as string | undefined };

  const launch = async (signal: AbortSignal) => {
    outage.tries++;
    await pg.relaunch(signal);
    state.restarts++;
    state.up = true;
    state.down = undefined;
    const seconds = ((clock.now() - outage.since) / 1000).toFixed(1);
    log(`postgres: the embedded PostgreSQL is running again (pid ${pg.pid}, ${outage.tries} tries, down ${seconds} s)`);
    watch();
    for (const listener of listeners) listener();
  };
  const job = periodic({
    run: launch,
    retry: RELAUNCH_BACKOFF,
    failed: (error) => {
      const last = error.message.trim().split("\n").at(-1);
      state.down = `The embedded PostgreSQL is down and could not be started again (${outage.tries} tries; last: ${last})`;
      if (outage.tries === 1) log(`postgres: could not restart the embedded PostgreSQL, retrying with backoff: ${error.message}`);
      else if (outage.tries % LOG_EVERY === 0) log(`postgres: still down after ${outage.tries} tries (last: ${last})`);
    },
    clock,
  });
  /** Waits for the current postmaster's end. */
  function watch(): void {
    const pid = pg.pid;
    void pg.exited.then((how) => {
      if (stopping) return;
      state.up = false;
      state.down = `The embedded PostgreSQL (pid ${pid}) ${how}; restarting it`;
      log(`postgres: the embedded PostgreSQL (pid ${pid}) ${how}; restarting it`);
      outage = { since: clock.now(), tries: 0 };
      job.kick();
    });
  }
  watch();

  return {
    name: "database supervisor",
    get up() {
      return state.up;
    },
    get restarts() {
      return state.restarts;
    },
    get down() {
      return state.down;
    },
    onRestart(listener) {
      listeners.push(listener);
    },
    // No halt(): until the buffer is drained, a postmaster that dies is started again (the drain needs it).
    async stop(deadline) {
      stopping = true;
      await job.stop(deadline);
    },
  };
}

/** Its /metrics series (docs/metrics.md). */
export function supervisorSeries(supervisor: Pick<Supervisor, "up" | "restarts">, metrics: Registry): void {
  metrics.gauge("logpond_postgres_up", "1 while the embedded PostgreSQL's postmaster runs, 0 while it is down.", () => (supervisor.up ? 1 : 0));
  metrics.counter("logpond_postgres_restarts_total", "Times the embedded PostgreSQL was started again after its postmaster died.", () => supervisor.restarts);
}
