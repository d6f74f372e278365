// Per-source rate limit (INGEST_RATE_LIMIT events per second; 0 = off): a token bucket holding
// one second's worth. A request is let in while the bucket is not empty and may take it into debt,
// so a batch bigger than a second's worth still gets through, then the source waits it off.
// Memory: one small record per source that has sent since start. No I/O.

export class RateLimiter {
  private readonly buckets = new Map<number, { tokens: number; at: number }>();

  constructor(private readonly eventsPerSecond: number) {}

  get enabled(): boolean {
    return this.eventsPerSecond > 0;
  }

  /** Seconds until the source may send again; 0 when it may send now. */
  wait(sourceId: number, now = performance.now()): number {
    const bucket = this.refill(sourceId, now);
    return bucket.tokens > 0 ? 0 : Math.max(1, Math.ceil((1 - bucket.tokens) / this.eventsPerSecond));
  }

  /** Charges an admitted request's events. */
  spend(sourceId: number, events: number, now = performance.now()): void {
    this.refill(sourceId, now).tokens -= events;
  }

  private refill(sourceId: number, now: number): { tokens: number; at: number } {
    let bucket = this.buckets.get(sourceId);
    if (bucket === undefined) {
      bucket = { tokens: this.eventsPerSecond, at: now };
      this.buckets.set(sourceId, bucket);
      return bucket;
    }
    const elapsed = (now - bucket.at) / 1000;
    bucket.tokens = Math.min(this.eventsPerSecond, bucket.tokens + elapsed * this.eventsPerSecond);
    bucket.at = now;
    return bucket;
  }
}
