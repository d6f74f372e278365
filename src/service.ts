// What a running logpond is made of: each module starts as `start…(config, deps)` and returns a
// Service; server.ts lists them in the order each needs the ones before it, and stop.ts stops that
// list in reverse. A service that can keep logpond from taking events says why in ready() (/ready). A stop has two phases: halt() on every service
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
  /** Why logpond cannot take events now because of this part (for /ready); undefined while it can. */
  ready?(): Promise<string | undefined>;
}

/** /ready's answer: the first reason one of `services` gives, in their order (read when asked). */
export function readiness(services: () => readonly Service[]): () => Promise<string | undefined> {
  return async () => {
    for (const service of services()) {
      const reason = await service.ready?.();
      if (reason !== undefined) return reason;
    }
    return undefined;
  };
}

/** Milliseconds left until `deadline` (none once it passed). */
export function timeLeft(deadline: number): number {
  return Math.max(0, deadline - performance.now());
}

/**
 * A service whose stop is `close()`, waited for `ms` at most and never past the stop's deadline
 * (what is left after that is abandoned: a frozen PostgreSQL must not hold the stop past it).
 */
export function closing(name: string, close: () => Promise<unknown>, ms: number): Service {
  return {
    name,
    async stop(deadline) {
      await within(close(), Math.min(ms, timeLeft(deadline)));
    },
  };
}

/**
 * A background job (periodic.ts) as a service: halted with the rest, then waited for until a second
 * before the deadline (0.1 s at least), so the services stopped after it keep that second.
 */
export function background(name: string, job: { halt(): void; stop(deadline: number): Promise<void> }): Service {
  return {
    name,
    halt: job.halt,
    stop: (deadline) => job.stop(performance.now() + Math.max(100, timeLeft(deadline) - 1_000)),
  };
}
