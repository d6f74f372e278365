// The process's last line of defence, installed by main.ts: an error nothing handled is printed with
// its stack (to stderr, whatever LOG_LEVEL says) and counted (logpond_uncaught_errors_total{kind}),
// where bun would otherwise print it and exit 1, dropping the buffer and leaving the embedded
// PostgreSQL without its parent.
// - A promise rejected with no handler (kind "rejection"): the work that made it has already ended,
//   and only its outcome was lost (a read's half nobody waited for), so logpond serves on.
// - An exception thrown out of a callback (kind "exception": a timer's, a socket's, a stream's, a
//   signal's) stopped code in the middle of what it was changing, maybe the buffer, the flusher or
//   the driver's state, which later acknowledgements would rely on. So logpond stops as on SIGTERM
//   (ingestion refused, the buffer written, or spilled to disk and replayed at the next start) and
//   exits 1 for its supervisor to start it again.
// Not installed by startLogpond: tests that run logpond in-process keep bun test's own failure on an
// unhandled rejection, which is how such a bug shows there.
import { describeError } from "./errors";
import type { CounterBy, Registry } from "./metrics";

export type UncaughtKind = "rejection" | "exception";

/** Its /metrics series, declared by server.ts (so it shows, at zero, before main.ts installs the handlers). */
export function uncaughtSeries(metrics: Registry): CounterBy {
  return metrics.counterBy(
    "logpond_uncaught_errors_total",
    'Errors nothing handled, by kind: "rejection" (logpond served on), "exception" (logpond stopped as on SIGTERM).',
    "kind",
    ["rejection", "exception"] satisfies UncaughtKind[],
  );
}

export interface GuardOptions {
  /** Counts one (the metric). */
  counted(kind: UncaughtKind): void;
  /** Stops logpond as SIGTERM does, exiting non-zero; called once per exception (the caller ignores a second). */
  stop(why: string): void;
  /** Where the lines go (default: stderr with a timestamp). */
  print?: (line: string) => void;
}

/** Installs the handlers; returns what removes them. */
export function guardProcess(options: GuardOptions): () => void {
  const print = options.print ?? ((line: string) => console.error(`${new Date().toISOString()} ${line}`));
  const onRejection = (reason: unknown) => {
    options.counted("rejection");
    print(`uncaught: a promise was rejected with no handler; serving on: ${describeError(reason)}`);
  };
  const onException = (error: unknown) => {
    options.counted("exception");
    print(`uncaught: an exception escaped a callback; state may be inconsistent, stopping as on SIGTERM: ${describeError(error)}`);
    options.stop("uncaught exception");
  };
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return () => {
    process.off("unhandledRejection", onRejection);
    process.off("uncaughtException", onException);
  };
}
