// The seal threads: a chunk of hot rows is made into blocks (store/blocks.ts: ordering, filters,
// deflate, the payload's frame — 10 µs and more per event) on one of SEAL_WORKERS threads, never on
// the thread that answers HTTP; the sealer keeps reading rows and INSERTing the blocks that came
// back meanwhile (store/sealer.ts). A chunk goes to the thread with the fewest waiting. A thread
// that fails fails only its own chunks (the seal rolls back: the rows stay hot for the next pass)
// and the next chunk starts a new one.
import { availableParallelism } from "node:os";
import type { Block, Filter, MovedRow } from "./blocks";
import { ThreadClient } from "../rpc";

/**
 * A chunk of rows for a thread, packed: every field of every row concatenated into one string, and
 * each field's length. Posting the row objects cost 17–34 µs of CPU per row (Bun's structured
 * clone), the packed string 3–5 with the packing and unpacking (docs/storage.md).
 */
export interface Chunk {
  text: string;
  /** ROW_FIELDS lengths per row, in UTF-16 code units. */
  lengths: Int32Array;
  maxEvents: number;
}

const ROW_FIELDS = 6;

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
  return { text: parts.join(""), lengths, maxEvents };
}

export function unpackRows(chunk: Chunk): MovedRow[] {
  const { text, lengths } = chunk;
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

/** What a thread sends back: the items in the order they are written, and the thread that built them. */
export interface Built {
  items: (Block | Filter)[];
  thread: number;
}

/**
 * Threads by default: one per core but one (PostgreSQL's backend and the HTTP thread need one), at
 * least one, at most four — one seal's single backend reads and INSERTs at a few tens of thousands
 * of events per second, which four threads out-build.
 */
export function defaultSealWorkers(): number {
  return Math.min(4, Math.max(1, availableParallelism() - 1));
}

export interface SealPoolStats {
  /** Chunks built on the threads, and their events. */
  chunks: number;
  events: number;
  /** The threads (worker threadId) that built them. */
  threads: Set<number>;
}

export class SealPool {
  private readonly threads: ThreadClient<Chunk, Built, string>[] = [];
  readonly stats: SealPoolStats = { chunks: 0, events: 0, threads: new Set() };

  constructor(readonly size: number) {}

  /** The blocks and filters of `rows`, built on a thread (blocks.ts buildBlocks). */
  async build(rows: readonly MovedRow[], maxEvents: number): Promise<(Block | Filter)[]> {
    while (this.threads.length < this.size) {
      this.threads.push(
        new ThreadClient<Chunk, Built, string>({
          url: new URL("./seal-worker.ts", import.meta.url).href,
          name: "seal thread",
          answered: (message) => new Error(`a seal thread failed: ${message}`),
          lost: (reason) => new Error(reason),
          unsent: (reason) => new Error(reason),
        }),
      );
    }
    const thread = this.threads.reduce((a, b) => (b.waiting < a.waiting ? b : a));
    const chunk = packRows(rows, maxEvents);
    const built = await thread.call(chunk, [chunk.lengths.buffer as ArrayBuffer]);
    this.stats.chunks++;
    this.stats.events += rows.length;
    this.stats.threads.add(built.thread);
    return built.items;
  }

  close(): void {
    for (const thread of this.threads) thread.close("the seal threads were closed");
    this.threads.length = 0;
  }
}
