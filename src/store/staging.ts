// The sealer's memory path (docs/storage.md): each batch this process commits is handed, as the
// tuples it wrote, to the seal threads, which build its events into blocks of its hot generation
// and INSERT them staged (invisible to readers: drizzle/0011). Nothing is read back from log_hot.
// When the generation is sealed (store/sealer.ts), finish() says which batches its staged blocks
// cover; the sealer makes them visible if flush_batches holds each of them for the generation, and
// reads back the rows of the batches they do not cover (a batch committed by another process, or
// while more than MAX_PENDING_BYTES waited for the threads). When the staged blocks cannot be
// trusted — a thread that died, a write that failed, a generation opened before the start — the
// whole generation is read back. Anything this path misses costs a read-back, never an event.
// With ingest workers each worker process has its Staging, and the sealer asks them all as one
// (`stagerGroup`): a generation is published only if every process answers for it.
// May touch: nothing itself (the seal threads write; store/seal-worker.ts).
import type { Finished, SealPool } from "./seal-pool";

/** What the sealer asks of the memory path, wherever its builders run: a Staging, or several as one. */
export interface Stager {
  /** A generation being opened, told before its commit: resolved once every holder of builders knows it. */
  opening(start: number): void | Promise<void>;
  /** The hot generations log_hot has now (their first ids). */
  known(starts: readonly number[]): void;
  /** Ends `generation`'s memory path (every builder of it written): the batches its staged blocks cover, or why they cannot be trusted. */
  finish(generation: number): Promise<Finished | string>;
}

/**
 * Several processes' stagings as one (the ingest workers', cluster/): a generation's staged blocks
 * are trusted only when every member answers for its own; the batches covered are all of theirs.
 */
export function stagerGroup(members: () => readonly Stager[]): Stager {
  return {
    async opening(start) {
      await Promise.all(members().map((member) => member.opening(start)));
    },
    known(starts) {
      for (const member of members()) member.known(starts);
    },
    async finish(generation) {
      const answers = await Promise.all(members().map((member) => member.finish(generation)));
      const refused = answers.find((answer) => typeof answer === "string");
      if (refused !== undefined) return refused;
      const all = answers as Finished[];
      return {
        seqs: all.flatMap((answer) => answer.seqs),
        events: all.reduce((sum, answer) => sum + answer.events, 0),
        blocks: all.reduce((sum, answer) => sum + answer.blocks, 0),
      };
    },
  };
}

/** A committed batch as the flusher tells it (buffer/batch.ts CommittedBatch). */
export interface HandedBatch {
  seq: number;
  firstId: number;
  rows: readonly Uint8Array[];
}

/**
 * Tuples handed to the threads and not yet built, at most: past it a batch is not handed (its rows
 * are read back at the seal) rather than let memory grow while the threads fall behind.
 */
export const MAX_PENDING_BYTES = 64 * 1024 * 1024;

interface State {
  /** Parts of batches handed to the threads (a batch is split by source-day over them: SealPool.route). */
  handed: number;
  /** Why this generation's staged blocks cannot be made visible; set once. */
  givenUp?: string;
  /**
   * A batch of it was not handed (too much waited for the threads): none after it is either, so
   * what is read back is the generation's tail, not batches between the staged ones (blocks of a
   * day built from both would overlap all along it, for the merges to rewrite).
   */
  skipping?: boolean;
}

export class Staging implements Stager {
  /** The hot generations (their first ids) batches may go to, ascending. */
  private starts: number[] = [];
  /**
   * Generations this process opened while the memory path ran: only theirs can be whole here (an
   * older one holds batches from before the start, whose flush_batches rows may be forgotten).
   */
  private readonly eligible = new Set<number>();
  private readonly states = new Map<number, State>();
  /** Generations finish() was called for: later batches of theirs are not handed (their seal has begun). */
  private readonly finished = new Set<number>();
  /** What finish() answered, kept while the generation exists (a seal retried after "busy" asks again). */
  private readonly results = new Map<number, Promise<Finished | string>>();
  private pending = 0;
  /** What the threads' builders hold, as last told (SealPool.heldBytes), and its hold's release. */
  private builders: { bytes: number; release: () => void } | undefined;
  /** Batches handed and events in them, in all (the sealer's metrics). */
  readonly totals = { batches: 0, bytes: 0, skipped: 0 };

  constructor(
    private readonly pool: SealPool,
    private readonly generationIds: number,
    /** Keeps what is handed and not yet built out of the requests' memory (memory/budget.ts): returns its release. */
    private readonly hold?: (bytes: number) => () => void,
  ) {}

  get pendingBytes(): number {
    return this.pending;
  }

  /** The generations log_hot has now (their first ids), and one being opened: a batch goes to the one its first id falls in. */
  known(starts: readonly number[]): void {
    this.starts = [...new Set(starts)].sort((a, b) => a - b);
    for (const generation of this.finished) if (!this.starts.includes(generation)) this.finished.delete(generation);
    for (const generation of this.eligible) if (!this.starts.includes(generation)) this.eligible.delete(generation);
    for (const generation of this.results.keys()) if (!this.starts.includes(generation)) this.results.delete(generation);
  }

  /** A generation this process is opening (store/sealer.ts closeGeneration): told before its commit, so before any batch of it. */
  opening(start: number): void {
    this.eligible.add(start);
    this.known([...this.starts, start]);
  }

  private generationOf(id: number): number | undefined {
    for (let i = this.starts.length - 1; i >= 0; i--) {
      const start = this.starts[i]!;
      if (start <= id) return id < start + this.generationIds ? start : undefined;
    }
    return undefined;
  }

  /** A batch this process committed (Flusher.subscribe): its tuples are copied (the ring reuses them) and handed to a thread. */
  committed(batch: HandedBatch): void {
    const generation = this.generationOf(batch.firstId);
    if (generation === undefined || this.finished.has(generation) || !this.eligible.has(generation)) return;
    let state = this.states.get(generation);
    if (!state) this.states.set(generation, (state = { handed: 0 }));
    if (state.givenUp) return;
    let bytes = 0;
    for (const rows of batch.rows) bytes += rows.byteLength;
    // Not handed: its rows are read back at the seal (it has no staged block).
    if (state.skipping || this.pending + bytes > MAX_PENDING_BYTES) {
      state.skipping = true;
      this.totals.skipped++;
      return;
    }
    // Each (source, UTC day) to one thread, so its blocks of a generation come from one builder;
    // the batch is covered only if every part of it is (end()).
    const parts = this.pool.route(batch.rows);
    this.totals.batches++;
    this.totals.bytes += bytes;
    for (const [index, part] of parts.entries()) {
      const size = part.byteLength;
      if (size === 0) continue;
      this.pending += size;
      const release = this.hold?.(size);
      state.handed++;
      const done = () => {
        this.pending -= size;
        release?.();
        this.holdBuilders();
      };
      this.pool.handOff(generation, batch.seq, index, part).then(done, (error: Error) => {
        done();
        state.givenUp ??= `a seal thread failed: ${error.message}`;
      });
    }
  }

  /** Keeps what the threads' builders hold out of the requests' memory, as they last said (their bound: SealPool). */
  private holdBuilders(): void {
    if (!this.hold) return;
    const bytes = this.pool.heldBytes;
    if ((this.builders?.bytes ?? 0) === bytes) return;
    this.builders?.release();
    this.builders = bytes > 0 ? { bytes, release: this.hold(bytes) } : undefined;
  }

  /**
   * Ends `generation`'s memory path: every thread's last blocks of it written. Returns the batches
   * its staged blocks cover, or why they are not to be trusted (then it is sealed from its rows).
   */
  finish(generation: number): Promise<Finished | string> {
    let result = this.results.get(generation);
    if (!result) this.results.set(generation, (result = this.end(generation)));
    return result;
  }

  private async end(generation: number): Promise<Finished | string> {
    this.finished.add(generation);
    const state = this.states.get(generation);
    this.states.delete(generation);
    if (!this.eligible.has(generation)) return "opened before this process's memory path";
    // Nothing handed here: nothing of it is staged by this process (its batches, if any, are read back).
    if (!state) return { seqs: [], events: 0, blocks: 0 };
    const finished = await this.pool.finish(generation);
    this.holdBuilders();
    if (state.givenUp) return state.givenUp;
    if (finished.failed) return finished.failed;
    // One seq per part a thread built: a thread started again since knows none of its predecessor's parts.
    if (finished.seqs.length !== state.handed) return `the seal threads built ${finished.seqs.length} of ${state.handed} parts of batches`;
    return { ...finished, seqs: [...new Set(finished.seqs)] };
  }
}
