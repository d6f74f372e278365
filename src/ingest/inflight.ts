// The admission gate for memory: what the requests being read and decoded right now may cost
// together (CONTRACT §3.1). A request is charged its size × COST_FACTOR (its Content-Length before
// the body is read, its decompressed size once known: accept.ts) until it is buffered or refused; past INGEST_INFLIGHT_MAX_BYTES, or past the room the ring's
// memory or the process's RSS (the larger) leaves of BUFFER_MAX_BYTES + 200 MiB, it gets 503 + Retry-After. A request alone is always let in,
// so one that is bigger than the budget is not refused forever.

/**
 * Peak memory of one request over its decompressed size, measured with test/reliability/
 * measure-shapes.ts at INGEST_MAX_DECOMPRESSED_BYTES = 100 MiB: the worst shape (100 MiB of NDJSON
 * blank lines, accepted) peaked 300 MiB over idle, a 100 MiB whitespace body 203 MiB; so 3× with
 * a margin. It covers the body, its decoded objects (bounded by bounds.ts) and the COPY rows.
 */
export const COST_FACTOR = 4;

export class InFlight {
  private used = 0;
  private requests = 0;

  /**
   * `room`: what else may be held now beside a request of that size (server.ts: BUFFER_MAX_BYTES +
   * 200 MiB less what the ring costs, or for a big one the RSS), so buffered rows and requests being decoded share one bound; 512 MiB of requests beside
   * a full buffer would be far past it. Two 32 MiB bodies (4 × 32 each) still fit beside an empty one.
   */
  constructor(
    private readonly budgetBytes: number,
    private readonly room: (decompressedBytes: number) => number = () => Infinity,
  ) {}

  /** The charge to release later, or undefined when the budget is spent. */
  charge(decompressedBytes: number): number | undefined {
    const cost = decompressedBytes * COST_FACTOR;
    if (this.requests > 0 && this.used + cost > Math.min(this.budgetBytes, this.room(decompressedBytes))) return undefined;
    this.used += cost;
    this.requests++;
    return cost;
  }

  release(cost: number): void {
    this.used -= cost;
    this.requests--;
  }

  get bytes(): number {
    return this.used;
  }
}
