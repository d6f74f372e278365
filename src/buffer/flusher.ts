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
// Ids: before a batch's first write attempt one block of ids is reserved and set in every tuple, in
// place (once, here, not on the accept path); retries, the exactly-once probe and isolation parts
// keep the batch id and the ids.
import { WriteError, type Commit, type FlushConnection, type IdRange } from "../store/copy";
import type { Metrics } from "../metrics";
import { idOf, setIds, sourceOf, toText, tuplesOf } from "../codec/tuples";
import type { Chunk, Ring, Rows } from "./ring";

export type Stream = Pick<FlushConnection, "reserveIds" | "write" | "committed" | "deadLetter" | "forgetBatches">;

/** A batch from take to commit, in a shape a spill file can serialise. */
export interface Batch {
  /** flush_batches key: the same for every try, so a lost COMMIT answer never stores it twice. */
  readonly batchId: string;
  /** The ring's chunks; a durable request that gave up is removed while the batch is unstored. */
  chunks: Chunk[];
  /**
   * Reserved before the first write attempt and set in the chunks' tuples: [firstId, lastId]; ids
   * of dropped chunks stay unused.
   */
  firstId?: number;
  lastId?: number;
}

/** What a commit stored, for the live tail: rows are the tuples as written (ids set). */
export interface CommittedBatch {
  seq: number;
  firstId: number;
  lastId: number;
  rows: readonly Uint8Array[];
}

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
  /** Tuples; their ids are set exactly when `ids` is. */
  rows: Rows[];
  ids?: IdRange;
}

/** Part of a refused batch being isolated, with the batch id it is written under. */
interface Part {
  id: string;
  tuples: Uint8Array[];
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
  private readonly listeners = new Set<(batch: CommittedBatch) => void>();
  /** Each stream's batch while it is being written; during isolation, its parts not yet stored. */
  private readonly holding = new Map<Stream, { batch: Batch; parts?: Set<Part> }>();

  constructor(
    private readonly ring: Ring,
    private readonly streams: readonly Stream[],
    private readonly options: FlusherOptions,
  ) {
    this.idle = [...streams];
  }

  start(): void {
    this.timer ??= setInterval(() => {
      this.kick("interval");
      this.ring.shed(performance.now());
    }, this.options.intervalMs);
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

  /** Called after each commit that stored log_events rows (never for dead letters); returns unsubscribe. */
  subscribe(listener: (batch: CommittedBatch) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * After a drain that missed its deadline: everything not known stored, handed over once (the
   * flusher writes none of it from now on). A batch being written keeps its batch id (and its ids
   * once it has them), so a try that commits after all is skipped at replay; so does each part of a
   * batch being split to isolate a refusal; chunks never taken get a fresh batch id.
   */
  handOver(): HeldBatch[] {
    this.halted = true;
    const held: HeldBatch[] = [];
    for (const { batch, parts } of this.holding.values()) {
      if (parts) {
        for (const part of parts) held.push({ batchId: part.id, events: part.tuples.length, rows: [Buffer.concat(part.tuples)], ids: rangeOf(part.tuples) });
        continue;
      }
      const live = batch.chunks.filter((chunk) => !chunk.abandoned);
      if (live.length === 0) continue;
      const ids = batch.firstId !== undefined ? { firstId: batch.firstId, lastId: batch.lastId! } : undefined;
      held.push({ batchId: batch.batchId, events: live.reduce((sum, chunk) => sum + chunk.events, 0), rows: live.map((chunk) => chunk.rows), ids });
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
      void this.run(stream, { batchId: crypto.randomUUID(), chunks: batch }, reason);
    }
  }

  private async run(stream: Stream, batch: Batch, reason: string): Promise<void> {
    const started = performance.now();
    const firstSeq = batch.chunks[0]!.seq;
    const events = () => batch.chunks.reduce((sum, chunk) => sum + chunk.events, 0);
    const keepLive = () => {
      this.dropAbandoned(batch);
      return batch.chunks.length > 0;
    };
    const write = async (id: string) => {
      if (batch.firstId === undefined) await this.assignIds(stream, batch);
      return stream.write(id, rowsOf(batch), { firstId: batch.firstId!, lastId: batch.lastId! });
    };
    try {
      this.holding.set(stream, { batch });
      const outcome = await this.store(stream, batch.batchId, (id) => `${events()} events (batch ${id})`, keepLive, write);
      if (outcome instanceof WriteError) {
        const parts = new Set<Part>();
        this.holding.set(stream, { batch, parts });
        await this.isolate(stream, { id: batch.batchId, tuples: rowsOf(batch).flatMap((rows) => tuplesOf(rows)) }, outcome, parts);
      } else if (outcome?.seq != null) {
        this.publish({ seq: outcome.seq, firstId: batch.firstId!, lastId: batch.lastId!, rows: rowsOf(batch) });
      }
    } catch (error) {
      if (error === HALTED) return; // shutdown gave up: the batch is neither stored nor released
      throw error;
    } finally {
      this.holding.delete(stream);
    }
    if (batch.chunks.length > 0) this.options.metrics.flushed(reason, events(), (performance.now() - started) / 1000);

    this.ring.release(batch.chunks);
    for (const chunk of batch.chunks) chunk.settle?.();
    this.inFlight.delete(firstSeq);
    this.wakeWaiters();
    await this.forgetOldBatches(stream);
    this.idle.push(stream);
    // More waiting than one batch, a flush or a drain in progress, durable requests waiting: keep going.
    if (this.ring.pendingEvents >= this.options.maxEvents || this.waiters.length > 0 || this.stopping || this.options.eager) this.kick(reason);
  }

  /** One block of ids for the batch, set in each chunk's tuples in place (one pass each). */
  private async assignIds(stream: Stream, batch: Batch): Promise<void> {
    const count = batch.chunks.reduce((sum, chunk) => sum + chunk.events, 0);
    const firstId = await stream.reserveIds(count);
    let next = firstId;
    for (const chunk of batch.chunks) {
      setIds(chunk.rows, chunk.events, next);
      next += chunk.events;
    }
    batch.firstId = firstId;
    batch.lastId = next - 1;
  }

  private publish(batch: CommittedBatch): void {
    for (const listener of this.listeners) {
      try {
        listener(batch);
      } catch (error) {
        this.options.log(`flush: a commit listener failed: ${(error as Error).message}`);
      }
    }
  }

  /**
   * One transaction's worth, retried until it is stored; returns the refusal when PostgreSQL
   * refuses the data itself, else the commit (undefined when nothing was left to write).
   * `beforeWrite` runs whenever the rows are known not to be stored and may shrink them (false:
   * nothing left to write).
   */
  private async store(
    stream: Stream,
    id: string,
    what: (id: string) => string,
    beforeWrite: () => boolean,
    operation: (id: string) => Promise<Commit | void>,
  ): Promise<WriteError | Commit | undefined> {
    let uncertain = false;
    let commit: Commit | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        if (uncertain) {
          const earlier = await stream.committed(id);
          if (earlier) {
            commit = earlier;
            break;
          }
          uncertain = false;
          this.uncertain--;
        }
        if (!beforeWrite()) break;
        commit = (await operation(id)) ?? { seq: null };
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
    return commit;
  }

  /**
   * Halves a refused part until each refused tuple is alone, then dead-letters it. `parts` holds
   * the parts not yet stored, each with the batch id it is (or will be) written under, so a stop
   * in the middle spills exactly what is left (handOver).
   */
  private async isolate(stream: Stream, refused: Part, refusal: WriteError, parts: Set<Part>): Promise<void> {
    const tuples = refused.tuples;
    if (tuples.length === 1) {
      const tuple = tuples[0]!;
      const source = sourceOf(tuple);
      const letter: Part = { id: crypto.randomUUID(), tuples };
      parts.add(letter);
      const outcome = await this.store(stream, letter.id, () => "a dead letter", () => true, (id) => stream.deadLetter(id, tuple, refusal));
      parts.delete(letter);
      const deadLetterRefused = outcome instanceof WriteError ? outcome : undefined;
      if (deadLetterRefused) {
        // dead_letters holds text only, so this should not happen; if it does, say so loudly.
        this.options.metrics.eventsLost++;
        this.options.log(`flush: LOST an event of source ${source}: PostgreSQL refused it (${refusal.sqlstate} ${refusal.message}) and its dead letter (${deadLetterRefused.sqlstate} ${deadLetterRefused.message}); event: ${toText(tuple).slice(0, 2000)}`);
        return;
      }
      this.options.metrics.eventsDeadLettered++;
      this.options.log(`flush: an event of source ${source} was refused by PostgreSQL (${refusal.sqlstate} ${refusal.message}); kept in dead_letters`);
      return;
    }
    this.options.metrics.isolationSplits++;
    const middle = tuples.length >>> 1;
    const halves: Part[] = [tuples.slice(0, middle), tuples.slice(middle)].map((half) => ({ id: crypto.randomUUID(), tuples: half }));
    for (const half of halves) parts.add(half);
    for (const half of halves) {
      // A part is a contiguous run of the batch's tuples, so its ids are a contiguous range too.
      const ids = rangeOf(half.tuples);
      const outcome = await this.store(stream, half.id, (id) => `${half.tuples.length} events (batch ${id}, isolating a refusal)`, () => true, (id) => stream.write(id, half.tuples, ids));
      parts.delete(half);
      if (outcome instanceof WriteError) await this.isolate(stream, half, outcome, parts);
      else if (outcome?.seq != null) this.publish({ seq: outcome.seq, ...ids, rows: half.tuples });
    }
  }

  /** Chunks whose durable request gave up: released and told, while the batch is known unstored. */
  private dropAbandoned(batch: Batch): void {
    if (!batch.chunks.some((chunk) => chunk.abandoned)) return;
    for (const chunk of batch.chunks) {
      if (!chunk.abandoned) continue;
      this.ring.release([chunk]);
      chunk.settle?.(new Error("abandoned"));
    }
    batch.chunks = batch.chunks.filter((chunk) => !chunk.abandoned);
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

function backoff(attempt: number): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function rowsOf(batch: Batch): Uint8Array[] {
  return batch.chunks.map((chunk) => chunk.rows);
}

/** The ids of a contiguous run of tuples. */
function rangeOf(tuples: Uint8Array[]): IdRange {
  return { firstId: idOf(tuples[0]!), lastId: idOf(tuples[tuples.length - 1]!) };
}
