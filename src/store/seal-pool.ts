// The seal threads: blocks (store/blocks.ts: ordering, filters, deflate, the payload's frame — 10 µs
// and more per event) are made on SEAL_WORKERS threads, never on the thread that answers HTTP.
// - A chunk of hot rows a seal read back goes to the thread with the fewest calls waiting; its
//   blocks come back and the sealer INSERTs them in its transaction (store/sealer.ts).
// - A committed batch's tuples (the memory path) are split by (source, UTC day) over the threads
//   (codec/tuples.ts routeTuples), so each source-day of a generation is built by one thread and its
//   blocks follow one another in time; each thread keeps its own builders and INSERTs staged blocks
//   over its own connection (store/seal-worker.ts), and finish() asks every thread what it covered
//   of a generation.
// A thread that fails fails only its own calls and the next call starts a new one: a chunk's seal
// rolls back (the rows stay hot), a generation whose batches a thread lost is sealed from its rows.
import { availableParallelism } from "node:os";
import type { Block, Filter, MovedRow } from "./blocks";
import { ThreadClient } from "../rpc";
import { routeTuples } from "../codec/tuples";

/**
 * A chunk of rows for a thread, packed: every field of every row concatenated into one string,
 * UTF-8 encoded into a buffer of its own that is transferred, not copied, and each field's length.
 * Posting the row objects cost 17–34 µs of CPU per row (Bun's structured clone); posting the
 * joined string still cost 10–17 µs a row on the sending thread (a realistic 13,000-row chunk is
 * 8.7 M UTF-16 units: 136–230 ms to post), encoding it and transferring the bytes 3–5 (docs/storage.md).
 */
export interface Chunk {
  /** The fields' text, UTF-8. */
  bytes: Uint8Array;
  /** ROW_FIELDS lengths per row, in UTF-16 code units (of the text `bytes` decodes to). */
  lengths: Int32Array;
  maxEvents: number;
}

const ROW_FIELDS = 6;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function packRows(rows: readonly MovedRow[], maxEvents: number): Chunk {
  const parts: string[] = new Array(rows.length * ROW_FIELDS);
  const lengths = new Int32Array(rows.length * ROW_FIELDS);
  let k = 0;
  for (const row of rows) {
    // A level is null when absent or empty (blocks.ts), so "" stands for null.
    for (const field of [row.id, row.source_id, row.dt, row.line, row.shape, row.level ?? ""]) {
      parts[k] = field;
      lengths[k++] = field.length;
    }
  }
  return { bytes: encoder.encode(parts.join("")), lengths, maxEvents };
}

export function unpackRows(chunk: Chunk): MovedRow[] {
  const { lengths } = chunk;
  const text = decoder.decode(chunk.bytes);
  const rows: MovedRow[] = new Array(lengths.length / ROW_FIELDS);
  let at = 0;
  const next = (k: number) => text.slice(at, (at += lengths[k]!));
  for (let i = 0, k = 0; i < rows.length; i++, k += ROW_FIELDS) {
    const id = next(k);
    const source_id = next(k + 1);
    const dt = next(k + 2);
    const line = next(k + 3);
    const shape = next(k + 4);
    const level = next(k + 5);
    rows[i] = { id, source_id, dt, line, shape, level: level === "" ? null : level };
  }
  return rows;
}

/** What a seal thread is asked (store/seal-worker.ts). */
export type SealCall =
  | { kind: "chunk"; chunk: Chunk }
  | { kind: "open"; url: string; maxEvents: number; maxHeldBytes: number }
  | { kind: "batch"; generation: number; seq: number; rows: Uint8Array }
  | { kind: "finish"; generation: number }
  | { kind: "close" };

/** What a thread answers a batch with: the text its builders hold after it (their `heldBytes`, all generations). */
export interface Handed {
  held: number;
}

/**
 * What the threads made of one generation's batches: the batches (commit seq) their staged blocks
 * cover. From the pool, a batch split over several threads is there once per thread that built a
 * part of it (store/staging.ts counts the parts).
 */
export interface Finished {
  seqs: number[];
  events: number;
  blocks: number;
  /** Why a thread's staged blocks are not whole (a write failed). */
  failed?: string;
  /** The thread (worker threadId) that answered; none for a pool's sum. */
  thread?: number;
  /** What the thread's builders hold after it (Handed.held). */
  held?: number;
}

/** What a thread sends back: the items in the order they are written, and the thread that built them. */
export interface Built {
  items: (Block | Filter)[];
  thread: number;
}

/**
 * Threads by default: one per core but one (the HTTP thread and PostgreSQL need one), at least one,
 * at most four. Reading back, one seal's single backend feeds a few tens of thousands of events per
 * second, which four threads out-build; from memory (SEAL_FROM=memory) a burst of 3 M events on 16
 * cores was in blocks 14.7 s after it with four and 12.4 s with eight (docs/storage.md), while each
 * thread in flight holds a chunk's memory on the read-back path.
 */
export function defaultSealWorkers(): number {
  return Math.min(4, Math.max(1, availableParallelism() - 1));
}

/**
 * Text the memory path's builders hold, all seal threads of a process together, at most (the
 * builders' `heldBytes`: 3 bytes per UTF-16 unit, above what the rows' strings and objects take in
 * the thread's heap); past its share a thread cuts its biggest builders early (store/seal-worker.ts).
 * A thousand sparse sources each kept a generation's events in a thread without it (791 MiB peak
 * in `npm run bench -- --quick`'s sources-1000); the sealer keeps what they hold out of the
 * requests' memory (store/staging.ts).
 */
export const SEAL_BUILDERS_MAX_BYTES = 32 * 1024 * 1024;

export interface SealPoolStats {
  /** Chunks of rows read back built on the threads; events built on them, read back or from the memory path. */
  chunks: number;
  events: number;
  /** The threads (worker threadId) that built them. */
  threads: Set<number>;
}

export class SealPool {
  private readonly threads: ThreadClient<SealCall, unknown, string>[] = [];
  readonly stats: SealPoolStats = { chunks: 0, events: 0, threads: new Set() };
  /** What each thread's builders hold (Handed.held), as it last answered. */
  private readonly held: number[] = [];

  /**
   * `url`: the memory path's connections (none: chunks only). `maxHeldBytes`: the text the memory
   * path's builders hold, all threads together, at most (each thread its share).
   */
  constructor(
    readonly size: number,
    private readonly url?: string,
    private readonly maxEvents = 1000,
    private readonly maxHeldBytes = SEAL_BUILDERS_MAX_BYTES,
  ) {}

  /** The text the memory path's builders hold now, all threads together (as each last said). */
  get heldBytes(): number {
    return this.held.reduce((sum, bytes) => sum + bytes, 0);
  }

  private all(): ThreadClient<SealCall, unknown, string>[] {
    while (this.threads.length < this.size) {
      const index = this.threads.length;
      const thread: ThreadClient<SealCall, unknown, string> = new ThreadClient<SealCall, unknown, string>({
        url: new URL("./seal-worker.ts", import.meta.url).href,
        name: "seal thread",
        answered: (message) => new Error(`a seal thread failed: ${message}`),
        lost: (reason) => new Error(reason),
        unsent: (reason) => new Error(reason),
        // A new thread (after one died) opens its connection before any other call reaches it.
        started: () => {
          if (this.url) {
            this.held[index] = 0; // a new thread holds nothing (its predecessor's builders are gone)
            thread.send({ kind: "open", url: this.url, maxEvents: this.maxEvents, maxHeldBytes: Math.ceil(this.maxHeldBytes / this.size) });
          }
        },
      });
      thread.start();
      this.threads.push(thread);
    }
    return this.threads;
  }

  /** The blocks and filters of `rows`, built on a thread (blocks.ts buildBlocks). */
  async build(rows: readonly MovedRow[], maxEvents: number): Promise<(Block | Filter)[]> {
    const thread = this.all().reduce((a, b) => (b.waiting < a.waiting ? b : a));
    const chunk = packRows(rows, maxEvents);
    const built = (await thread.call({ kind: "chunk", chunk }, [chunk.bytes.buffer as ArrayBuffer, chunk.lengths.buffer as ArrayBuffer])) as Built;
    this.stats.chunks++;
    this.stats.events += rows.length;
    this.stats.threads.add(built.thread);
    return built.items;
  }

  /** Calls waiting on the threads (hand-offs being built and written). */
  get waiting(): number {
    return this.threads.reduce((sum, thread) => sum + thread.waiting, 0);
  }

  /**
   * A committed batch's tuples split by (source, UTC day) over the threads (routeTuples): a new
   * buffer per thread, the ring's slabs left as they were; empty where no tuple goes.
   */
  route(rows: readonly Uint8Array[]): Uint8Array[] {
    if (this.size > 1) return routeTuples(rows, this.size);
    let bytes = 0;
    for (const part of rows) bytes += part.byteLength;
    const copy = new Uint8Array(bytes);
    let at = 0;
    for (const part of rows) {
      copy.set(part, at);
      at += part.byteLength;
    }
    return [copy];
  }

  /**
   * Thread `index`'s part of a committed batch (`rows`: from route(), transferred) for
   * `generation`'s staged blocks; settles when its blocks so far are written.
   */
  async handOff(generation: number, seq: number, index: number, rows: Uint8Array): Promise<void> {
    const thread = this.all()[index]!;
    const answer = (await thread.call({ kind: "batch", generation, seq, rows }, [rows.buffer as ArrayBuffer])) as Handed;
    this.held[index] = answer.held;
  }

  /** Every thread's last blocks of `generation` written; what they cover together. A thread that fails makes it `failed`. */
  async finish(generation: number): Promise<Finished> {
    const answers = await Promise.allSettled(this.all().map((thread) => thread.call({ kind: "finish", generation }) as Promise<Finished>));
    const whole: Finished = { seqs: [], events: 0, blocks: 0 };
    for (const [index, answer] of answers.entries()) {
      if (answer.status === "fulfilled" && answer.value.held !== undefined) this.held[index] = answer.value.held;
      if (answer.status === "rejected") {
        whole.failed ??= (answer.reason as Error).message;
        continue;
      }
      for (const seq of answer.value.seqs) whole.seqs.push(seq);
      whole.events += answer.value.events;
      whole.blocks += answer.value.blocks;
      if (answer.value.events > 0) {
        this.stats.events += answer.value.events;
        if (answer.value.thread !== undefined) this.stats.threads.add(answer.value.thread);
      }
      if (answer.value.failed) whole.failed ??= answer.value.failed;
    }
    whole.seqs.sort((a, b) => a - b);
    return whole;
  }

  async close(): Promise<void> {
    const threads = this.threads.splice(0);
    await Promise.allSettled(threads.map((thread) => thread.call({ kind: "close" })));
    for (const thread of threads) thread.close("the seal threads were closed");
  }
}
