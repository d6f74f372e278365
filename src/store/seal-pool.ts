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
import { timeLeft } from "../service";
import { within } from "../timers";
import { jsonbText } from "../codec/jsonb-text";
import { routeTuples } from "../codec/tuples";

/**
 * A row as a seal or a merge reads it (postgres.js `.raw()`): its fields as PostgreSQL sent them,
 * decoded only on the seal thread, and its source and dt as text for the grouping done here
 * (store/seal-carry.ts, store/merge.ts). Decoding every field into a string here, then joining
 * and encoding them for the thread, took a fifth of this thread's CPU in a seal; copying the
 * fields one by one still took 7 % (docs/storage.md, "What a read-back costs logpond").
 */
export interface ReadRow {
  /**
   * id, source_id, dt, line, shape and level (MovedRow's fields, store/blocks.ts) in the form of
   * PostgreSQL's DataRow message: each a 32-bit big-endian length (-1: null), then its UTF-8 bytes.
   * A null shape: the line is JSON as sent, not jsonb's text yet (a chunk's: store/chunks.ts).
   */
  wire: Uint8Array;
  source_id: string;
  dt: string;
  /** The line's bytes: what chunks and carries are counted in. */
  size: number;
}

const ROW_FIELDS = 6;
const LINE = 3;

/**
 * A row of a `.raw()` result whose first columns are MovedRow's fields in order (the rest
 * ignored). postgres.js gives each field as a view of the DataRow message, and the message holds
 * them one after another behind their lengths: the six are then one view of it, not a copy. Laid
 * out otherwise, they are copied.
 */
export function readRow(raw: readonly (Buffer | null)[]): ReadRow {
  const first = raw[0]!;
  const start = first.byteOffset - 4;
  let at = start;
  let inPlace = start >= 0;
  for (let k = 0; k < ROW_FIELDS && inPlace; k++) {
    at += 4;
    const field = raw[k];
    if (!field) continue;
    if (field.buffer !== first.buffer || field.byteOffset !== at) inPlace = false;
    at += field.byteLength;
  }
  const wire = inPlace ? new Uint8Array(first.buffer, start, at - start) : wireOf(raw.slice(0, ROW_FIELDS));
  return { wire, source_id: raw[1]!.toString("latin1"), dt: raw[2]!.toString("latin1"), size: raw[LINE]!.byteLength };
}

/** A MovedRow as a ReadRow (tests; a seal without threads). */
export function readRowOf(row: MovedRow): ReadRow {
  const fields = [row.id, row.source_id, row.dt, row.line, row.shape, row.level].map((field) => (field === null ? null : encoder.encode(field)));
  return { wire: wireOf(fields), source_id: row.source_id, dt: row.dt, size: fields[LINE]!.byteLength };
}

function wireOf(fields: readonly (Uint8Array | null)[]): Uint8Array {
  const wire = Buffer.alloc(fields.reduce((sum, field) => sum + 4 + (field?.byteLength ?? 0), 0));
  let at = 0;
  for (const field of fields) {
    at = wire.writeInt32BE(field ? field.byteLength : -1, at);
    if (!field) continue;
    wire.set(field, at);
    at += field.byteLength;
  }
  return wire;
}

/**
 * Rows whose bytes are views of postgres.js's socket buffers, copied into one buffer of their
 * own: rows a seal carries into its next chunk would otherwise keep every buffer they were read
 * from alive (store/sealer.ts counts the carry as its rows' bytes).
 */
export function compactRows(rows: readonly ReadRow[]): ReadRow[] {
  const into = new Uint8Array(rows.reduce((sum, row) => sum + row.wire.byteLength, 0));
  let at = 0;
  return rows.map((row) => {
    into.set(row.wire, at);
    return { ...row, wire: into.subarray(at, (at += row.wire.byteLength)) };
  });
}

/**
 * A chunk of rows for a thread, packed: the rows' wire bytes one after another, in one buffer of
 * its own that is transferred, not copied. Posting the row objects cost 17–34 µs of CPU per row
 * (Bun's structured clone); posting one joined string 10–17 (docs/storage.md).
 */
export interface Chunk {
  bytes: Uint8Array;
  rows: number;
  maxEvents: number;
}

const encoder = new TextEncoder();

export function packRows(rows: readonly ReadRow[], maxEvents: number): Chunk {
  const bytes = new Uint8Array(rows.reduce((sum, row) => sum + row.wire.byteLength, 0));
  let at = 0;
  for (const row of rows) {
    bytes.set(row.wire, at);
    at += row.wire.byteLength;
  }
  return { bytes, rows: rows.length, maxEvents };
}

/**
 * The rows of a chunk, each field decoded on its own: a line of ASCII is then an 8-bit string
 * whatever its neighbours hold (one decoded text of the whole chunk is 16-bit as soon as one line
 * is not Latin-1, and a block's build costs about twice as much on 16-bit lines: codec/jsonb-text.ts).
 */
export function unpackRows(chunk: Chunk): MovedRow[] {
  const bytes = Buffer.from(chunk.bytes.buffer, chunk.bytes.byteOffset, chunk.bytes.byteLength);
  const rows: MovedRow[] = new Array(chunk.rows);
  let at = 0;
  const next = (): string | null => {
    const length = bytes.readInt32BE(at);
    at += 4;
    if (length < 0) return null;
    return bytes.toString("utf8", at, (at += length));
  };
  for (let i = 0; i < rows.length; i++) {
    const id = next()!;
    const source_id = next()!;
    const dt = next()!;
    const line = next()!;
    const shape = next();
    const level = next();
    // No shape: a chunk's line, the JSON as sent (store/chunks.ts chunkRows); made jsonb's text here.
    rows[i] = shape === null ? { id, source_id, dt, ...jsonbText(line) } : { id, source_id, dt, line, shape, level };
  }
  return rows;
}

/** ReadRows decoded here, as a thread decodes them (a seal without threads; tests). */
export function decodeRows(rows: readonly ReadRow[]): MovedRow[] {
  return unpackRows(packRows(rows, 0));
}

/** What a seal thread is asked (store/seal-worker.ts). */
export type SealCall =
  | { kind: "chunk"; chunk: Chunk }
  | { kind: "unseal"; payloads: Uint8Array[] }
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
  async build(rows: readonly ReadRow[], maxEvents: number): Promise<(Block | Filter)[]> {
    const thread = this.all().reduce((a, b) => (b.waiting < a.waiting ? b : a));
    const chunk = packRows(rows, maxEvents);
    const built = (await thread.call({ kind: "chunk", chunk }, [chunk.bytes.buffer as ArrayBuffer])) as Built;
    this.stats.chunks++;
    this.stats.events += rows.length;
    this.stats.threads.add(built.thread);
    return built.items;
  }

  /**
   * Chunk payloads (store/chunks.ts) opened on a thread — decrypted, inflated, checked (codec/pgp.ts
   * openPayloadBytes: 2.1 µs per event, which on the sealer's thread was the HTTP thread's time):
   * their texts, in order. The payloads are copied to the thread (small: postgres.js may have cut
   * them from a shared pool), the texts come back transferred.
   */
  async unseal(payloads: readonly Uint8Array[]): Promise<Buffer[]> {
    const thread = this.all().reduce((a, b) => (b.waiting < a.waiting ? b : a));
    const texts = (await thread.call({ kind: "unseal", payloads: [...payloads] })) as Uint8Array[];
    return texts.map((text) => Buffer.from(text.buffer, text.byteOffset, text.byteLength));
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

  /**
   * Ends every thread: each ends its connection after the calls queued before, until `deadline`
   * (performance.now() ms; none: as long as that takes); a thread still busy then (a statement
   * PostgreSQL does not answer: a frozen server) is terminated with its work unfinished. What it
   * wrote is never made visible: a block stays staged until its seal commits, and the seal reads
   * its generation back (docs/storage.md).
   */
  async close(deadline?: number): Promise<void> {
    const threads = this.threads.splice(0);
    const closed = Promise.allSettled(threads.map((thread) => thread.call({ kind: "close" })));
    await (deadline === undefined ? closed : within(closed, timeLeft(deadline)));
    for (const thread of threads) thread.close("the seal threads were closed");
  }
}
