// The seal threads: a chunk of hot rows is made into blocks (store/blocks.ts: ordering, filters,
// deflate, the payload's frame — 10 µs and more per event) on one of SEAL_WORKERS threads, never on
// the thread that answers HTTP; the sealer keeps reading rows and INSERTing the blocks that came
// back meanwhile (store/sealer.ts). A chunk goes to the thread with the fewest waiting. A thread
// that fails fails only its own chunks (the seal rolls back: the rows stay hot for the next pass)
// and the next chunk starts a new one.
import { availableParallelism } from "node:os";
import type { Block, Filter, MovedRow } from "./blocks";
import { ThreadClient } from "../rpc";

/** A chunk of rows for a thread: one string per column, values split by SEPARATOR. */
export interface Chunk {
  n: number;
  maxEvents: number;
  ids: string;
  sourceIds: string;
  dts: string;
  lines: string;
  shapes: string;
  /** Each level prefixed with LEVEL_MARK; an empty value is null. */
  levels: string;
}

/** What a thread sends back: the items in the order they are written, and the thread that built them. */
export interface Built {
  items: (Block | Filter)[];
  thread: number;
}

/**
 * Between two values of a column. JSON text from jsonb never holds U+0000 (jsonb refuses \u0000
 * and escapes control characters), nor do keys, ids or times: the columns are joined rather than
 * an object cloned per row (postMessage copies a few long strings in one go).
 */
const SEPARATOR = "\u0000";
const LEVEL_MARK = "=";

export function packRows(rows: readonly MovedRow[], maxEvents: number): Chunk {
  const column = (pick: (row: MovedRow) => string) => rows.map(pick).join(SEPARATOR);
  return {
    n: rows.length,
    maxEvents,
    ids: column((row) => row.id),
    sourceIds: column((row) => row.source_id),
    dts: column((row) => row.dt),
    lines: column((row) => row.line),
    shapes: column((row) => row.shape),
    levels: column((row) => (row.level === null ? "" : LEVEL_MARK + row.level)),
  };
}

export function unpackRows(chunk: Chunk): MovedRow[] {
  if (chunk.n === 0) return [];
  const ids = chunk.ids.split(SEPARATOR);
  const sourceIds = chunk.sourceIds.split(SEPARATOR);
  const dts = chunk.dts.split(SEPARATOR);
  const lines = chunk.lines.split(SEPARATOR);
  const shapes = chunk.shapes.split(SEPARATOR);
  const levels = chunk.levels.split(SEPARATOR);
  const rows: MovedRow[] = new Array(chunk.n);
  for (let i = 0; i < chunk.n; i++) {
    const level = levels[i]!;
    rows[i] = { id: ids[i]!, source_id: sourceIds[i]!, dt: dts[i]!, line: lines[i]!, shape: shapes[i]!, level: level === "" ? null : level.slice(1) };
  }
  return rows;
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
    const built = await thread.call(packRows(rows, maxEvents));
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
