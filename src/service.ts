// What a running logpond is made of: server.ts lists its services in the order each needs the ones
// before it, and stop.ts stops that list in reverse. A stop has two phases: halt() on every service
// first (ingestion refuses, background jobs are aborted), then stop(deadline) on each in turn. The
// deadline is the whole stop's (SHUTDOWN_TIMEOUT_MS from its start, on performance.now()): each
// service takes its own share of what is left and leaves the rest to those stopped after it.
import { within } from "./timers";

export interface Service {
  /** Which part it is (for a test or a log line). */
  readonly name: string;
  /** The first phase, on every service before any stop() is waited for: new work refused, background work aborted. */
  halt?(): void;
  /** Stopped by `deadline` (performance.now() ms) or its own share of it, whatever the other side does. */
  stop(deadline: number): Promise<void>;
}

/** Milliseconds left until `deadline` (none once it passed). */
export function timeLeft(deadline: number): number {
  return Math.max(0, deadline - performance.now());
}

/** A service whose stop is `close()`, waited for `ms` at most (what is left after that is abandoned). */
export function closing(name: string, close: () => Promise<unknown>, ms: number): Service {
  return {
    name,
    async stop() {
      await within(close(), ms);
    },
  };
}
