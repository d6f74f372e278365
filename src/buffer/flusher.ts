// When and how the ring is drained: every FLUSH_INTERVAL_MS, or as soon as FLUSH_MAX_EVENTS are
// waiting, on FLUSH_STREAMS parallel streams (one connection each). In durable mode a free stream
// writes whatever is waiting at once: requests that arrive while both streams are busy share the
// next commit (group commit), so latency is one or two flushes, not an interval. What a stream does with a
// failed write depends on how it failed (store/copy.ts says which):
//   failed  → keep the batch, retry with capped exponential backoff and jitter; its events stay
//             counted in the ring, so a long outage fills it and ingestion answers 503;
//   unknown → before retrying, ask whether the batch's id committed (exactly once);
//   data    → split the batch in halves until the refused events are alone; those go to the
//             dead-letter table, the rest is stored. Never retried as is.
// Durable mode: a request that gave up waiting has its chunk dropped at the next point where the
// batch is known not to be stored, and its events are never written after that.
// Never drops a chunk it was given otherwise; never holds more than one batch per stream.
import type { FlushConnection, WriteError } from "../store/copy";
import type { Metrics } from "../metrics";
import type { Chunk, Ring, Rows } from "./ring";

export type Stream = Pick<FlushConnection, "write" | "committed" | "deadLetter" | "forgetBatches">;

export interface FlusherOptions {
  intervalMs: number;
  maxEvents: number;
  /** Durable mode: a stream that is free writes at once (group commit), the interval is a backstop. */
  eager: boolean;
  metrics: Metrics;
  log: (line: string) => void;
}

const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;
/** Batch ids are kept a day: far longer than any retry can be waiting to ask about one. */
const FORGET_BATCHES_AFTER_HOURS = 24;
const FORGET_EVERY_MS = 10 * 60_000;

/** What a stopped flusher still holds, for the spill file (buffer/spill.ts). */
export interface HeldBatch {
  /** The id a write of it was (or may have been) tried under; fresh for chunks never taken. */
  batchId: string;
  events: number;
  rows: Rows[];
}

interface Waiter {
  seq: number;
  resolve: () => void;
}

export class Flusher {
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly idle: Stream[];
  /** First sequence number of each batch being written, to know what is committed. */
  private readonly inFlight = new Set<number>();
  private waiters: Waiter[] = [];
  private stopping = false;
  private halted = false;
  private failures = 0;
  private uncertain = 0;
  private lastForget = Date.now();
  /** Each stream's batch and the id it is written under, while it is being written. */
  private readonly holding = new Map<Stream, { batchId: string; chunks: () => Chunk[] }>();

  constructor(
    private readonly ring: Ring,
    private readonly streams: readonly Stream[],
    private readonly options: FlusherOptions,
  ) {
    this.idle = [...streams];
  }

  start(): void {
    this.timer ??= setInterval(() => this.kick("interval"), this.options.intervalMs);
  }

  /** Called after every push: a full batch's worth goes out at once (in durable mode, anything). */
  pushed(): void {
    if (this.ring.pendingEvents >= this.options.maxEvents) this.kick("size");
    else if (this.options.eager && this.idle.length > 0) this.kick("commit");
  }

  /** Resolves once every chunk pushed before the call is committed (or dead-lettered, or dropped). */
  flush(): Promise<void> {
    const seq = this.ring.lastSeq;
    if (this.committedBelow() > seq) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.waiters.push({ seq, resolve }));
    this.kick("manual");
    return done;
  }

  /** Shutdown: no more timer; write everything; false if the deadline came first. */
  async drain(deadlineMs: number): Promise<boolean> {
    this.stopping = true;
    clearInterval(this.timer);
    this.timer = undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), deadlineMs)));
    const drained = await Promise.race([this.flush().then(() => true as const), late]);
    clearTimeout(timer);
    if (!drained) this.halted = true; // retries stop; what is still held is reported lost
    return drained;
  }

  /**
   * After a drain that missed its deadline: everything not known stored, handed over once (the
   * flusher writes none of it from now on). Batches being written keep their batch id, so a try
   * that commits after all is skipped at replay; chunks never taken get fresh ids.
   */
  handOver(): HeldBatch[] {
    this.halted = true;
    const held: HeldBatch[] = [];
    for (const { batchId, chunks } of this.holding.values()) {
      const live = chunks().filter((chunk) => !chunk.abandoned);
      if (live.length > 0) held.push({ batchId, events: live.reduce((sum, c) => sum + c.events, 0), rows: live.map((c) => c.rows) });
    }
    this.holding.clear();
    while (this.ring.pendingEvents > 0) {
      const chunks = this.ring.take(this.options.maxEvents);
      if (chunks.length === 0) break;
      held.push({ batchId: crypto.randomUUID(), events: chunks.reduce((sum, c) => sum + c.events, 0), rows: chunks.map((c) => c.rows) });
    }
    return held;
  }

  get streamsBusy(): number {
    return this.streams.length - this.idle.length;
  }

  private kick(reason: string): void {
    while (this.idle.length > 0 && this.ring.pendingEvents > 0) {
      const batch = this.ring.take(this.options.maxEvents);
      if (batch.length === 0) break;
      const stream = this.idle.pop()!;
      this.inFlight.add(batch[0]!.seq);
      void this.run(stream, batch, reason);
    }
  }

  private async run(stream: Stream, taken: Chunk[], reason: string): Promise<void> {
    const started = performance.now();
    let batch = taken;
    const events = () => batch.reduce((sum, chunk) => sum + chunk.events, 0);
    const keepLive = () => {
      batch = this.dropAbandoned(batch);
      return batch.length > 0;
    };
    try {
      const rows = () => batch.map((chunk) => chunk.rows);
      const batchId = crypto.randomUUID();
      this.holding.set(stream, { batchId, chunks: () => batch });
      const refusal = await this.store(stream, rows, (id) => `${events()} events (batch ${id})`, keepLive, undefined, batchId);
      if (refusal) await this.isolate(stream, batch.flatMap((chunk) => linesOf(chunk.rows)), refusal);
    } catch (error) {
      if (error === HALTED) return; // shutdown gave up: the batch is neither stored nor released
      throw error;
    } finally {
      this.holding.delete(stream);
    }
    if (batch.length > 0) this.options.metrics.flushed(reason, events(), (performance.now() - started) / 1000);

    this.ring.release(batch);
    for (const chunk of batch) chunk.settle?.();
    this.inFlight.delete(taken[0]!.seq);
    this.wakeWaiters();
    await this.forgetOldBatches(stream);
    this.idle.push(stream);
    // More waiting than one batch, a flush or a drain in progress, durable requests waiting: keep going.
    if (this.ring.pendingEvents >= this.options.maxEvents || this.waiters.length > 0 || this.stopping || this.options.eager) this.kick(reason);
  }

  /**
   * One transaction's worth, retried until it is stored; returns the refusal when PostgreSQL
   * refuses the data itself. `beforeWrite` runs whenever the rows are known not to be stored and
   * may shrink them (false: nothing left to write).
   */
  private async store(
    stream: Stream,
    rows: () => Rows[],
    what: (id: string) => string,
    beforeWrite: () => boolean = () => true,
    operation: (id: string) => Promise<void> = (id) => stream.write(id, rows()),
    id: string = crypto.randomUUID(),
  ): Promise<WriteError | undefined> {
    let uncertain = false;
    for (let attempt = 0; ; attempt++) {
      try {
        if (uncertain) {
          if (await stream.committed(id)) break;
          uncertain = false;
          this.uncertain--;
        }
        if (!beforeWrite()) break;
        await operation(id);
        break;
      } catch (caught) {
        const error = caught as WriteError;
        if (error.kind === "data") return error;
        if (error.kind === "unknown" && !uncertain) {
          uncertain = true;
          this.uncertain++;
        }
        this.options.metrics.flushErrors++;
        if (this.failures++ === 0 || this.failures % 50 === 0) {
          this.options.log(
            `flush: ${what(id)} not written${uncertain ? " or not known to be" : ""} (${error.message}); retrying, ${this.ring.heldEvents} events held`,
          );
        }
        await Bun.sleep(backoff(attempt));
        if (this.halted) throw HALTED;
      }
    }
    if (uncertain) this.uncertain--;
    if (this.failures > 0) this.options.log(`flush: storage is back after ${this.failures} failed attempts`);
    this.failures = 0;
    return undefined;
  }

  /** Halves a refused set of COPY lines until each refused line is alone, then dead-letters it. */
  private async isolate(stream: Stream, lines: string[], refusal: WriteError): Promise<void> {
    if (lines.length === 1) {
      const line = lines[0]!;
      const source = line.slice(0, line.indexOf("\t"));
      const deadLetterRefused = await this.store(stream, () => lines, () => "a dead letter", undefined, (id) => stream.deadLetter(id, line, refusal));
      if (deadLetterRefused) {
        // dead_letters holds text only, so this should not happen; if it does, say so loudly.
        this.options.metrics.eventsLost++;
        this.options.log(`flush: LOST an event of source ${source}: PostgreSQL refused it (${refusal.sqlstate} ${refusal.message}) and its dead letter (${deadLetterRefused.sqlstate} ${deadLetterRefused.message}); event: ${line.slice(0, 2000)}`);
        return;
      }
      this.options.metrics.eventsDeadLettered++;
      this.options.log(`flush: an event of source ${source} was refused by PostgreSQL (${refusal.sqlstate} ${refusal.message}); kept in dead_letters`);
      return;
    }
    this.options.metrics.isolationSplits++;
    const middle = lines.length >>> 1;
    for (const part of [lines.slice(0, middle), lines.slice(middle)]) {
      const partRefusal = await this.store(stream, () => part, (id) => `${part.length} events (batch ${id}, isolating a refusal)`);
      if (partRefusal) await this.isolate(stream, part, partRefusal);
    }
  }

  /** Chunks whose durable request gave up: released and told, while the batch is known unstored. */
  private dropAbandoned(batch: Chunk[]): Chunk[] {
    if (!batch.some((chunk) => chunk.abandoned)) return batch;
    const kept: Chunk[] = [];
    for (const chunk of batch) {
      if (!chunk.abandoned) {
        kept.push(chunk);
        continue;
      }
      this.ring.release([chunk]);
      chunk.settle?.(new Error("abandoned"));
    }
    return kept;
  }

  private async forgetOldBatches(stream: Stream): Promise<void> {
    if (this.uncertain > 0 || Date.now() - this.lastForget < FORGET_EVERY_MS) return;
    this.lastForget = Date.now();
    await stream.forgetBatches(FORGET_BATCHES_AFTER_HOURS).catch(() => {});
  }

  private committedBelow(): number {
    let lowest = this.ring.oldestPendingSeq;
    for (const seq of this.inFlight) if (seq < lowest) lowest = seq;
    return lowest;
  }

  private wakeWaiters(): void {
    const below = this.committedBelow();
    if (!this.waiters.some((w) => w.seq < below)) return;
    const still: Waiter[] = [];
    for (const waiter of this.waiters) (waiter.seq < below ? waiter.resolve() : still.push(waiter));
    this.waiters = still;
  }
}

const HALTED = Symbol("halted");

/** COPY text lines of a chunk, each with its "\n" (escaped newlines never end a line). */
function linesOf(rows: Rows): string[] {
  return (typeof rows === "string" ? rows : Buffer.from(rows).toString()).match(/[^\n]*\n/g) ?? [];
}

function backoff(attempt: number): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
