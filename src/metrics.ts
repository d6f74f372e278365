// Counters for /metrics (Prometheus text format). Plain numbers bumped on the hot path per request
// or per batch, never per event; gauges are read when scraped.

export class Metrics {
  requestsAccepted = 0;
  eventsReceived = 0;
  bytesReceived = 0;
  eventsDroppedPaused = 0;
  flushes = 0;
  flushErrors = 0;
  flushedEvents = 0;
  flushSecondsSum = 0;
  eventsDeadLettered = 0;
  eventsLost = 0;
  isolationSplits = 0;
  durableTimeouts = 0;
  retentionSweeps = 0;
  retentionErrors = 0;
  retentionRowsRemoved = 0;
  retentionBytesRemoved = 0;
  retentionDeadLettersRemoved = 0;
  retentionPartitionsDropped = 0;
  retentionSecondsSum = 0;
  retentionLastSeconds = 0;
  readonly rejected = new Map<string, number>();
  readonly flushReasons = new Map<string, number>();

  reject(reason: string): void {
    this.rejected.set(reason, (this.rejected.get(reason) ?? 0) + 1);
  }

  flushed(reason: string, events: number, seconds: number): void {
    this.flushes++;
    this.flushedEvents += events;
    this.flushSecondsSum += seconds;
    this.flushReasons.set(reason, (this.flushReasons.get(reason) ?? 0) + 1);
  }

  retentionSwept(result: { rowsRemoved: number; bytesRemoved: number; deadLettersRemoved: number; partitionsDropped: number }, seconds: number): void {
    this.retentionSweeps++;
    this.retentionRowsRemoved += result.rowsRemoved;
    this.retentionBytesRemoved += result.bytesRemoved;
    this.retentionDeadLettersRemoved += result.deadLettersRemoved;
    this.retentionPartitionsDropped += result.partitionsDropped;
    this.retentionSecondsSum += seconds;
    this.retentionLastSeconds = seconds;
  }

  render(gauges: Record<string, { help: string; value: number }>): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, samples: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
    };
    metric("logpond_ingest_requests_accepted_total", "counter", "Ingestion requests answered 202.", [["", this.requestsAccepted]]);
    metric("logpond_ingest_events_received_total", "counter", "Events accepted (buffered or dropped as paused).", [["", this.eventsReceived]]);
    metric("logpond_ingest_bytes_received_total", "counter", "Request body bytes of accepted requests, as sent.", [["", this.bytesReceived]]);
    metric("logpond_ingest_events_dropped_paused_total", "counter", "Events accepted for a paused source and dropped.", [["", this.eventsDroppedPaused]]);
    metric(
      "logpond_ingest_requests_rejected_total",
      "counter",
      "Ingestion requests refused, by reason.",
      [...this.rejected].map(([reason, n]) => [`{reason="${reason}"}`, n]),
    );
    metric("logpond_flushes_total", "counter", "Committed flushes, by trigger.", [...this.flushReasons].map(([reason, n]) => [`{reason="${reason}"}`, n]));
    metric("logpond_flush_events_total", "counter", "Events written to PostgreSQL.", [["", this.flushedEvents]]);
    metric("logpond_flush_duration_seconds_sum", "counter", "Total time spent in committed flushes.", [["", this.flushSecondsSum]]);
    metric("logpond_flush_errors_total", "counter", "Flush attempts that failed (and were retried).", [["", this.flushErrors]]);
    metric("logpond_dead_letter_events_total", "counter", "Events PostgreSQL refused for their data, kept in dead_letters.", [["", this.eventsDeadLettered]]);
    metric("logpond_events_lost_total", "counter", "Events refused by PostgreSQL whose dead letter was refused too (logged in full).", [["", this.eventsLost]]);
    metric("logpond_flush_isolation_splits_total", "counter", "Refused batches split in two to isolate bad events.", [["", this.isolationSplits]]);
    metric("logpond_durable_timeouts_total", "counter", "Durable requests not committed within DURABLE_TIMEOUT_MS.", [["", this.durableTimeouts]]);
    metric("logpond_retention_sweeps_total", "counter", "Retention sweeps completed.", [["", this.retentionSweeps]]);
    metric("logpond_retention_sweep_errors_total", "counter", "Retention sweeps that failed (retried at the next interval).", [["", this.retentionErrors]]);
    metric("logpond_retention_rows_removed_total", "counter", "Events removed by retention and deleted-source purges (dropped partitions: PostgreSQL's row estimate).", [["", this.retentionRowsRemoved]]);
    metric("logpond_retention_bytes_removed_total", "counter", "Bytes removed: dropped partitions' size on disk, deleted rows' estimated stored size (their partition's average); a deleted row's space is reused by later rows of that partition only, and returns to the disk when the partition is dropped.", [["", this.retentionBytesRemoved]]);
    metric("logpond_retention_dead_letters_removed_total", "counter", "Dead letters removed by retention and deleted-source purges.", [["", this.retentionDeadLettersRemoved]]);
    metric("logpond_retention_partitions_dropped_total", "counter", "Daily partitions dropped because every source had outlived them.", [["", this.retentionPartitionsDropped]]);
    metric("logpond_retention_sweep_duration_seconds_sum", "counter", "Total time spent in completed retention sweeps.", [["", this.retentionSecondsSum]]);
    metric("logpond_retention_last_sweep_duration_seconds", "gauge", "Duration of the last completed retention sweep.", [["", this.retentionLastSeconds]]);
    for (const [name, { help, value }] of Object.entries(gauges)) metric(name, "gauge", help, [["", value]]);
    return `${lines.join("\n")}\n`;
  }
}
