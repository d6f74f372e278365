// Big bodies (BIG_BODY_BYTES, memory/costs.ts) are decoded and encoded on a worker thread, so the event loop that answers every
// other client is never held by one request's JSON.parse or msgpackr pass.
// Inline, a 32 MiB body holds the loop 300–670 ms and normal traffic's p99 passes 200 ms (86–103 ms
// with the workers; test/reliability/hostile-load.test.ts). WORKERS threads, started when the
// first big body is announced (a Content-Length, a gzip trailer's size), so their start and
// warm-up overlap its upload or inflating; a service that never sees one keeps their memory
// (started with the service, they take idle RSS from 69 to 93 MiB with the flush thread). A job goes to the one with fewer waiting. The body is
// transferred (the caller must not use it after). A MessagePack array header is read first
// (headerRefusal, by accept.ts before the body is charged): 20 million events are refused without a hop.
import { availableParallelism } from "node:os";
import { measureBody } from "../codec/bounds";
import type { Format } from "../codec/format";
import type { PrepareLimits } from "./prepare";
import type { Reception } from "../codec/reception";
import type { Config } from "../config";
import { AppError } from "../errors";
import type { Job, Outcome } from "./worker";
import { ThreadClient } from "../rpc";

/**
 * One thread per core, so big bodies decode side by side as far as the machine allows (two on the
 * two-core machines logpond is measured on; past that, big bodies queue). At least one; at most
 * four: each thread keeps a heap of its own, and the main thread (which reads and inflates every
 * body) and the flush thread need cores too. Not measured beyond two.
 */
const WORKERS = Math.min(4, Math.max(1, availableParallelism()));

export interface Prepared {
  rows: Uint8Array;
  count: number;
  refused?: number;
  refusal?: string;
  tooOld?: number;
  tooFarAhead?: number;
}

/** A MessagePack array header that refuses the body by itself (too many events), read without a hop. */
export function headerRefusal(body: Uint8Array, format: Format, limits: PrepareLimits): AppError | undefined {
  if (format !== "msgpack") return undefined;
  const header = measureBody(body.subarray(0, 5), format, {
    maxEvents: limits.maxEventsPerRequest,
    maxDecompressedBytes: limits.maxDecompressedBytes,
    maxDepth: limits.maxDepth,
    maxEventBytes: limits.maxEventBytes,
  });
  return header instanceof AppError ? header : undefined;
}

/** The service's decode threads, started on first use. */
export function startDecodeWorker(_config: Config): DecodeWorker {
  return new DecodeWorker();
}

export class DecodeWorker {
  private readonly threads: ThreadClient<Job, Outcome, string>[] = [];

  /** Threads, so bodies that may decode side by side (the memory gate's decode lanes). */
  get width(): number {
    return WORKERS;
  }

  /** Starts the threads (run() does so on first use). */
  start(): void {
    while (this.threads.length < WORKERS) {
      const thread = new ThreadClient<Job, Outcome, string>({
        url: new URL("./worker.ts", import.meta.url).href,
        name: "decode thread",
        // The thread threw or died (out of memory, a bug): its requests get 503, the next one starts a new one.
        answered: (message) => new Error(message),
        lost: (reason) => new Error(reason),
        unsent: (reason) => new Error(reason),
      });
      thread.start();
      this.threads.push(thread);
    }
  }

  /** The caller has checked headerRefusal first. */
  async run(body: Uint8Array, format: Format, sourceId: number, reception: Reception, limits: PrepareLimits): Promise<Prepared | AppError> {
    this.start();
    const thread = this.threads.reduce((a, b) => (b.waiting < a.waiting ? b : a));
    const own = body.byteOffset === 0 && body.buffer.byteLength === body.byteLength;
    const sent = own ? body : new Uint8Array(body);
    let outcome: Outcome;
    try {
      outcome = await thread.call({ body: sent, format, sourceId, reception, limits }, [sent.buffer as ArrayBuffer]);
    } catch {
      return new AppError("overloaded", "This request could not be decoded now; retry after the time in Retry-After");
    }
    if ("rows" in outcome) return outcome;
    return new AppError(outcome.reason, outcome.message);
  }

  close(): void {
    for (const thread of this.threads) thread.close("the decode threads were closed");
    this.threads.length = 0;
  }

  /** As a service (startDecodeWorker): its threads closed. */
  readonly name = "decode worker";
  async stop(): Promise<void> {
    this.close();
  }
}
