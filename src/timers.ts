// Waiting with a bound: work raced against a timer (timeout, within, deadline), the wait before a
// retry (backoff), and the clock they run on, which a test may replace by one it drives
// (test/unit/flusher-model.test.ts). The timer of a race is stopped as soon as the work settles, so
// no race keeps the process alive; the work itself is never cancelled, only no longer waited for.

export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls `fn` once, `ms` from now; returns what cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export const realClock: Clock = {
  now: () => performance.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

export function sleep(ms: number, clock: Clock = realClock): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}

/** Settles as `work` does, or, when `ms` pass first, with what `late()` returns (or throws). */
export function timeout<T, L>(work: Promise<T>, ms: number, late: () => L, clock: Clock = realClock): Promise<T | L> {
  return new Promise<T | L>((resolve, reject) => {
    const cancel = clock.after(ms, () => {
      try {
        resolve(late());
      } catch (error) {
        reject(error);
      }
    });
    work.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (error) => {
        cancel();
        reject(error);
      },
    );
  });
}

/** Whether the work finished within `ms` (a rejection is passed on). */
export function within(work: Promise<unknown>, ms: number, clock: Clock = realClock): Promise<boolean> {
  return timeout(
    work.then(() => true),
    ms,
    () => false,
    clock,
  );
}

/** The work's value, or `error()` thrown once `ms` pass first. */
export function deadline<T>(work: Promise<T>, ms: number, error: () => Error, clock: Clock = realClock): Promise<T> {
  return timeout(
    work,
    ms,
    () => {
      throw error();
    },
    clock,
  );
}

export interface Backoff {
  firstMs: number;
  maxMs: number;
}

/**
 * postgres.js's `backoff` option (seconds before a connection is tried again, by failed tries in a
 * row). Its own grows to 10–20 s (3^n / 100 s), so after a 10 s outage the management pool stayed
 * unreachable for another 10 s while the flushes already committed (/ready said "Database is
 * unreachable" 6–11 s after the embedded PostgreSQL was back): capped at 0.5–1 s here.
 */
export function reconnectSeconds(retries: number): number {
  return backoff(retries, { firstMs: 50, maxMs: 1_000 }) / 1000;
}

/**
 * The wait before retry number `attempt + 1`: doubling from firstMs up to maxMs, drawn from the
 * upper half of that (jitter, so streams that failed together do not all retry together).
 */
export function backoff(attempt: number, policy: Backoff, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxMs, policy.firstMs * 2 ** attempt);
  return ceiling / 2 + random() * (ceiling / 2);
}

/** Settles as `work` does, or resolves (undefined) once `signal` is aborted, whichever comes first. */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  let onAbort = () => {};
  const aborted = new Promise<undefined>((resolve) => {
    onAbort = () => resolve(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener("abort", onAbort));
}
