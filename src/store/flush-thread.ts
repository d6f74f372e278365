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
import { WriteError, type Commit, type FlushConnection, type HotTier } from "./copy";
import type { Call, WriteErrorMessage } from "./flush-worker";
import { ThreadClient } from "../rpc";

type Request = Call extends infer C ? (C extends Call ? Omit<C, "stream"> : never) : never;

/** Past this, a call the thread has not answered fails as "unknown" and the thread is replaced. */
const BACKSTOP_EXTRA_MS = 5_000;

class FlushThread {
  private readonly thread: ThreadClient<Call, unknown, WriteErrorMessage>;
  private readonly open = new Set<number>();

  constructor(
    private readonly url: string,
    private readonly deadlineMs: number,
    private readonly hotTier: HotTier,
  ) {
    this.thread = new ThreadClient({
      url: new URL("./flush-worker.ts", import.meta.url).href,
      name: "flush thread",
      answered: (error) => new WriteError(error.kind, error.message, error.sqlstate),
      // A COMMIT may have been sent: the flusher asks before retrying.
      lost: (reason) => new WriteError("unknown", reason),
      unsent: (reason) => new WriteError("failed", reason),
      // Every operation on the thread has its own deadline (store/copy.ts); this one only catches a
      // thread that stopped answering at all, which must not hold a stream forever.
      backstopMs: deadlineMs * 2 + BACKSTOP_EXTRA_MS,
      // A new thread (after one died) opens the streams still open before any other call reaches it.
      started: () => {
        for (const index of this.open) this.sendOpen(index);
      },
    });
  }

  stream(index: number): FlushConnection {
    this.open.add(index);
    if (this.thread.running) this.sendOpen(index);
    else this.thread.start(); // opens every stream in `open`
    const call = <T>(request: Request, transfer: ArrayBuffer[] = []) => this.thread.call({ ...request, stream: index } as Call, transfer) as Promise<T>;
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
        if (this.open.size === 0) this.thread.close("the flush streams were closed");
      },
    };
  }

  /** Opening cannot fail (postgres.js connects on the first query): its answer is not awaited. */
  private sendOpen(stream: number): void {
    this.thread.send({ method: "open", url: this.url, deadlineMs: this.deadlineMs, hotTier: this.hotTier, stream });
  }
}

/** `count` flush streams sharing one thread, each with a connection of its own. */
export function openFlushStreams(url: string, deadlineMs: number, count: number, hotTier: HotTier = "rows"): FlushConnection[] {
  const thread = new FlushThread(url, deadlineMs, hotTier);
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

function wire(error: WriteError): WriteErrorMessage {
  return { kind: error.kind, message: error.message, sqlstate: error.sqlstate };
}
