// Counters and histograms for /metrics (Prometheus text format, metrics/exposition.ts). Bumped on
// the hot path once per request or per batch, never per event, with no allocation but a request's
// tally; gauges and process_* are read when scraped. Ingest series carry `protocol` (PROTOCOLS) and
// `source_id` ("" when refused before the token was known); a deleted source's series are dropped
// at the next scrape, so the label's cardinality is the number of sources that exist.
import { REASONS, type Reason } from "./errors";
import { Exposition, labels } from "./metrics/exposition";
import { BUCKETS, Histogram } from "./metrics/histogram";
import { writeProcessMetrics } from "./metrics/process";

/**
 * The ingest protocols, the `protocol` label's values: `better_stack` is `POST /` (Better Stack's
 * ingest protocol, whatever the body's format), `otlp` is `POST /v1/logs`, `loki` is
 * `POST /loki/api/v1/push`. Every one is rendered from the start (zero until used).
 */
export const PROTOCOLS = ["better_stack", "otlp", "loki"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** The timed query routes, the `route` label's values (the live-tail stream is no latency: not timed). */
export const QUERY_ROUTES = [
  "/api/v2/query/live-tail",
  "/api/v2/query/histogram",
  "/api/v2/query/dead-letters",
  "/api/v2/query/context",
  "/api/v2/query/aggregate",
] as const;
export type QueryRoute = (typeof QUERY_ROUTES)[number];

/** `source_id` of a request refused before its source was known (no token, or an unknown one). */
export const NO_SOURCE = 0;

const REASON_NAMES = Object.keys(REASONS) as Reason[];
const REASON_INDEX = Object.fromEntries(REASON_NAMES.map((reason, i) => [reason, i])) as Record<Reason, number>;

/** One source's ingest counters for one protocol. */
class SourceSeries {
  requests = 0;
  events = 0;
  bytes = 0;
  droppedPaused = 0;
  /** Events stored with the reception time as their dt (codec/reception.ts), by reason. */
  tooOld = 0;
  tooFarAhead = 0;
  /** Refused requests by REASON_INDEX; made at the first refusal. */
  rejected: Float64Array | undefined;
  constructor(readonly labels: string) {}
}

/**
 * One ingest request's tally, made when it arrives (`metrics.ingestRequest(protocol)`): set
 * `sourceId` once the token is known, then end it with `accepted` or `reject`. It counts the
 * request once and times it once, whatever path it took; a second ending is ignored.
 */
export class IngestRequest {
  sourceId = NO_SOURCE;
  private readonly started = performance.now();
  private done = false;
  private tooOld = 0;
  private tooFarAhead = 0;

  constructor(
    private readonly metrics: Metrics,
    readonly protocol: Protocol,
  ) {}

  /** Of its events, those redated (codec/reception.ts), by reason: counted if it is accepted and stored. */
  redated(tooOld: number, tooFarAhead: number): void {
    this.tooOld = tooOld;
    this.tooFarAhead = tooFarAhead;
  }

  /** Answered with success: `events` taken (or dropped, for a paused source), `bytes` of body as sent. */
  accepted(events: number, bytes: number, droppedPaused = false): void {
    if (this.done) return;
    this.done = true;
    this.metrics.ingestAccepted(this.protocol, this.sourceId, events, bytes, droppedPaused);
    if (!droppedPaused && this.tooOld + this.tooFarAhead > 0) this.metrics.ingestRedated(this.protocol, this.sourceId, this.tooOld, this.tooFarAhead);
    this.metrics.ingestSeconds(this.protocol, (performance.now() - this.started) / 1000);
  }

  /** Refused, for `reason` (errors.ts's table, the `reason` label). */
  reject(reason: Reason): void {
    if (this.done) return;
    this.done = true;
    this.metrics.reject(reason, this.protocol, this.sourceId);
    this.metrics.ingestSeconds(this.protocol, (performance.now() - this.started) / 1000);
  }
}

export interface RenderOptions {
  /** Counters others own, read at scrape (name → help and value; names end in `_total`). */
  counters?: Record<string, { help: string; value: number }>;
  /** Whether a source still exists: the series of one that does not are dropped. */
  sourceExists?: (id: number) => boolean;
}

/** What a module registers its own /metrics series with, read at scrape (see Metrics.gauge). */
export interface Registry {
  /** A gauge read at each scrape. */
  gauge(name: string, help: string, read: () => number): void;
  /** A counter another module owns, read at each scrape (its name ends in `_total`). */
  counter(name: string, help: string, read: () => number): void;
  /** Whether a source still exists: the series of one that does not are dropped at a scrape. */
  sourcesFrom(exists: (id: number) => boolean): void;
}

type Read = { help: string; read: () => number };

export class Metrics implements Registry {
  flushErrors = 0;
  flushedEvents = 0;
  eventsDeadLettered = 0;
  eventsLost = 0;
  isolationSplits = 0;
  durableTimeouts = 0;
  retentionSweeps = 0;
  retentionRowsRemoved = 0;
  retentionBytesRemoved = 0;
  retentionDeadLettersRemoved = 0;
  retentionPartitionsDropped = 0;
  retentionLastSeconds = 0;
  /** Errors nothing handled, caught by the process-wide handlers (uncaught.ts, installed by main.ts). */
  readonly uncaughtErrors = { rejection: 0, exception: 0 };
  readonly flushReasons = new Map<string, number>();
  readonly flushDuration = new Histogram(BUCKETS.flush);
  readonly sweepDuration = new Histogram(BUCKETS.sweep);
  private readonly ingestDuration = Object.fromEntries(PROTOCOLS.map((p) => [p, new Histogram(BUCKETS.ingest)])) as Record<Protocol, Histogram>;
  private readonly queryDuration = Object.fromEntries(QUERY_ROUTES.map((r) => [r, new Histogram(BUCKETS.query)])) as Record<QueryRoute, Histogram>;
  /** protocol → source id → counters. */
  private readonly sources = Object.fromEntries(PROTOCOLS.map((p) => [p, new Map<number, SourceSeries>()])) as Record<Protocol, Map<number, SourceSeries>>;
  /** Series other modules registered, in the order they did. */
  private readonly gauges = new Map<string, Read>();
  private readonly counters = new Map<string, Read>();
  private sourceExists: ((id: number) => boolean) | undefined;

  gauge(name: string, help: string, read: () => number): void {
    this.gauges.set(name, { help, read });
  }

  counter(name: string, help: string, read: () => number): void {
    this.counters.set(name, { help, read });
  }

  sourcesFrom(exists: (id: number) => boolean): void {
    this.sourceExists = exists;
  }

  /** Starts an ingest request's tally (see IngestRequest). */
  ingestRequest(protocol: Protocol): IngestRequest {
    return new IngestRequest(this, protocol);
  }

  /** One accepted ingest request. Prefer `ingestRequest(protocol)`, which times it too. */
  ingestAccepted(protocol: Protocol, sourceId: number, events: number, bytes: number, droppedPaused = false): void {
    const series = this.series(protocol, sourceId);
    series.requests++;
    series.events += events;
    series.bytes += bytes;
    if (droppedPaused) series.droppedPaused += events;
  }

  /** An accepted request's events stored with the reception time as their dt, by reason. */
  ingestRedated(protocol: Protocol, sourceId: number, tooOld: number, tooFarAhead: number): void {
    const series = this.series(protocol, sourceId);
    series.tooOld += tooOld;
    series.tooFarAhead += tooFarAhead;
  }

  /** One refused ingest request. Prefer `ingestRequest(protocol)`, which times it too. */
  reject(reason: Reason, protocol: Protocol, sourceId: number): void {
    const series = this.series(protocol, sourceId);
    (series.rejected ??= new Float64Array(REASON_NAMES.length))[REASON_INDEX[reason]]!++;
  }

  /** One ingest request's time to its answer, whatever the answer. */
  ingestSeconds(protocol: Protocol, seconds: number): void {
    this.ingestDuration[protocol].observe(seconds);
  }

  /** One query request's time to its answer, whatever the answer. */
  querySeconds(route: QueryRoute, seconds: number): void {
    this.queryDuration[route].observe(seconds);
  }

  flushed(reason: string, events: number, seconds: number): void {
    this.flushedEvents += events;
    this.flushDuration.observe(seconds);
    this.flushReasons.set(reason, (this.flushReasons.get(reason) ?? 0) + 1);
  }

  retentionSwept(result: { rowsRemoved: number; bytesRemoved: number; deadLettersRemoved: number; partitionsDropped: number }, seconds: number): void {
    this.retentionSweeps++;
    this.retentionRowsRemoved += result.rowsRemoved;
    this.retentionBytesRemoved += result.bytesRemoved;
    this.retentionDeadLettersRemoved += result.deadLettersRemoved;
    this.retentionPartitionsDropped += result.partitionsDropped;
    this.sweepDuration.observe(seconds);
    this.retentionLastSeconds = seconds;
  }

  /** Totals over every protocol and source still counted (for tests and benches). */
  get requestsAccepted(): number {
    return this.total((series) => series.requests);
  }
  get eventsReceived(): number {
    return this.total((series) => series.events);
  }
  get bytesReceived(): number {
    return this.total((series) => series.bytes);
  }
  get eventsDroppedPaused(): number {
    return this.total((series) => series.droppedPaused);
  }

  /** The exposition: this registry's series, the registered ones, and (for tests) `gauges` and `options`' counters. */
  render(gauges: Record<string, { help: string; value: number }> = {}, options: RenderOptions = {}): string {
    const sourceExists = options.sourceExists ?? this.sourceExists;
    if (sourceExists) this.forgetDeleted(sourceExists);
    const out = new Exposition();
    const perSource = (name: string, help: string, value: (series: SourceSeries) => number) => {
      out.family(name, "counter", help);
      for (const protocol of PROTOCOLS)
        for (const series of this.sources[protocol].values()) if (series.requests > 0) out.sample(name, series.labels, value(series));
    };
    const single = (name: string, type: "counter" | "gauge", help: string, value: number) => out.family(name, type, help).sample(name, "", value);

    perSource("logpond_ingest_requests_accepted_total", "Ingestion requests answered with success, by protocol and source.", (s) => s.requests);
    perSource("logpond_ingest_events_received_total", "Events accepted (buffered, or dropped as paused), by protocol and source.", (s) => s.events);
    perSource("logpond_ingest_bytes_received_total", "Request body bytes of accepted requests, as sent, by protocol and source.", (s) => s.bytes);
    perSource("logpond_ingest_events_dropped_paused_total", "Events accepted for a paused source and dropped, by protocol and source.", (s) => s.droppedPaused);
    out.family(
      "logpond_ingest_events_redated_total",
      "counter",
      "Events accepted with a time retention would delete at once (too_old) or too far ahead (too_far_ahead), stored with the reception time as dt, by protocol, source and reason.",
    );
    for (const protocol of PROTOCOLS) {
      for (const series of this.sources[protocol].values()) {
        if (series.tooOld > 0) out.sample("logpond_ingest_events_redated_total", `${series.labels},${labels({ reason: "too_old" })}`, series.tooOld);
        if (series.tooFarAhead > 0)
          out.sample("logpond_ingest_events_redated_total", `${series.labels},${labels({ reason: "too_far_ahead" })}`, series.tooFarAhead);
      }
    }
    out.family(
      "logpond_ingest_requests_rejected_total",
      "counter",
      'Ingestion requests refused, by protocol, source ("" before the token was known) and reason.',
    );
    for (const protocol of PROTOCOLS) {
      for (const series of this.sources[protocol].values()) {
        const rejected = series.rejected;
        if (rejected)
          for (let i = 0; i < rejected.length; i++)
            if (rejected[i]! > 0)
              out.sample("logpond_ingest_requests_rejected_total", `${series.labels},${labels({ reason: REASON_NAMES[i]! })}`, rejected[i]!);
      }
    }
    out.family(
      "logpond_ingest_request_duration_seconds",
      "histogram",
      "Ingestion requests' time from the handler's start (headers read) to the answer (any answer), by protocol.",
    );
    for (const protocol of PROTOCOLS) out.histogram("logpond_ingest_request_duration_seconds", labels({ protocol }), this.ingestDuration[protocol]);
    out.family("logpond_query_request_duration_seconds", "histogram", "Query API requests' time from the token check to the answer (any answer), by route.");
    for (const route of QUERY_ROUTES) out.histogram("logpond_query_request_duration_seconds", labels({ route }), this.queryDuration[route]);

    out.family("logpond_flushes_total", "counter", "Committed flushes, by trigger.");
    for (const [reason, n] of this.flushReasons) out.sample("logpond_flushes_total", labels({ reason }), n);
    single("logpond_flush_events_total", "counter", "Events written to PostgreSQL.", this.flushedEvents);
    out
      .family("logpond_flush_duration_seconds", "histogram", "Committed flushes' duration, retries included.")
      .histogram("logpond_flush_duration_seconds", "", this.flushDuration);
    single("logpond_flush_errors_total", "counter", "Flush attempts that failed (and were retried).", this.flushErrors);
    single("logpond_dead_letter_events_total", "counter", "Events PostgreSQL refused for their data, kept in dead_letters.", this.eventsDeadLettered);
    single("logpond_events_lost_total", "counter", "Events refused by PostgreSQL whose dead letter was refused too (logged in full).", this.eventsLost);
    single("logpond_flush_isolation_splits_total", "counter", "Refused batches split in two to isolate bad events.", this.isolationSplits);
    single("logpond_durable_timeouts_total", "counter", "Durable requests not committed within DURABLE_TIMEOUT_MS.", this.durableTimeouts);
    single("logpond_retention_sweeps_total", "counter", "Retention sweeps completed.", this.retentionSweeps);
    single(
      "logpond_retention_rows_removed_total",
      "counter",
      "Events removed by retention and deleted-source purges (dropped partitions: PostgreSQL's row estimate).",
      this.retentionRowsRemoved,
    );
    single(
      "logpond_retention_bytes_removed_total",
      "counter",
      "Bytes removed: dropped partitions' size on disk, deleted rows' estimated stored size (their partition's average); a deleted row's space is reused by later rows of that partition only, and returns to the disk when the partition is dropped.",
      this.retentionBytesRemoved,
    );
    single(
      "logpond_retention_dead_letters_removed_total",
      "counter",
      "Dead letters removed by retention and deleted-source purges.",
      this.retentionDeadLettersRemoved,
    );
    single(
      "logpond_retention_partitions_dropped_total",
      "counter",
      "Daily partitions dropped because every source had outlived them.",
      this.retentionPartitionsDropped,
    );
    out
      .family("logpond_retention_sweep_duration_seconds", "histogram", "Completed retention sweeps' duration.")
      .histogram("logpond_retention_sweep_duration_seconds", "", this.sweepDuration);
    single("logpond_retention_last_sweep_duration_seconds", "gauge", "Duration of the last completed retention sweep.", this.retentionLastSeconds);
    out.family(
      "logpond_uncaught_errors_total",
      "counter",
      'Errors nothing handled, by kind: "rejection" (logpond served on), "exception" (logpond stopped as on SIGTERM).',
    );
    for (const [kind, n] of Object.entries(this.uncaughtErrors)) out.sample("logpond_uncaught_errors_total", labels({ kind }), n);
    for (const [name, { help, read }] of this.counters) single(name, "counter", help, read());
    for (const [name, { help, value }] of Object.entries(options.counters ?? {})) single(name, "counter", help, value);
    for (const [name, { help, read }] of this.gauges) single(name, "gauge", help, read());
    for (const [name, { help, value }] of Object.entries(gauges)) single(name, "gauge", help, value);
    writeProcessMetrics(out);
    return out.text();
  }

  private series(protocol: Protocol, sourceId: number): SourceSeries {
    const bySource = this.sources[protocol];
    let series = bySource.get(sourceId);
    if (series === undefined) {
      series = new SourceSeries(labels({ protocol, source_id: sourceId === NO_SOURCE ? "" : sourceId }));
      bySource.set(sourceId, series);
    }
    return series;
  }

  private forgetDeleted(sourceExists: (id: number) => boolean): void {
    for (const protocol of PROTOCOLS) {
      const bySource = this.sources[protocol];
      for (const id of bySource.keys()) if (id !== NO_SOURCE && !sourceExists(id)) bySource.delete(id);
    }
  }

  private total(value: (series: SourceSeries) => number): number {
    let sum = 0;
    for (const protocol of PROTOCOLS) for (const series of this.sources[protocol].values()) sum += value(series);
    return sum;
  }
}
