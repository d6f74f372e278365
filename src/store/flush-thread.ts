// The flush streams' connections (store/copy.ts), run on a thread of their own (flush-worker.ts).
// Under load the event loop that answers requests comes round only every 150–350 ms (wrk -c64 with
// 1000-event @logtail/node bodies: 64 bodies read, inflated and decoded per turn), and each of a
// batch's seven round trips to PostgreSQL waited for a turn: the first commit came 3.5 s into the
// load and PostgreSQL sat half idle (bench/probe.ts timeline). On this thread those round trips are
// answered at once; the main thread hears back twice per batch (its ids, its commit). Rows in the
// ring's shared slabs are read there in place (the ring reuses a slab only after the commit);
// other rows are copied and the copy transferred. A thread that fails, stops or stops answering is
// replaced: its calls fail as "unknown" (a COMMIT may have been sent: the flusher asks before
// retrying). Decides nothing: the flusher still owns every batch.
import { WriteError, type Commit, type FlushConnection } from "./copy";
import type { Answer, Call, WireError } from "./flush-worker";

type Request = Call extends infer C ? (C extends Call ? Omit<C, "call" | "stream"> : never) : never;

/** Past this, a call the thread has not answered fails as "unknown" and the thread is replaced. */
const BACKSTOP_EXTRA_MS = 5_000;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: WriteError) => void;
  worker: Worker;
  timer: ReturnType<typeof setTimeout>;
}

class FlushThread {
  private worker: Worker | undefined;
  private nextCall = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly open = new Set<number>();
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly deadlineMs: number,
  ) {}

  stream(index: number): FlushConnection {
    this.open.add(index);
    if (this.worker) this.sendOpen(this.worker, index);
    else this.spawn(); // opens every stream in `open`
    const call = <T>(request: Request, transfer: ArrayBuffer[] = []) => this.post(index, request, transfer) as Promise<T>;
    return {
      reserveIds: (count) => call<number>({ method: "reserveIds", count }),
      write: (batchId, rows, ids) => {
        const sent = shareable(rows);
        return call<Commit>({ method: "write", batchId, rows: sent.rows, ...ids }, sent.transfer);
      },
      committed: (batchId) => call<Commit | false>({ method: "committed", batchId }),
      deadLetter: (batchId, tuple, refusal) => {
        const own = new Uint8Array(tuple); // a copy (Buffer.slice would be a view)
        return call<void>({ method: "deadLetter", batchId, tuple: own, refusal: wire(refusal) }, [own.buffer]);
      },
      forgetBatches: (olderThanHours) => call<void>({ method: "forgetBatches", olderThanHours }),
      close: async () => {
        if (!this.open.has(index)) return;
        await call<void>({ method: "close" }).catch(() => {});
        this.open.delete(index);
        if (this.open.size === 0) this.stop();
      },
    };
  }

  private post(stream: number, request: Request, transfer: ArrayBuffer[] = []): Promise<unknown> {
    if (this.closed) return Promise.reject(new WriteError("failed", "the flush streams are closed"));
    const worker = this.worker ?? this.spawn();
    const call = this.nextCall++;
    return new Promise((resolve, reject) => {
      // Every operation on the thread has its own deadline (store/copy.ts); this one only catches a
      // thread that stopped answering at all, which must not hold a stream forever.
      const backstopMs = this.deadlineMs * 2 + BACKSTOP_EXTRA_MS;
      const timer = setTimeout(() => this.replace(worker, `no answer from the flush thread within ${backstopMs} ms`), backstopMs);
      timer.unref?.();
      this.pending.set(call, { resolve, reject, worker, timer });
      try {
        worker.postMessage({ ...request, call, stream } as Call, transfer);
      } catch (error) {
        this.settle(call);
        reject(new WriteError("failed", `could not hand the call to the flush thread: ${(error as Error).message}`));
      }
    });
  }

  /** The call's entry, taken out of `pending` with its timer stopped. */
  private settle(call: number): Pending | undefined {
    const entry = this.pending.get(call);
    if (!entry) return undefined;
    this.pending.delete(call);
    clearTimeout(entry.timer);
    return entry;
  }

  private spawn(): Worker {
    const worker = new Worker(new URL("./flush-worker.ts", import.meta.url).href, { smol: true });
    this.worker = worker;
    worker.onmessage = (message: MessageEvent<Answer>) => {
      const answer = message.data;
      const entry = this.settle(answer.call);
      if (!entry) return;
      if ("error" in answer) entry.reject(new WriteError(answer.error.kind, answer.error.message, answer.error.sqlstate));
      else entry.resolve(answer.value);
    };
    worker.onerror = (event) => this.replace(worker, `the flush thread failed (${event.message})`);
    worker.addEventListener("close", () => this.replace(worker, "the flush thread stopped"));
    worker.unref();
    // A new thread (after one died) opens the streams still open before any other call reaches it.
    for (const index of this.open) this.sendOpen(worker, index);
    return worker;
  }

  /** Opening cannot fail (postgres.js connects on the first query): its answer is not awaited. */
  private sendOpen(worker: Worker, stream: number): void {
    worker.postMessage({ method: "open", url: this.url, deadlineMs: this.deadlineMs, call: this.nextCall++, stream } satisfies Call);
  }

  /**
   * A thread that failed, stopped or stopped answering: ended, and its calls (only its own) fail
   * as "unknown" (a COMMIT may have been sent). The next call starts a new thread.
   */
  private replace(worker: Worker, reason: string): void {
    if (this.worker === worker) this.worker = undefined;
    worker.terminate();
    for (const [call, entry] of this.pending) {
      if (entry.worker !== worker) continue;
      this.settle(call);
      entry.reject(new WriteError("unknown", reason));
    }
  }

  private stop(): void {
    this.closed = true;
    if (this.worker) this.replace(this.worker, "the flush streams were closed");
  }
}

/** `count` flush streams sharing one thread, each with a connection of its own. */
export function openFlushStreams(url: string, deadlineMs: number, count: number): FlushConnection[] {
  const thread = new FlushThread(url, deadlineMs);
  return Array.from({ length: count }, (_, index) => thread.stream(index));
}

/**
 * The rows as the thread may hold them: views of the ring's shared slabs as they are (the thread
 * reads the same memory), anything else copied into a buffer of its own (transferred).
 */
function shareable(rows: readonly (Uint8Array | string)[]): { rows: (Uint8Array | string)[]; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  const shared = rows.map((part) => {
    if (typeof part === "string" || part.buffer instanceof SharedArrayBuffer) return part;
    const own = new Uint8Array(part); // a copy (Buffer.slice would be a view)
    transfer.push(own.buffer);
    return own;
  });
  return { rows: shared, transfer };
}

function wire(error: WriteError): WireError {
  return { kind: error.kind, message: error.message, sqlstate: error.sqlstate };
}
