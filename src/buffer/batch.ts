// One batch on its flush stream, from its first try to release: the states between schedule and
// release in the machine flusher.ts draws. Each state is a type; each state's method returns only
// the states it may lead to, so the compiler keeps the transition table. Writes only through its
// Stream (store/copy.ts); drops a chunk only when its durable request gave up and the batch is
// known unstored; starts no try once halted.
import { WriteError, type Commit, type FlushConnection, type IdRange } from "../store/copy";
import { BUCKETS, type Counter, type CounterBy, type Histogram, type Registry } from "../metrics";
import { idOf, setIds, sourceOf, toText, tuplesOf } from "../codec/tuples";
import { backoff, type Clock } from "../timers";
import type { Chunk, Ring, Rows } from "./ring";

export type Stream = Pick<FlushConnection, "reserveIds" | "write" | "committed" | "deadLetter" | "forgetBatches"> & Partial<Pick<FlushConnection, "close">>;

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

/** What a stopped flusher still holds, for the spill file (buffer/spill.ts). */
export interface HeldBatch {
  /** The id a write of it was (or may have been) tried under; fresh for chunks never taken. */
  batchId: string;
  events: number;
  /** Tuples; their ids are set exactly when `ids` is. */
  rows: Rows[];
  ids?: IdRange;
}

/**
 * One transaction's worth: the batch itself; once it is refused, a part of it (a contiguous run of
 * its tuples, so of its ids) or one refused event's dead letter. attempt: failed tries so far (the
 * backoff's exponent); uncertain: a try's COMMIT answer was lost, so the next step is to ask.
 */
type Task =
  | { readonly kind: "batch"; readonly id: string; attempt: number; uncertain: boolean }
  | { readonly kind: "part"; readonly id: string; readonly tuples: Uint8Array[]; attempt: number; uncertain: boolean }
  | { readonly kind: "letter"; readonly id: string; readonly tuples: [Uint8Array]; readonly refusal: WriteError; attempt: number; uncertain: boolean };

/** A stream's batch from schedule to release. */
export interface Job {
  readonly stream: Stream;
  readonly batch: Batch;
  readonly reason: string;
  readonly started: number;
  /** Its first chunk's sequence number (the flusher's progress mark until release). */
  readonly firstSeq: number;
  /** What is left to store, in order: the batch; once it is refused, its parts and dead letters. */
  readonly todo: Task[];
}

// The states. What they share is in the job.
interface Reserve {
  readonly at: "reserve";
}
interface Write {
  readonly at: "write";
  readonly task: Task;
}
interface Backoff {
  readonly at: "backoff";
  readonly task: Task;
}
interface Probe {
  readonly at: "probe";
  readonly task: Task;
}
interface Committed {
  readonly at: "committed";
  readonly task: Task;
  readonly commit: Commit;
}
interface Refused {
  readonly at: "refused";
  readonly task: Task;
  readonly refusal: WriteError;
}
interface Release {
  readonly at: "release";
}
type State = Reserve | Write | Backoff | Probe | Committed | Refused | Release;

const RESERVE: Reserve = { at: "reserve" };
const RELEASE: Release = { at: "release" };
const BACKOFF = { firstMs: 100, maxMs: 5_000 };

/** The flush's /metrics series (docs/metrics.md). */
export interface FlushSeries {
  readonly flushes: CounterBy;
  readonly events: Counter;
  readonly duration: Histogram;
  readonly errors: Counter;
  readonly deadLettered: Counter;
  readonly lost: Counter;
  readonly splits: Counter;
}

export function flushSeries(metrics: Registry): FlushSeries {
  return {
    flushes: metrics.counterBy("logpond_flushes_total", "Committed flushes, by trigger.", "reason"),
    events: metrics.counter("logpond_flush_events_total", "Events written to PostgreSQL."),
    duration: metrics.histogram("logpond_flush_duration_seconds", "Committed flushes' duration, retries included.", BUCKETS.flush),
    errors: metrics.counter("logpond_flush_errors_total", "Flush attempts that failed (and were retried)."),
    deadLettered: metrics.counter("logpond_dead_letter_events_total", "Events PostgreSQL refused for their data, kept in dead_letters."),
    lost: metrics.counter("logpond_events_lost_total", "Events refused by PostgreSQL whose dead letter was refused too (logged in full)."),
    splits: metrics.counter("logpond_flush_isolation_splits_total", "Refused batches split in two to isolate bad events."),
  };
}

/** What the flusher lends its batches. */
export interface BatchContext {
  readonly ring: Ring;
  readonly metrics: FlushSeries;
  readonly log: (line: string) => void;
  readonly clock: Clock;
  readonly random: () => number;
  /** A drain missed its deadline: no try starts from now on. */
  halted(): boolean;
  /** A commit that stored log_events rows, for subscribers. */
  publish(batch: CommittedBatch): void;
}

export function newJob(stream: Stream, chunks: Chunk[], reason: string, now: number): Job {
  const batchId = crypto.randomUUID();
  return {
    stream,
    batch: { batchId, chunks },
    reason,
    started: now,
    firstSeq: chunks[0]!.seq,
    todo: [{ kind: "batch", id: batchId, attempt: 0, uncertain: false }],
  };
}

/** What a job still holds, for the hand-over: the batch's live chunks, or its parts not yet stored. */
export function heldOf({ batch, todo }: Job): HeldBatch[] {
  return todo.flatMap((task): HeldBatch[] => {
    if (task.kind !== "batch") return [{ batchId: task.id, events: task.tuples.length, rows: [Buffer.concat(task.tuples)], ids: rangeOf(task.tuples) }];
    const live = batch.chunks.filter((chunk) => !chunk.abandoned);
    if (live.length === 0) return [];
    const ids = batch.firstId !== undefined ? { firstId: batch.firstId, lastId: batch.lastId! } : undefined;
    return [{ batchId: batch.batchId, events: live.reduce((sum, chunk) => sum + chunk.events, 0), rows: live.map((chunk) => chunk.rows), ids }];
  });
}

export class BatchWriter {
  /** Failed tries in a row, any stream (for the log). */
  private failures = 0;
  /** Tasks whose last COMMIT answer was lost: batch ids must not be forgotten meanwhile. */
  uncertain = 0;
  /**
   * Since when flushes have been failing (undefined while storage works): the start of the
   * earliest try that failed since the last commit, or that commit if it came after the try began
   * (another stream's). A try that hangs until FLUSH_TIMEOUT_MS counts from its start, not its end.
   */
  failingSince: number | undefined;
  private lastCommit = -Infinity;
  /** The backoffs waiting now: wake() ends them. */
  private readonly waiting = new Set<() => void>();

  constructor(private readonly context: BatchContext) {}

  /** Drives a job to release (true), or until a halt (false: it stays as it is, for handOver). */
  async run(job: Job): Promise<boolean> {
    let state: State = RESERVE;
    for (;;) {
      switch (state.at) {
        case "reserve":
          if (this.context.halted()) return false;
          state = await this.reserve(job);
          break;
        case "write":
          if (this.context.halted()) return false;
          state = await this.write(job, state);
          break;
        case "backoff":
          state = await this.backoff(job, state);
          break;
        case "probe":
          if (this.context.halted()) return false;
          state = await this.probe(job, state);
          break;
        case "committed":
          state = this.committed(job, state);
          break;
        case "refused":
          state = this.refused(job, state);
          break;
        case "release":
          return true;
      }
    }
  }

  /** reserve: one block of ids for the batch's live chunks, set in their tuples in place (one pass each). */
  private async reserve(job: Job): Promise<Write | Backoff | Release> {
    const { batch, stream } = job;
    const task = job.todo[0]!;
    if (!this.dropAbandoned(batch)) return RELEASE;
    let firstId: number;
    const began = this.context.clock.now();
    try {
      firstId = await stream.reserveIds(eventsOf(batch));
    } catch (caught) {
      // No transaction was tried: whatever the answer, nothing of the batch can have committed.
      return this.failed(job, task, caught, false, began);
    }
    let next = firstId;
    for (const chunk of batch.chunks) {
      setIds(chunk.rows, chunk.events, next);
      next += chunk.events;
    }
    batch.firstId = firstId;
    batch.lastId = next - 1;
    return { at: "write", task };
  }

  /** write: one try of the task's transaction. */
  private async write(job: Job, { task }: Write): Promise<Committed | Refused | Backoff | Release> {
    const { batch, stream } = job;
    if (task.kind === "batch" && !this.dropAbandoned(batch)) return RELEASE;
    const began = this.context.clock.now();
    try {
      let commit: Commit;
      if (task.kind === "batch") commit = await stream.write(task.id, rowsOf(batch), { firstId: batch.firstId!, lastId: batch.lastId! });
      else if (task.kind === "part") commit = await stream.write(task.id, task.tuples, rangeOf(task.tuples));
      else {
        await stream.deadLetter(task.id, task.tuples[0], task.refusal);
        commit = { seq: null };
      }
      return { at: "committed", task, commit };
    } catch (caught) {
      if ((caught as WriteError).kind === "data") return { at: "refused", task, refusal: caught as WriteError };
      return this.failed(job, task, caught, true, began);
    }
  }

  /** A try begun at `began` that failed (or whose answer was lost, when `mayHaveCommitted`): counted, logged, retried. */
  private failed(job: Job, task: Task, caught: unknown, mayHaveCommitted: boolean, began: number): Backoff {
    const error = caught as WriteError;
    const since = Math.max(began, this.lastCommit);
    this.failingSince = Math.min(this.failingSince ?? since, since);
    if (mayHaveCommitted && error.kind === "unknown" && !task.uncertain) {
      task.uncertain = true;
      this.uncertain++;
    }
    this.context.metrics.errors.inc();
    if (this.failures++ === 0 || this.failures % 50 === 0) {
      this.context.log(
        `flush: ${describe(job, task)} not written${task.uncertain ? " or not known to be" : ""} (${error?.message}); retrying, ${this.context.ring.heldEvents} events held`,
      );
    }
    return { at: "backoff", task };
  }

  /** Ends every backoff now (the embedded PostgreSQL was just started again: no need to wait). */
  wake(): void {
    for (const end of [...this.waiting]) end();
  }

  /** backoff: waits (until woken, at most), then asks (the answer was lost), reserves (no ids yet) or writes again. */
  private async backoff(job: Job, { task }: Backoff): Promise<Probe | Reserve | Write> {
    await new Promise<void>((resolve) => {
      let cancel = () => {};
      const end = () => {
        this.waiting.delete(end);
        cancel();
        resolve();
      };
      this.waiting.add(end);
      cancel = this.context.clock.after(backoff(task.attempt++, BACKOFF, this.context.random), end);
    });
    if (task.uncertain) return { at: "probe", task };
    if (task.kind === "batch" && job.batch.firstId === undefined) return RESERVE;
    return { at: "write", task };
  }

  /** probe: did the try whose answer was lost commit? A failed probe says nothing of the rows: asked again. */
  private async probe(job: Job, { task }: Probe): Promise<Committed | Write | Backoff> {
    let earlier: Commit | false;
    const began = this.context.clock.now();
    try {
      earlier = await job.stream.committed(task.id);
    } catch (caught) {
      return this.failed(job, task, caught, false, began);
    }
    task.uncertain = false;
    this.uncertain--;
    return earlier ? { at: "committed", task, commit: earlier } : { at: "write", task };
  }

  /** committed: told to subscribers (a dead letter: counted); the next part, if any. */
  private committed(job: Job, { task, commit }: Committed): Write | Release {
    const { log, metrics } = this.context;
    if (this.failures > 0) log(`flush: storage is back after ${this.failures} failed attempts`);
    this.failures = 0;
    this.failingSince = undefined;
    this.lastCommit = this.context.clock.now();
    job.todo.shift();
    if (task.kind === "letter") {
      metrics.deadLettered.inc();
      log(
        `flush: an event of source ${sourceOf(task.tuples[0])} was refused by PostgreSQL (${task.refusal.sqlstate} ${task.refusal.message}); kept in dead_letters`,
      );
    } else if (commit.seq != null) {
      const { batch } = job;
      if (task.kind === "batch") this.context.publish({ seq: commit.seq, firstId: batch.firstId!, lastId: batch.lastId!, rows: rowsOf(batch) });
      else this.context.publish({ seq: commit.seq, ...rangeOf(task.tuples), rows: task.tuples });
    }
    return next(job);
  }

  /** refused: halves written in turn; one event alone becomes its dead letter; a refused dead letter is lost. */
  private refused(job: Job, { task, refusal }: Refused): Write | Release {
    const { log, metrics } = this.context;
    // Halted: the task stays as it is, for the hand-over (a refused dead letter is then not lost).
    if (this.context.halted()) return { at: "write", task };
    job.todo.shift();
    if (task.kind === "letter") {
      // dead_letters holds text only, so this should not happen; if it does, say so loudly.
      const tuple = task.tuples[0];
      metrics.lost.inc();
      log(
        `flush: LOST an event of source ${sourceOf(tuple)}: PostgreSQL refused it (${task.refusal.sqlstate} ${task.refusal.message}) and its dead letter (${refusal.sqlstate} ${refusal.message}); event: ${toText(tuple).slice(0, 2000)}`,
      );
      return next(job);
    }
    const tuples = task.kind === "batch" ? rowsOf(job.batch).flatMap((rows) => tuplesOf(rows)) : task.tuples;
    if (tuples.length === 1) {
      job.todo.unshift({ kind: "letter", id: crypto.randomUUID(), tuples: [tuples[0]!], refusal, attempt: 0, uncertain: false });
    } else {
      metrics.splits.inc();
      const middle = tuples.length >>> 1;
      job.todo.unshift(
        { kind: "part", id: crypto.randomUUID(), tuples: tuples.slice(0, middle), attempt: 0, uncertain: false },
        { kind: "part", id: crypto.randomUUID(), tuples: tuples.slice(middle), attempt: 0, uncertain: false },
      );
    }
    return next(job);
  }

  /** Chunks whose durable request gave up: released and told, while the batch is known unstored. False: none left. */
  private dropAbandoned(batch: Batch): boolean {
    if (batch.chunks.some((chunk) => chunk.abandoned)) {
      for (const chunk of batch.chunks) {
        if (!chunk.abandoned) continue;
        this.context.ring.release([chunk]);
        chunk.settle?.(new Error("abandoned"));
      }
      batch.chunks = batch.chunks.filter((chunk) => !chunk.abandoned);
    }
    return batch.chunks.length > 0;
  }
}

/** After a task is done: the job's next one, or release. */
function next(job: Job): Write | Release {
  const task = job.todo[0];
  return task ? { at: "write", task } : RELEASE;
}

function describe(job: Job, task: Task): string {
  if (task.kind === "letter") return "a dead letter";
  if (task.kind === "part") return `${task.tuples.length} events (batch ${task.id}, isolating a refusal)`;
  return `${eventsOf(job.batch)} events (batch ${task.id})`;
}

export function eventsOf(batch: Batch): number {
  return batch.chunks.reduce((sum, chunk) => sum + chunk.events, 0);
}

function rowsOf(batch: Batch): Uint8Array[] {
  return batch.chunks.map((chunk) => chunk.rows);
}

/** The ids of a contiguous run of tuples. */
function rangeOf(tuples: Uint8Array[]): IdRange {
  return { firstId: idOf(tuples[0]!), lastId: idOf(tuples[tuples.length - 1]!) };
}
