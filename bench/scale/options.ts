// bench/scale.ts's command line, read once: every flag bench/README.md documents, checked, with
// the constants the parts share (how the corpus is drawn, how the reads are timed).

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback;
};

export interface Options {
  events: number;
  /** Shares of the sources, e.g. [90, 9, 1]. */
  split: number[];
  senders: number;
  /** Events per request at most. */
  batch: number;
  /** Keep the NDJSON file and the main run's DATA_DIR. */
  keep: boolean;
  /** On a shared DATABASE_URL: leave the bench's sources (and their events) in place. */
  keepSources: boolean;
  order: "time" | "random";
  /** The main run's SEAL_INTERVAL_MS; the service's default unless given. */
  sealIntervalMs: number;
  /** Runs the load without the sealer first, for the ratio (not on a shared DATABASE_URL). */
  compare: boolean;
  /** logpond's QUERY_TIMEOUT_MS; "" = its default (5 s). Raise it to see what a 503 read would have taken. */
  queryTimeoutMs: string;
  /** PostgreSQL logs each statement slower than this (log_min_duration_statement, with its parameters) to its log in DATA_DIR; 0: none. */
  logSlowMs: number;
  /** The main run's MERGE_INTERVAL_MS (the environment's, else 30 s); 0: no merges, none waited for. */
  mergeIntervalMs: number;
  /** How long to wait after the seal for the merges to have nothing left to do (`--merge-wait-ms`, default 2 h). */
  mergeWaitMs: number;
  /** `--sustain RATE SECONDS`: load at RATE events/s for SECONDS (events = their product; no run without the sealer). */
  sustain?: { rate: number; seconds: number };
}

export function readOptions(): Options {
  const at = argv.indexOf("--sustain");
  const sustain = at >= 0 ? { rate: Number(argv[at + 1]), seconds: Number(argv[at + 2]) } : undefined;
  if (sustain && !(Number.isInteger(sustain.rate) && sustain.rate >= 1 && sustain.seconds >= 10))
    throw new Error("--sustain takes RATE (events/s, a whole number ≥ 1) and SECONDS (≥ 10), e.g. --sustain 3000 600");
  const events = sustain ? Math.round(sustain.rate * sustain.seconds) : Number(option("events", "2000000"));
  const split = option("sources-split", "90,9,1").split(",").map(Number);
  const senders = Number(option("senders", "8"));
  const batch = Number(option("batch", "1000"));
  const order = option("order", "time");
  const sealIntervalMs = Number(option("seal-interval-ms", "60000"));
  if (!Number.isInteger(events) || events < 1000)
    throw new Error(`--events must be a whole number ≥ 1000${sustain ? " (with --sustain: RATE × SECONDS)" : ""}`);
  if (split.length < 1 || split.some((p) => !(p > 0))) throw new Error("--sources-split must be positive numbers, e.g. 90,9,1");
  if (!(senders >= 1) || !(batch >= 1)) throw new Error("--senders and --batch must be ≥ 1");
  if (order !== "time" && order !== "random") throw new Error("--order must be time or random");
  const logSlowMs = Number(option("log-slow-ms", "0"));
  const mergeIntervalMs = Number(process.env.MERGE_INTERVAL_MS ?? "30000");
  const mergeWaitMs = Number(option("merge-wait-ms", "7200000"));
  if (!Number.isInteger(mergeWaitMs) || mergeWaitMs < 0) throw new Error("--merge-wait-ms must be a whole number of ms");
  if (!Number.isInteger(logSlowMs) || logSlowMs < 0) throw new Error("--log-slow-ms must be a whole number of ms (0: none)");
  if (!Number.isInteger(sealIntervalMs) || sealIntervalMs < 100 || sealIntervalMs > 600_000)
    throw new Error("--seal-interval-ms must be 100 to 600000 (config.ts's range)");
  return {
    events,
    split,
    senders,
    batch,
    mergeIntervalMs,
    mergeWaitMs,
    keep: argv.includes("--keep"),
    keepSources: argv.includes("--keep-sources"),
    order,
    sealIntervalMs,
    compare: !argv.includes("--no-compare") && !process.env.DATABASE_URL && !sustain,
    queryTimeoutMs: option("query-timeout-ms", process.env.QUERY_TIMEOUT_MS ?? ""),
    logSlowMs,
    sustain,
  };
}

export const DAY_MS = 86_400_000;
/** SEAL_INTERVAL_MS of the run without the sealer: its first tick comes after any load shorter than this. */
export const NO_SEAL_INTERVAL_MS = 600_000;
