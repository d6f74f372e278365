// The admission gate for memory: what the requests being read and decoded right now may cost
// together (CONTRACT §3.1). A request is charged its size × COST_FACTOR (its Content-Length before
// the body is read, its decompressed size once known: accept.ts) until it is buffered or refused; past INGEST_INFLIGHT_MAX_BYTES, or past the room the ring's
// memory leaves of BUFFER_MAX_BYTES + 200 MiB, it gets 503 + Retry-After. A big request beside
// another big one is judged by what the process's RSS leaves of that sum as well. A request alone
// is always let in, and a big one alone among big ones is judged by the ring only, so one that is
// bigger than the budget, or comes while memory is high, is not refused forever.

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
  private big = 0;

  /**
   * `room`: what else may be held now (memory/budget.ts: BUFFER_MAX_BYTES + 200 MiB less what the ring
   * costs), so buffered rows and requests being decoded share one bound; 512 MiB of requests beside
   * a full buffer would be far past it. Two 32 MiB bodies (4 × 32 each) fit beside an empty one by
   * it. `bigRoom`: the same for a request of `bigFromBytes` or more beside another such one (memory/budget.ts:
   * less the RSS too, when that is more).
   */
  constructor(
    private readonly budgetBytes: number,
    private readonly room: () => number = () => Infinity,
    private readonly bigRoom: () => number = room,
    private readonly bigFromBytes = Infinity,
  ) {}

  /** The charge to release later, or undefined when the budget is spent. */
  charge(decompressedBytes: number): number | undefined {
    const cost = decompressedBytes * COST_FACTOR;
    const big = this.isBig(cost);
    const room = big && this.big > 0 ? this.bigRoom() : this.room();
    if (this.requests > 0 && this.used + cost > Math.min(this.budgetBytes, room)) return undefined;
    this.used += cost;
    this.requests++;
    if (big) this.big++;
    return cost;
  }

  release(cost: number): void {
    this.used -= cost;
    this.requests--;
    if (this.isBig(cost)) this.big--;
  }

  get bytes(): number {
    return this.used;
  }

  private isBig(cost: number): boolean {
    return cost >= this.bigFromBytes * COST_FACTOR;
  }
}
