// A Prometheus histogram of one series: a count per bucket, a sum and a count. Recording a sample
// is a walk over at most the bucket bounds and three additions, with no allocation, so it can run
// once per request on the ingest path. Buckets are kept per bucket and made cumulative when
// rendered (exposition.ts), where the cost is once per scrape.

/** Bucket upper bounds (seconds) for what each histogram measures; rendered as `le`. */
export const BUCKETS = {
  /** An ingest request, from its first header read to its answer: 0.25 ms (small in-process batches) to 10 s (durable waits). */
  ingest: [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  /** A query API request: 5 ms (an index hit) to 30 s (past QUERY_TIMEOUT_MS's default of 5 s). */
  query: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  /** A committed flush, retries included: 5 ms to 60 s (FLUSH_TIMEOUT_MS's default is 10 s per try). */
  flush: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  /** A completed retention sweep: 0.1 s to an hour. */
  sweep: [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
} as const;

export class Histogram {
  readonly bounds: Float64Array;
  /** counts[i]: samples in (bounds[i-1], bounds[i]]; the last one: samples above every bound (le="+Inf" only). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    for (let i = 1; i < bounds.length; i++) {
      if (!(bounds[i]! > bounds[i - 1]!)) throw new Error(`histogram bounds must increase: ${bounds.join(", ")}`);
    }
    this.bounds = Float64Array.from(bounds);
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** One sample (seconds, ≥ 0). NaN or a negative value is ignored: it would poison the sum for good. */
  observe(value: number): void {
    if (!(value >= 0)) return;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}
