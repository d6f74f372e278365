// The scan threads: the query API's reads with a query open and match their sealed v4 blocks here
// (query/scan.ts: a histogram's counts, a page's events, an aggregation's tallies), on as many threads as the machine has
// cores, never on the HTTP thread. A call
// is one batch of blocks and goes to the thread with the fewest calls waiting; a thread that fails
// fails only its own calls, and the next call starts a new one (rpc.ts). Holds no data between calls.
import { availableParallelism } from "node:os";
import { ThreadClient } from "../rpc";
import type { CountRequest, Counts, Found, MatchRequest, Tallies, TallyRequest } from "./scan";

export type ScanCall = { kind: "count"; request: CountRequest } | { kind: "match"; request: MatchRequest } | { kind: "tally"; request: TallyRequest };

/**
 * Payload bytes the scan threads hold at most, all reads together (calls waiting and running),
 * while a read has another call running: a block of big events is up to store/blocks.ts
 * BLOCK_MAX_BYTES of text, so two batches of eight per thread could hold gigabytes on many cores.
 * The realistic corpus's blocks are about 115 KB each, far below it.
 */
export const SCAN_HELD_BYTES = 32 * 1024 * 1024;

/**
 * Distinct entries (a bucket and its values) a read adds up from the threads' answers on the HTTP
 * thread, at most: a count by a field of many values (ids, user ids, messages) over a busy window
 * would otherwise hold one entry per event (a few hundred bytes each). Past it the read is made by
 * PostgreSQL alone, as before the threads, within what is left of QUERY_TIMEOUT_MS.
 */
export const SCAN_TALLIES_MAX = 200_000;

export class ScanPool {
  private readonly threads: ThreadClient<ScanCall, unknown, string>[] = [];
  /** Payload bytes of the calls made and not yet answered, every read's. */
  private held = 0;

  constructor(
    readonly size: number = availableParallelism(),
    readonly maxHeldBytes: number = SCAN_HELD_BYTES,
    readonly maxTallies: number = SCAN_TALLIES_MAX,
  ) {}

  count(request: CountRequest): Promise<Counts> {
    return this.call({ kind: "count", request }) as Promise<Counts>;
  }

  match(request: MatchRequest): Promise<Found[]> {
    return this.call({ kind: "match", request }) as Promise<Found[]>;
  }

  tally(request: TallyRequest): Promise<Tallies> {
    return this.call({ kind: "tally", request }) as Promise<Tallies>;
  }

  /**
   * Each of a cursor's batches of blocks handed to the threads by `call`, at most two calls per
   * thread waiting and, while this read has a call running, no more payload bytes held than
   * maxHeldBytes, every read's together (a read with none running always makes one: no read waits
   * on another's); `before` runs before each batch (it throws past a deadline); each answer goes
   * to `take` as it comes; once `done` says so, no more batches are read. Settles when every call
   * made has answered; the first failure is thrown then.
   */
  async spread<B extends readonly { payload: Uint8Array }[], T>(
    batches: AsyncIterable<B>,
    call: (batch: B) => Promise<T>,
    take: (value: T) => void,
    before: () => void,
    done: () => boolean = () => false,
  ): Promise<void> {
    const running = new Set<Promise<void>>();
    let failed: { error: unknown } | undefined;
    try {
      for await (const batch of batches) {
        if (done()) break;
        before();
        const bytes = batch.reduce((sum, block) => sum + block.payload.byteLength, 0);
        this.held += bytes;
        // Never rejects (`take` included): a failure is kept and thrown once every call has ended.
        const answer: Promise<void> = Promise.resolve()
          .then(() => call(batch))
          .then(take)
          .catch((error: unknown) => {
            failed ??= { error };
          })
          .finally(() => {
            this.held -= bytes;
            running.delete(answer);
          });
        running.add(answer);
        while (running.size > 0 && (running.size >= this.size * 2 || this.held > this.maxHeldBytes)) await Promise.race(running);
        if (failed || done()) break;
      }
    } finally {
      await Promise.all(running);
    }
    if (failed) throw failed.error;
  }

  private call(call: ScanCall): Promise<unknown> {
    while (this.threads.length < this.size) {
      this.threads.push(
        new ThreadClient<ScanCall, unknown, string>({
          url: new URL("./scan-worker.ts", import.meta.url).href,
          name: "scan thread",
          answered: (message) => new Error(`a scan thread failed: ${message}`),
          lost: (reason) => new Error(reason),
          unsent: (reason) => new Error(reason),
        }),
      );
    }
    const thread = this.threads.reduce((a, b) => (b.waiting < a.waiting ? b : a));
    return thread.call(call);
  }

  close(): void {
    for (const thread of this.threads.splice(0)) thread.close("the scan threads were closed");
  }
}
