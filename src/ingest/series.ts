// Ingestion's /metrics series, declared with the registry (metrics.ts): per protocol (PROTOCOLS)
// and source (`source_id`, "" when refused before the token was known), counted once per request
// through its tally (IngestRequest), never per event. A deleted source's series are dropped at the
// next scrape, so the label's cardinality is the number of sources that exist.
import { REASONS, type Reason } from "../errors";
import { BUCKETS, type Counter, type Histogram, labels, type Registry } from "../metrics";

/**
 * The ingest protocols, the `protocol` label's values: `better_stack` is `POST /` (Better Stack's
 * ingest protocol, whatever the body's format), `otlp` is `POST /v1/logs`, `loki` is
 * `POST /loki/api/v1/push`. Every one is rendered from the start (zero until used).
 */
export const PROTOCOLS = ["better_stack", "otlp", "loki"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

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
 * One ingest request's tally, made when it arrives (`series.ingestRequest(protocol)`): set
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
    private readonly series: IngestSeries,
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
    this.series.ingestAccepted(this.protocol, this.sourceId, events, bytes, droppedPaused);
    if (!droppedPaused && this.tooOld + this.tooFarAhead > 0) this.series.ingestRedated(this.protocol, this.sourceId, this.tooOld, this.tooFarAhead);
    this.series.duration[this.protocol].observe((performance.now() - this.started) / 1000);
  }

  /** Refused, for `reason` (errors.ts's table, the `reason` label). */
  reject(reason: Reason): void {
    if (this.done) return;
    this.done = true;
    this.series.reject(reason, this.protocol, this.sourceId);
    this.series.duration[this.protocol].observe((performance.now() - this.started) / 1000);
  }
}

/** Declares ingestion's series with `metrics`; `sourceExists` says which sources' series to keep. */
export function ingestSeries(metrics: Registry, sourceExists?: (id: number) => boolean): IngestSeries {
  return new IngestSeries(metrics, sourceExists);
}

export class IngestSeries {
  readonly duration: Record<Protocol, Histogram>;
  readonly durableTimeouts: Counter;
  /** protocol → source id → counters. */
  private readonly sources = Object.fromEntries(PROTOCOLS.map((p) => [p, new Map<number, SourceSeries>()])) as Record<Protocol, Map<number, SourceSeries>>;

  constructor(
    metrics: Registry,
    private readonly sourceExists?: (id: number) => boolean,
  ) {
    const perSource = (name: string, help: string, value: (series: SourceSeries) => number) =>
      metrics.family(name, "counter", help, (sample) => {
        this.forgetDeleted();
        for (const protocol of PROTOCOLS) for (const series of this.sources[protocol].values()) if (series.requests > 0) sample(series.labels, value(series));
      });
    perSource("logpond_ingest_requests_accepted_total", "Ingestion requests answered with success, by protocol and source.", (s) => s.requests);
    perSource("logpond_ingest_events_received_total", "Events accepted (buffered, or dropped as paused), by protocol and source.", (s) => s.events);
    perSource("logpond_ingest_bytes_received_total", "Request body bytes of accepted requests, as sent, by protocol and source.", (s) => s.bytes);
    perSource("logpond_ingest_events_dropped_paused_total", "Events accepted for a paused source and dropped, by protocol and source.", (s) => s.droppedPaused);
    metrics.family(
      "logpond_ingest_events_redated_total",
      "counter",
      "Events accepted with a time retention would delete at once (too_old) or too far ahead (too_far_ahead), stored with the reception time as dt, by protocol, source and reason.",
      (sample) => {
        this.forgetDeleted();
        for (const protocol of PROTOCOLS) {
          for (const series of this.sources[protocol].values()) {
            if (series.tooOld > 0) sample(`${series.labels},${labels({ reason: "too_old" })}`, series.tooOld);
            if (series.tooFarAhead > 0) sample(`${series.labels},${labels({ reason: "too_far_ahead" })}`, series.tooFarAhead);
          }
        }
      },
    );
    metrics.family(
      "logpond_ingest_requests_rejected_total",
      "counter",
      'Ingestion requests refused, by protocol, source ("" before the token was known) and reason.',
      (sample) => {
        this.forgetDeleted();
        for (const protocol of PROTOCOLS) {
          for (const series of this.sources[protocol].values()) {
            const rejected = series.rejected;
            if (rejected)
              for (let i = 0; i < rejected.length; i++) if (rejected[i]! > 0) sample(`${series.labels},${labels({ reason: REASON_NAMES[i]! })}`, rejected[i]!);
          }
        }
      },
    );
    this.duration = metrics.histogramBy(
      "logpond_ingest_request_duration_seconds",
      "Ingestion requests' time from the handler's start (headers read) to the answer (any answer), by protocol.",
      BUCKETS.ingest,
      "protocol",
      PROTOCOLS,
    );
    this.durableTimeouts = metrics.counter("logpond_durable_timeouts_total", "Durable requests not committed within DURABLE_TIMEOUT_MS.");
  }

  /** Starts an ingest request's tally (see IngestRequest). */
  ingestRequest(protocol: Protocol): IngestRequest {
    return new IngestRequest(this, protocol);
  }

  /** One accepted ingest request. Prefer `ingestRequest(protocol)`, which times it too. */
  ingestAccepted(protocol: Protocol, sourceId: number, events: number, bytes: number, droppedPaused = false): void {
    const series = this.series(protocol, sourceId);
    this.accepted.requests++;
    this.accepted.events += events;
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

  /** Accepted requests and their events since start, deleted sources' too (cluster/worker.ts reports them). */
  private readonly accepted = { requests: 0, events: 0 };
  totals(): { requests: number; events: number } {
    return { ...this.accepted };
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

  private series(protocol: Protocol, sourceId: number): SourceSeries {
    const bySource = this.sources[protocol];
    let series = bySource.get(sourceId);
    if (series === undefined) {
      series = new SourceSeries(labels({ protocol, source_id: sourceId === NO_SOURCE ? "" : sourceId }));
      bySource.set(sourceId, series);
    }
    return series;
  }

  /** Drops a deleted source's series; each family asks before it writes (a scrape's cost, not a request's). */
  private forgetDeleted(): void {
    const exists = this.sourceExists;
    if (exists === undefined) return;
    for (const protocol of PROTOCOLS) {
      const bySource = this.sources[protocol];
      for (const id of bySource.keys()) if (id !== NO_SOURCE && !exists(id)) bySource.delete(id);
    }
  }

  private total(value: (series: SourceSeries) => number): number {
    let sum = 0;
    for (const protocol of PROTOCOLS) for (const series of this.sources[protocol].values()) sum += value(series);
    return sum;
  }
}
