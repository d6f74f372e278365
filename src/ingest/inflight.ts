// The admission gate for memory: what the requests being decoded right now may cost together
// (CONTRACT §3.1). A request is charged its decompressed size × COST_FACTOR from decompression
// until it is buffered or refused; past INGEST_INFLIGHT_MAX_BYTES it gets 503 + Retry-After. A
// request alone is always let in, so one that is bigger than the budget is not refused forever.

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

  constructor(private readonly budgetBytes: number) {}

  /** The charge to release later, or undefined when the budget is spent. */
  charge(decompressedBytes: number): number | undefined {
    const cost = decompressedBytes * COST_FACTOR;
    if (this.requests > 0 && this.used + cost > this.budgetBytes) return undefined;
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
