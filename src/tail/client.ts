// One live-tail client: a bounded queue of SSE text in front of a pull-driven ReadableStream.
// Bun pulls only while the socket takes data, so a client that stops reading stops pulling; its
// queue then fills and further rows are counted as dropped (announced with `event: dropped` once
// there is room), never buffered without bound and never waited for by the hub. The bound is
// checked per batch, not per row: a batch is handed out synchronously (no pull can happen in
// between), so a per-row check would drop rows of a big batch even for a client that keeps up.
// A queue therefore holds at most its limit plus one batch.
import type { Predicate } from "../query/match";
import type { Node } from "../query/parse";
import { compareIds, eventOf, sseOf, type TailRow } from "./rows";

export interface ClientLimits {
  maxRows: number;
  maxBytes: number;
}

const encoder = new TextEncoder();
const PULL_BYTES = 64 * 1024;
const KEEP_ALIVE = encoder.encode(": keep-alive\n\n");

export class TailClient {
  /** The position of the last row queued: (seq, id). */
  seq: number;
  id: string;
  /** False while it catches up from storage: the hub leaves it alone until then. */
  live = false;
  closed = false;
  /** Ending: what is queued is still sent, then the stream closes; nothing new is taken. */
  private finishing = false;
  dropped = 0;
  droppedTotal = 0;
  /** Whether the batch being handed out is taken: decided when it starts (see above). */
  private admitting = true;
  /** Encoded SSE text; `rowFlags[i]` is how many rows queue[i] holds (comments and notices: 0). */
  private queue: Uint8Array[] = [];
  private rowFlags: number[] = [];
  private queuedRows = 0;
  private queuedBytes = 0;
  private wake: (() => void) | undefined;
  private roomWaiters: (() => void)[] = [];
  /** Clients with the same key see the same rows of a batch: the hub filters and encodes once per key. */
  readonly groupKey: string;
  private headOffset = 0;
  readonly stream: ReadableStream<Uint8Array>;
  onClose: () => void = () => {};

  constructor(
    readonly sourceIds: ReadonlySet<number>,
    readonly query: Node | undefined,
    readonly matcher: Predicate | undefined,
    start: { seq: number; id: string },
    private readonly limits: ClientLimits,
  ) {
    this.seq = start.seq;
    this.id = start.id;
    this.groupKey = `${[...sourceIds].sort((a, b) => a - b).join(",")}\u0000${query === undefined ? "" : JSON.stringify(query)}`;
    this.stream = new ReadableStream<Uint8Array>(
      {
        pull: (controller) => this.pull(controller),
        cancel: () => this.close(),
      },
      { highWaterMark: 0 },
    );
    this.enqueue(encoder.encode(": connected\n\n"), 0);
  }

  /** A live row: queued, or counted as dropped when the queue is full. */
  offer(row: TailRow): void {
    if (this.closed || this.finishing || !this.sourceIds.has(row.sourceId)) return;
    // Already sent (a resume point ahead of this process's live position).
    if (row.seq < this.seq || (row.seq === this.seq && compareIds(row.id, this.id) <= 0)) return;
    if (this.matcher && !this.matcher(eventOf(row))) return;
    if (!this.admitting) {
      this.dropped++;
      this.droppedTotal++;
      // The position still moves: a reconnect from the last row received gets the dropped ones back.
      return;
    }
    this.announceDropped();
    this.enqueue(sseOf(row), 1);
    this.seq = row.seq;
    this.id = row.id;
  }

  /**
   * A batch's rows for this client's group, already filtered, and their SSE bytes as one block
   * shared by the group: one queue entry per batch instead of one per row (50 streams cost
   * 0.2 µs per row and stream per row otherwise; bench/read.ts). Only for batches after its position.
   */
  offerBlock(rows: readonly TailRow[], block: Uint8Array): void {
    if (this.closed || this.finishing || rows.length === 0) return;
    if (!this.admitting) {
      this.dropped += rows.length;
      this.droppedTotal += rows.length;
      return;
    }
    this.announceDropped();
    this.enqueue(block, rows.length);
    const last = rows[rows.length - 1]!;
    this.seq = last.seq;
    this.id = last.id;
  }

  /** Called before each batch's rows are offered. */
  batchStart(): void {
    this.admitting = !this.full();
  }

  /** A row read back from storage during catch-up (already filtered by SQL); callers wait for room first. */
  replay(row: TailRow): void {
    if (this.closed) return;
    this.enqueue(sseOf(row), 1);
    this.seq = row.seq;
    this.id = row.id;
  }

  /** Resolves when the queue is at most half full (or the client is gone). */
  room(): Promise<void> {
    if (this.closed || (this.queuedRows <= this.limits.maxRows / 2 && this.queuedBytes <= this.limits.maxBytes / 2)) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Keeps proxies and Bun's idle timer from closing a quiet stream; tells about drops once there is room. */
  heartbeat(): void {
    if (this.closed || this.finishing) return;
    if (this.dropped > 0 && !this.full()) this.announceDropped();
    else if (this.queue.length === 0) this.enqueue(KEEP_ALIVE, 0);
  }

  /** A comment or a control event written as is. */
  note(text: string): void {
    if (!this.closed) this.enqueue(encoder.encode(text), 0);
  }

  /** Sends what is queued and then `text` (a control event), then ends the stream. */
  finish(text: string): void {
    if (this.closed || this.finishing) return;
    this.enqueue(encoder.encode(text), 0);
    this.finishing = true;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.rowFlags = [];
    this.headOffset = 0;
    this.wake?.();
    for (const resolve of this.roomWaiters.splice(0)) resolve();
    this.onClose();
  }

  private full(): boolean {
    return this.queuedRows >= this.limits.maxRows || this.queuedBytes >= this.limits.maxBytes;
  }

  private announceDropped(): void {
    if (this.dropped === 0) return;
    this.enqueue(encoder.encode(`event: dropped\ndata: {"count":${this.dropped}}\n\n`), 0);
    this.dropped = 0;
  }

  private enqueue(bytes: Uint8Array, rows: number): void {
    this.queue.push(bytes);
    this.rowFlags.push(rows);
    this.queuedRows += rows;
    this.queuedBytes += bytes.byteLength;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    while (this.queue.length === 0 && !this.closed) await new Promise<void>((resolve) => (this.wake = resolve));
    if (this.closed) {
      try {
        controller.close();
      } catch {}
      return;
    }
    // At most PULL_BYTES per pull: Bun keeps pulling while a few chunks are pending on a slow
    // socket whatever their size (measured: a stalled client held 18 MB of whole-batch chunks),
    // so small chunks are what keeps the memory behind a stalled socket small.
    // The head entry may be a whole batch's block: it is handed out in PULL_BYTES slices.
    const parts: Uint8Array[] = [];
    let bytes = 0;
    while (this.queue.length > 0 && bytes < PULL_BYTES) {
      const head = this.queue[0]!;
      const take = Math.min(head.byteLength - this.headOffset, PULL_BYTES - bytes);
      parts.push(head.subarray(this.headOffset, this.headOffset + take));
      bytes += take;
      this.headOffset += take;
      if (this.headOffset === head.byteLength) {
        this.queue.shift();
        this.queuedRows -= this.rowFlags.shift()!;
        this.headOffset = 0;
      }
    }
    this.queuedBytes -= bytes;
    // A copy: row bytes are shared by every stream, and what is handed to Bun is Bun's.
    controller.enqueue(Buffer.concat(parts, bytes));
    for (const resolve of this.roomWaiters.splice(0)) resolve();
    if (this.finishing && this.queue.length === 0) this.close();
  }
}
