// The only reader of the environment. Every problem is collected and reported at once;
// the result is frozen, so nothing changes configuration after start-up.

const MIB = 1024 * 1024;

export type AckMode = "buffered" | "durable";

export interface Config {
  /** HOST: the default of both listeners' addresses. */
  readonly host: string;
  /** API_HOST: where the management listener binds (HOST unless set). */
  readonly apiHost: string;
  /** INGEST_HOST: where the ingestion listener binds (HOST unless set). */
  readonly ingestHost: string;
  readonly apiPort: number;
  readonly ingestPort: number;
  readonly apiToken: string | undefined;
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly embeddedPgPort: number;
  readonly ingestAck: AckMode;
  readonly ingestMaxBodyBytes: number;
  readonly ingestMaxDecompressedBytes: number;
  readonly ingestMaxEventBytes: number;
  readonly ingestMaxDepth: number;
  readonly ingestMaxEventsPerRequest: number;
  readonly ingestInflightMaxBytes: number;
  readonly ingestBodyTimeoutMs: number;
  /** How far ahead of its reception an event's time may be before it is redated (codec/reception.ts). */
  readonly ingestMaxFutureMs: number;
  /** What `ingesting_host` shows: PUBLIC_INGEST_URL, or derived from HOST / INGEST_PORT. */
  readonly publicIngestUrl: string | undefined;
  readonly flushIntervalMs: number;
  readonly flushMaxEvents: number;
  readonly flushStreams: number;
  readonly flushTimeoutMs: number;
  readonly durableTimeoutMs: number;
  /** Flushes failing for longer than this: ingestion answers 503 (nothing more rests in memory only). */
  readonly ingestRefuseAfterFlushFailingMs: number;
  readonly ingestRateLimit: number;
  readonly bufferMaxBytes: number;
  readonly bufferMaxEvents: number;
  readonly shutdownTimeoutMs: number;
  readonly retentionSweepIntervalMs: number;
  readonly sealIntervalMs: number;
  /** Seal threads (store/seal-pool.ts); 0: from the core count. */
  readonly sealWorkers: number;
  /** Where blocks are built from: what the flusher committed ("memory", store/staging.ts), or the hot rows read back ("rows"). */
  readonly sealFrom: "memory" | "rows";
  /** Where the flush writes a batch's events until their seal: a jsonb row each ("rows"), or a few compressed chunks per source ("chunks", store/chunks.ts). */
  readonly hotTier: "rows" | "chunks";
  /** SEAL_FROM=memory: text the seal threads' block builders hold, all together, before the biggest are cut early (store/seal-pool.ts). */
  readonly sealBuildersMaxBytes: number;
  /** Merges of small or overlapping blocks (store/merge.ts): a pass every this many ms; 0: none. */
  readonly mergeIntervalMs: number;
  /** Events one merge transaction rewrites at most. */
  readonly mergeMaxEvents: number;
  /** Blocks a run of the current UTC day needs before it is merged. */
  readonly mergeMinBlocks: number;
  readonly logLevel: "info" | "silent";
  readonly queryTimeoutMs: number;
  readonly tailHeartbeatMs: number;
  readonly tailQueueMaxRows: number;
  readonly tailQueueMaxBytes: number;
  /** ROLE: "all" (one logpond: storage, maintenance, both listeners), or "ingest" (a stateless ingest node on DATABASE_URL). */
  readonly role: "all" | "ingest";
  /** INGEST_WORKERS: ingest processes behind the one INGEST_PORT (cluster/supervisor.ts); 0: from the core count. */
  readonly ingestWorkers: number;
  /** Requests on one keep-alive connection before its answer carries `Connection: close` (0: no limit). */
  readonly ingestConnectionMaxRequests: number;
  /** Age of a keep-alive connection past which its next answer carries `Connection: close` (0: no limit). */
  readonly ingestConnectionMaxAgeMs: number;
  /**
   * Set by the supervisor in the ingest processes it starts (cluster/supervisor.ts), never by a
   * user: the worker's index, which names its spill folder, and its listener shares INGEST_PORT.
   */
  readonly workerIndex: number | undefined;
  /**
   * Whether DATA_DIR/spill keeps a reserve for a spill file on a full disk (buffer/reserve.ts):
   * with the embedded PostgreSQL, which shares the disk; in an ingest worker, when its supervisor
   * runs one (it says so in SPILL_RESERVE_VARIABLE).
   */
  readonly spillReserve: boolean;
}

type Env = Record<string, string | undefined>;

/** Defaults live here and nowhere else. */
export const DEFAULTS = {
  HOST: "127.0.0.1",
  API_PORT: 3000,
  INGEST_PORT: 3001,
  DATA_DIR: "./.data",
  EMBEDDED_PG_PORT: 5433,
  INGEST_ACK: "buffered",
  INGEST_MAX_BODY_BYTES: 20 * MIB,
  INGEST_MAX_DECOMPRESSED_BYTES: 100 * MIB,
  INGEST_MAX_EVENT_BYTES: 1 * MIB,
  INGEST_MAX_DEPTH: 64,
  INGEST_MAX_EVENTS_PER_REQUEST: 100_000,
  INGEST_INFLIGHT_MAX_BYTES: 512 * MIB,
  INGEST_BODY_TIMEOUT_MS: 10_000,
  INGEST_MAX_FUTURE_MS: 86_400_000,
  FLUSH_INTERVAL_MS: 200,
  FLUSH_MAX_EVENTS: 20_000,
  FLUSH_STREAMS: 2,
  FLUSH_TIMEOUT_MS: 10_000,
  DURABLE_TIMEOUT_MS: 10_000,
  INGEST_REFUSE_AFTER_FLUSH_FAILING_MS: 10_000,
  INGEST_RATE_LIMIT: 0,
  BUFFER_MAX_BYTES: 256 * MIB,
  BUFFER_MAX_EVENTS: 1_000_000,
  SHUTDOWN_TIMEOUT_MS: 30_000,
  RETENTION_SWEEP_INTERVAL_MS: 3_600_000,
  SEAL_INTERVAL_MS: 60_000,
  SEAL_WORKERS: 0,
  SEAL_FROM: "rows",
  HOT_TIER: "chunks",
  SEAL_BUILDERS_MAX_BYTES: 32 * MIB,
  MERGE_INTERVAL_MS: 300_000,
  MERGE_MAX_EVENTS: 50_000,
  MERGE_MIN_BLOCKS: 16,
  LOG_LEVEL: "info",
  QUERY_TIMEOUT_MS: 5_000,
  TAIL_HEARTBEAT_MS: 10_000,
  TAIL_QUEUE_MAX_ROWS: 10_000,
  TAIL_QUEUE_MAX_BYTES: 8 * MIB,
  ROLE: "all",
  INGEST_WORKERS: 1,
  INGEST_CONNECTION_MAX_REQUESTS: 1_000,
  INGEST_CONNECTION_MAX_AGE_MS: 60_000,
} as const;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];

  const int = (name: keyof typeof DEFAULTS, min: number, max: number): number => {
    const raw = env[name];
    const fallback = DEFAULTS[name] as number;
    if (raw === undefined || raw.trim() === "") return fallback;
    const value = Number(raw.trim());
    if (!Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name}=${JSON.stringify(raw)} must be a whole number from ${min} to ${max}`);
      return fallback;
    }
    return value;
  };
  const oneOf = <T extends string>(name: keyof typeof DEFAULTS, allowed: readonly T[]): T => {
    const raw = env[name]?.trim();
    if (raw === undefined || raw === "") return DEFAULTS[name] as T;
    if (!(allowed as readonly string[]).includes(raw)) {
      problems.push(`${name}=${JSON.stringify(raw)} must be one of: ${allowed.join(", ")}`);
      return DEFAULTS[name] as T;
    }
    return raw as T;
  };
  const text = (name: string): string | undefined => {
    const raw = env[name];
    return raw === undefined || raw.trim() === "" ? undefined : raw.trim();
  };

  const apiToken = text("API_TOKEN");
  if (apiToken !== undefined && apiToken.length < 16) {
    problems.push("API_TOKEN must be at least 16 characters (or unset, to have one generated)");
  }
  const databaseUrl = text("DATABASE_URL");
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push("DATABASE_URL must start with postgres:// or postgresql://");
  }

  const host = text("HOST") ?? DEFAULTS.HOST;
  const config: Config = {
    host,
    // Each listener may have its own address: ingestion facing a network, management on loopback.
    apiHost: text("API_HOST") ?? host,
    ingestHost: text("INGEST_HOST") ?? host,
    apiPort: int("API_PORT", 0, 65535),
    ingestPort: int("INGEST_PORT", 0, 65535),
    apiToken,
    databaseUrl,
    dataDir: text("DATA_DIR") ?? DEFAULTS.DATA_DIR,
    embeddedPgPort: int("EMBEDDED_PG_PORT", 0, 65535),
    ingestAck: oneOf("INGEST_ACK", ["buffered", "durable"] as const),
    ingestMaxBodyBytes: int("INGEST_MAX_BODY_BYTES", 1024, 1024 * MIB),
    ingestMaxDecompressedBytes: int("INGEST_MAX_DECOMPRESSED_BYTES", 1024, 4096 * MIB),
    ingestMaxEventBytes: int("INGEST_MAX_EVENT_BYTES", 64, 256 * MIB),
    ingestMaxDepth: int("INGEST_MAX_DEPTH", 1, 1000),
    ingestMaxEventsPerRequest: int("INGEST_MAX_EVENTS_PER_REQUEST", 1, 100_000_000),
    ingestInflightMaxBytes: int("INGEST_INFLIGHT_MAX_BYTES", MIB, 64 * 1024 * MIB),
    ingestBodyTimeoutMs: int("INGEST_BODY_TIMEOUT_MS", 100, 600_000),
    // Up to logs_retention's own bound (3,652 days).
    ingestMaxFutureMs: int("INGEST_MAX_FUTURE_MS", 1_000, 3652 * 86_400_000),
    publicIngestUrl: publicUrl(text("PUBLIC_INGEST_URL"), problems),
    flushIntervalMs: int("FLUSH_INTERVAL_MS", 1, 1000),
    flushMaxEvents: int("FLUSH_MAX_EVENTS", 1, 1_000_000),
    flushStreams: int("FLUSH_STREAMS", 1, 8),
    flushTimeoutMs: int("FLUSH_TIMEOUT_MS", 100, 600_000),
    durableTimeoutMs: int("DURABLE_TIMEOUT_MS", 100, 600_000),
    ingestRefuseAfterFlushFailingMs: int("INGEST_REFUSE_AFTER_FLUSH_FAILING_MS", 0, 3_600_000),
    ingestRateLimit: int("INGEST_RATE_LIMIT", 0, 1_000_000_000),
    bufferMaxBytes: int("BUFFER_MAX_BYTES", MIB, 64 * 1024 * MIB),
    bufferMaxEvents: int("BUFFER_MAX_EVENTS", 1, 100_000_000),
    shutdownTimeoutMs: int("SHUTDOWN_TIMEOUT_MS", 100, 3_600_000),
    // At most a day: each sweep also creates the daily partitions ahead (retention/sweep.ts).
    retentionSweepIntervalMs: int("RETENTION_SWEEP_INTERVAL_MS", 100, 86_400_000),
    sealIntervalMs: int("SEAL_INTERVAL_MS", 100, 600_000),
    sealWorkers: int("SEAL_WORKERS", 0, 64),
    sealFrom: oneOf("SEAL_FROM", ["memory", "rows"] as const),
    hotTier: oneOf("HOT_TIER", ["rows", "chunks"] as const),
    sealBuildersMaxBytes: int("SEAL_BUILDERS_MAX_BYTES", 64 * 1024, 4 * 1024 * MIB),
    mergeIntervalMs: int("MERGE_INTERVAL_MS", 0, 86_400_000),
    mergeMaxEvents: int("MERGE_MAX_EVENTS", 1_000, 10_000_000),
    mergeMinBlocks: int("MERGE_MIN_BLOCKS", 2, 100_000),
    logLevel: oneOf("LOG_LEVEL", ["info", "silent"] as const),
    queryTimeoutMs: int("QUERY_TIMEOUT_MS", 10, 600_000),
    tailHeartbeatMs: int("TAIL_HEARTBEAT_MS", 100, 15_000),
    tailQueueMaxRows: int("TAIL_QUEUE_MAX_ROWS", 1, 1_000_000),
    tailQueueMaxBytes: int("TAIL_QUEUE_MAX_BYTES", 64 * 1024, 1024 * MIB),
    role: oneOf("ROLE", ["all", "ingest"] as const),
    ingestWorkers: int("INGEST_WORKERS", 0, 256),
    ingestConnectionMaxRequests: int("INGEST_CONNECTION_MAX_REQUESTS", 0, 1_000_000_000),
    ingestConnectionMaxAgeMs: int("INGEST_CONNECTION_MAX_AGE_MS", 0, 86_400_000),
    workerIndex: workerIndex(env[WORKER_INDEX_VARIABLE], problems),
    spillReserve: databaseUrl === undefined || env[SPILL_RESERVE_VARIABLE] === "1",
  };

  if (config.apiPort !== 0 && config.apiPort === config.ingestPort) {
    problems.push(`API_PORT and INGEST_PORT must differ (both are ${config.apiPort})`);
  }
  if (config.ingestMaxEventBytes > config.ingestMaxDecompressedBytes) {
    problems.push("INGEST_MAX_EVENT_BYTES must not exceed INGEST_MAX_DECOMPRESSED_BYTES");
  }

  if (config.durableTimeoutMs <= config.flushIntervalMs) {
    problems.push("DURABLE_TIMEOUT_MS must be longer than FLUSH_INTERVAL_MS (a durable request waits for a flush)");
  }

  if (config.role === "ingest" && config.databaseUrl === undefined) {
    problems.push("ROLE=ingest needs DATABASE_URL: an ingest node writes to the PostgreSQL another logpond (ROLE=all) runs the maintenance of");
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}

/** The variable the supervisor sets in each ingest worker it starts (never a user's setting). */
export const WORKER_INDEX_VARIABLE = "LOGPOND_WORKER_INDEX";
/** Set by the supervisor in its workers when it runs the embedded PostgreSQL (never a user's setting). */
export const SPILL_RESERVE_VARIABLE = "LOGPOND_SPILL_RESERVE";

function workerIndex(raw: string | undefined, problems: string[]): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const index = Number(raw);
  if (Number.isInteger(index) && index >= 1) return index;
  problems.push(`${WORKER_INDEX_VARIABLE}=${JSON.stringify(raw)} must be a whole number from 1 (set by logpond for its own workers)`);
  return undefined;
}

/**
 * INGEST_WORKERS resolved: the setting, or with 0 (auto) half the cores, at most 8 (the embedded
 * PostgreSQL's backends need the rest), and 1 on 2 cores or fewer. Always 1 off Linux, where
 * listeners cannot share a port (SO_REUSEPORT spreads connections on Linux only), and in an ingest
 * process itself.
 */
export function ingestWorkers(config: Pick<Config, "ingestWorkers" | "role" | "workerIndex">, cores: number, platform: string): number {
  if (config.role !== "all" || config.workerIndex !== undefined || platform !== "linux") return 1;
  if (config.ingestWorkers > 0) return config.ingestWorkers;
  if (cores <= 2) return 1;
  return Math.min(8, Math.floor(cores / 2));
}

/** An absolute http(s) URL, kept without a trailing slash (ingesting_host is host[:port][/path]). */
function publicUrl(raw: string | undefined, problems: string[]): string | undefined {
  if (raw === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`PUBLIC_INGEST_URL=${JSON.stringify(raw)} must be an absolute URL such as https://logs.example.com`);
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    problems.push(`PUBLIC_INGEST_URL=${JSON.stringify(raw)} must start with http:// or https://`);
    return undefined;
  }
  // Clients append nothing to ingesting_host: a query, fragment or credentials would be sent as part of the host.
  if (url.search || url.hash || url.username || url.password) {
    problems.push(
      `PUBLIC_INGEST_URL=${JSON.stringify(raw)} must not carry a query (?…), a fragment (#…) or credentials: give scheme, host, port and path only`,
    );
    return undefined;
  }
  return url.href.replace(/\/+$/, "");
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
  }
}
