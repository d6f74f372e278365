// A background job run every interval (the sealer's passes, retention's sweeps, the flusher's
// turns, the live tail's heartbeats; no other module sets an interval of its own, as
// test/unit/background-jobs.test.ts checks): one run at a time (a run never overlaps the previous
// one, whoever asked for it), the next one an interval after the previous ended (a run longer than
// the interval never piles up; or at a fixed rate, the turns that fall in a run making one more),
// or soon after kick(); a job with no interval runs only when kicked (the database supervisor,
// when its postmaster dies).
// A run that fails is counted and reported (rethrow: as an uncaught exception), and the job goes
// on at its next turn, or (`retry`) after a capped backoff, until a run succeeds. stop() aborts a
// run under way through the AbortSignal the job is given, arms nothing more, and waits for the run
// up to a deadline, so a stop stays bounded whatever the job waits on.
import type { Registry } from "./metrics";
import { type Backoff, backoff, type Clock, realClock, within } from "./timers";

export interface PeriodicOptions<T> {
  /** Milliseconds from the end of one timed run to the start of the next (see `fixedRate`); none: only when kicked. */
  intervalMs?: number;
  /**
   * Turns every `intervalMs` from the start instead, whenever runs end (setInterval's cadence): a
   * turn that comes while a run is under way asks for one more right after it, as kick() does.
   * For a job whose promise is "at most an interval later" (retention: codec/reception.ts).
   */
  fixedRate?: boolean;
  /** The job; `signal` is aborted by stop(): the job ends as soon as it can, throwing or not. */
  run: (signal: AbortSignal) => Promise<T>;
  /** Whether the first run starts at once (else an interval from now). */
  atStart?: boolean;
  /** A failed timed run is tried again after this backoff (growing with each failure in a row), not at its next turn. Not with `fixedRate`. */
  retry?: Backoff;
  /** Told of each failed timed run, once counted (not of a run that failed because of the stop). */
  failed: (error: Error) => void;
  /** The counter of failed timed runs in /metrics (its name ends in `_total`). */
  errors?: { metrics: Registry; name: string; help: string };
  clock?: Clock;
}

export interface Periodic<T> {
  /** Runs soon: at once if nothing runs, else once more right after the timed run under way. */
  kick(): void;
  /** One run of its own, after the one under way; its value, or its error thrown (neither counted nor reported). */
  runNow(): Promise<T>;
  /** Resolves when no run is under way or queued. */
  idle(): Promise<void>;
  /** Aborts the run under way and arms nothing more, without waiting (stop() waits). */
  halt(): void;
  /**
   * Aborts the run under way, arms nothing more, and waits for the run to end, until `deadline`
   * at most (the clock's time, `performance.now()` for the real one; none: as long as it takes).
   */
  stop(deadline?: number): Promise<void>;
  /** Failed timed runs so far. */
  readonly errors: number;
}

export function periodic<T>(options: PeriodicOptions<T>): Periodic<T> {
  const { intervalMs, run, failed, clock = realClock } = options;
  const abort = new AbortController();
  /** The last run queued: each run starts after it, so no two overlap. */
  let last: Promise<unknown> = Promise.resolve();
  /** The timed runs under way (a kick while it runs asks for one more). */
  let timed: Promise<void> | undefined;
  let again = false;
  let disarm: (() => void) | undefined;
  let errors = 0;
  /** Failed timed runs since the last that succeeded. */
  let failures = 0;

  const queue = (): Promise<T> => {
    const next = last.then(() => {
      abort.signal.throwIfAborted();
      return run(abort.signal);
    });
    last = next.catch(() => {});
    return next;
  };
  const arm = () => {
    const ms = failures > 0 && options.retry ? backoff(failures - 1, options.retry) : intervalMs;
    if (!abort.signal.aborted && ms !== undefined) disarm = clock.after(ms, options.fixedRate ? turn : kick);
  };
  const turn = () => {
    arm();
    kick();
  };
  function kick(): void {
    if (abort.signal.aborted) return;
    if (timed) {
      again = true;
      return;
    }
    if (!options.fixedRate) {
      disarm?.();
      disarm = undefined;
    }
    timed = (async () => {
      do {
        again = false;
        try {
          await queue();
          failures = 0;
        } catch (error) {
          if (abort.signal.aborted) return;
          errors++;
          failures++;
          failed(error as Error);
        }
      } while (again && !abort.signal.aborted);
    })().finally(() => {
      timed = undefined;
      if (!options.fixedRate) arm();
    });
  }
  function halt(): void {
    abort.abort();
    disarm?.();
    disarm = undefined;
  }
  /** Until nothing runs or is queued (a run queued meanwhile is waited for too). */
  const settled = async () => {
    for (;;) {
      const [was, wasTimed] = [last, timed];
      await wasTimed;
      await was;
      if (was === last && timed === undefined) return;
    }
  };

  if (options.errors) options.errors.metrics.counter(options.errors.name, options.errors.help, () => errors);
  if (options.fixedRate || !options.atStart) arm();
  if (options.atStart) kick();
  return {
    kick,
    runNow: queue,
    idle: settled,
    halt,
    async stop(deadline) {
      halt();
      if (deadline === undefined) await settled();
      else await within(settled(), Math.max(0, deadline - clock.now()), clock);
    },
    get errors() {
      return errors;
    },
  };
}

/**
 * The `failed` of a job whose run does no I/O and only moves state the process relies on (the
 * flusher's turn, the live tail's heartbeat): a failure there is a fault, so it leaves the promise
 * chain as an uncaught exception, as a plain timer's throw would, and uncaught.ts stops logpond.
 */
export function rethrow(error: Error): void {
  queueMicrotask(() => {
    throw error;
  });
}
