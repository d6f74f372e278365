// A seal thread (store/seal-pool.ts; calls and answers through rpc.ts). Two kinds of work:
// - "chunk": hot rows read back by a seal (packed) in, their blocks and filters out (store/blocks.ts:
//   ordering, the filters, deflate and the payload's frame); the sealer INSERTs them in its transaction.
// - The memory path (store/sealer.ts): each committed batch's tuples in ("batch"), made into blocks
//   per (generation, source, UTC day) as they arrive and INSERTed staged (tagged with the hot
//   generation, invisible to readers) over this thread's own connection; "finish" writes what a
//   generation's builders still hold and answers which batches (their commit seq) its blocks cover,
//   so the sealer can check them against flush_batches before it makes them visible.
// Calls run one at a time in the order they came (a finish after the batches before it).
import { threadId } from "node:worker_threads";
import postgres from "postgres";
import { BlockBuilder, buildBlocks, type Block, type Filter, type MovedRow } from "./blocks";
import { unpackRows, type SealCall, type Finished, type Handed } from "./seal-pool";
import { writeBlocks } from "./blocks-sql";
import { fieldsOf, tuplesOf } from "../codec/tuples";
import { microsText } from "../codec/time";
import { jsonbText } from "../codec/jsonb-text";
import { openPayloadBytes } from "../codec/pgp";
import { THREAD_GC_EVERY_BYTES } from "../memory/costs";
import { serve } from "../rpc";

interface Generation {
  builders: Map<string, BlockBuilder>;
  seqs: number[];
  events: number;
  blocks: number;
  /** A write failed: the generation is sealed from its rows instead (its staged blocks deleted then). */
  failed?: string;
}

let sql: postgres.Sql | undefined;
let maxEvents = 1000;
/**
 * Text this thread's builders hold together, at most (their heldBytes): past it the biggest
 * builders are cut into blocks early, so a thousand sparse sources do not keep a generation's
 * events here (store/seal-pool.ts SEAL_BUILDERS_MAX_BYTES: this thread's share).
 */
let maxHeldBytes = 32 * 1024 * 1024;
/**
 * A builder holds this many blocks' events before it cuts the oldest block's worth (store/blocks.ts
 * BlockBuilder): requests commit a little out of their order (8 senders of 1,000-line bodies in
 * bench/scale.ts), and a block cut from exactly what had come overlapped the next one, so the
 * merges rewrote most of a day afterwards (docs/storage.md).
 */
const HOLD_BLOCKS = 4;
/** Blocks per filter group of a builder, at most (store/blocks.ts BlockBuilder): about what a read-back chunk's group holds. */
const GROUP_BLOCKS = 8;
const generations = new Map<number, Generation>();

let handled = 0;
/** This thread's garbage is about the text it handles: a full collection of its small heap every THREAD_GC_EVERY_BYTES. */
function collectAfter(bytes: number): void {
  handled += bytes;
  if (handled < THREAD_GC_EVERY_BYTES) return;
  handled = 0;
  Bun.gc(true);
}

async function write(generation: Generation, id: number, items: (Block | Filter)[]): Promise<void> {
  if (items.length === 0 || generation.failed) return;
  try {
    await writeBlocks(sql!, items, id);
    for (const item of items) if (item.kind === "block") generation.blocks++;
  } catch (error) {
    generation.failed = (error as Error).message;
  }
}

async function batch(id: number, seq: number, rows: Uint8Array): Promise<Handed> {
  let generation = generations.get(id);
  if (!generation) generations.set(id, (generation = { builders: new Map(), seqs: [], events: 0, blocks: 0 }));
  generation.seqs.push(seq);
  if (generation.failed) return { held: heldNow() };
  const done: (Block | Filter)[] = [];
  for (const tuple of tuplesOf(rows)) {
    const fields = fieldsOf(tuple);
    const dt = microsText(fields.dt);
    const { line, shape, level } = jsonbText(fields.raw);
    const row: MovedRow = { id: String(fields.id), source_id: String(fields.sourceId), dt, line, shape, level };
    const key = `${row.source_id} ${dt.slice(0, 10)}`;
    let builder = generation.builders.get(key);
    if (!builder) generation.builders.set(key, (builder = new BlockBuilder(maxEvents, maxEvents * HOLD_BLOCKS, GROUP_BLOCKS)));
    for (const item of builder.add(row)) done.push(item);
    generation.events++;
  }
  collectAfter(rows.byteLength * 3);
  await write(generation, id, done);
  return { held: await bound() };
}

/** Past maxHeldBytes, the biggest builders (of any generation) are cut until half of it is held; what they hold then. */
async function bound(): Promise<number> {
  const all: { builder: BlockBuilder; generation: Generation; id: number }[] = [];
  let held = 0;
  for (const [id, generation] of generations)
    for (const builder of generation.builders.values()) {
      held += builder.heldBytes;
      all.push({ builder, generation, id });
    }
  if (held <= maxHeldBytes) return held;
  all.sort((a, b) => b.builder.heldBytes - a.builder.heldBytes);
  for (const { builder, generation, id } of all) {
    if (held <= maxHeldBytes / 2) break;
    held -= builder.heldBytes;
    await write(generation, id, builder.flush());
  }
  return held;
}

/** What every generation's builders hold. */
function heldNow(): number {
  let held = 0;
  for (const generation of generations.values()) for (const builder of generation.builders.values()) held += builder.heldBytes;
  return held;
}

async function finish(id: number): Promise<Finished> {
  const generation = generations.get(id);
  generations.delete(id);
  if (!generation) return { seqs: [], events: 0, blocks: 0, thread: threadId, held: heldNow() };
  for (const builder of generation.builders.values()) await write(generation, id, builder.close());
  return { seqs: generation.seqs, events: generation.events, blocks: generation.blocks, failed: generation.failed, thread: threadId, held: heldNow() };
}

let queue: Promise<unknown> = Promise.resolve();

serve<SealCall, unknown, string>(
  (call) => {
    const run = async (): Promise<unknown> => {
      switch (call.kind) {
        case "chunk":
          return { items: buildBlocks(unpackRows(call.chunk), call.chunk.maxEvents), thread: threadId };
        case "unseal":
          // Each text in a buffer of its own (transferred): the inflated one may be a view of more.
          return call.payloads.map((payload) => new Uint8Array(openPayloadBytes(payload)));
        case "open":
          sql ??= postgres(call.url, { max: 1, onnotice: () => {}, connection: { application_name: "logpond-seal" } });
          maxEvents = call.maxEvents;
          maxHeldBytes = call.maxHeldBytes;
          return undefined;
        case "batch":
          return batch(call.generation, call.seq, call.rows);
        case "finish":
          return finish(call.generation);
        case "close":
          await sql?.end({ timeout: 1 });
          sql = undefined;
          return undefined;
      }
    };
    const next = queue.then(run, run);
    queue = next.catch(() => {});
    return next;
  },
  {
    wire: (error) => (error instanceof Error ? error.message : String(error)),
    // Each payload and filter owns its buffer (codec/pgp.ts, codec/grams.ts).
    transfer: (value) => {
      if (Array.isArray(value)) return value.map((text: Uint8Array) => text.buffer as ArrayBuffer); // unseal's texts
      const items = (value as { items?: (Block | Filter)[] } | undefined)?.items;
      return items ? items.map((item) => (item.kind === "block" ? item.payload : item.slices).buffer as ArrayBuffer) : [];
    },
  },
);
