// The decode worker's side (see offload.ts; calls and answers through rpc.ts): a body in, its COPY
// tuples out (in a buffer of their own, transferred), or the refusal's reason and message, or (it
// threw) the error's message. Runs prepareBody and nothing else; frees the body once it is done.
import { edenGC } from "bun:jsc";
import { pack } from "msgpackr";
import { DEFAULTS } from "../config";
import { AppError, type Reason } from "../errors";
import { freeNow } from "../memory/buffers";
import { ringMaxBytes, SLICE_GC_BYTES, THREAD_GC_EVERY_BYTES, THREAD_IDLE_GC_MS } from "../memory/costs";
import { prepareBody, type PrepareLimits } from "./prepare";
import type { Format } from "../codec/format";
import { microsOfMillis } from "../codec/time";
import { unbounded, type Reception } from "../codec/reception";
import { serve } from "../rpc";

export interface Job {
  body: Uint8Array;
  format: Format;
  sourceId: number;
  reception: Reception;
  limits: PrepareLimits;
}

/** The rows, or the refusal's reason and message; a job that threw comes back as an error (its message). */
export type Outcome =
  | { rows: Uint8Array; count: number; refused?: number; refusal?: string; tooOld?: number; tooFarAhead?: number }
  | { reason: Reason; message: string };

// Warm-up: the first big body would otherwise run the walk, the parsers and the encoder cold.
// Under the default configuration's limits, not the service's: a service with tight ones (a small
// BUFFER_MAX_EVENTS) would refuse the warm-up bodies before they reach the encoder.
const WARM_LIMITS: PrepareLimits = {
  maxEventBytes: DEFAULTS.INGEST_MAX_EVENT_BYTES,
  maxDepth: DEFAULTS.INGEST_MAX_DEPTH,
  maxDecompressedBytes: DEFAULTS.INGEST_MAX_DECOMPRESSED_BYTES,
  maxEventsPerRequest: DEFAULTS.INGEST_MAX_EVENTS_PER_REQUEST,
  bufferMaxEvents: DEFAULTS.BUFFER_MAX_EVENTS,
  ringMaxBytes: ringMaxBytes(DEFAULTS.BUFFER_MAX_BYTES),
};
const warmEvents = Array.from({ length: 8_000 }, (_, i) => ({ message: `warm-up ${i}`, level: "info", n: i, nested: { ok: true, list: [1, 2, 3] } }));
for (let round = 0; round < 3; round++) {
  prepareBody(Buffer.from(JSON.stringify(warmEvents)), "json", 0, unbounded(microsOfMillis(Date.now())), WARM_LIMITS);
  prepareBody(Buffer.from(warmEvents.map((e) => JSON.stringify(e)).join("\n")), "ndjson", 0, unbounded(microsOfMillis(Date.now())), WARM_LIMITS);
  prepareBody(pack(warmEvents), "msgpack", 0, unbounded(microsOfMillis(Date.now())), WARM_LIMITS);
}

// This thread's collector, by memory/costs.ts's cadence: an eden collection after each
// SLICE_GC_BYTES of slices (prepare.ts leaves each slice's objects behind), a full one once idle
// THREAD_IDLE_GC_MS, or every THREAD_GC_EVERY_BYTES of bodies under a load that never leaves it idle.
let sliced = 0;
function afterSlice(bytes: number): void {
  sliced += bytes;
  if (sliced < SLICE_GC_BYTES) return;
  sliced = 0;
  edenGC();
}

let collecting: ReturnType<typeof setTimeout> | undefined;
let decoded = 0;
function collect(): void {
  decoded = 0;
  Bun.gc(true);
}
serve<Job, Outcome, string>(
  (job) => {
    clearTimeout(collecting);
    if (decoded >= THREAD_GC_EVERY_BYTES) collect(); // its timer did not fire before this job came
    decoded += job.body.byteLength;
    try {
      return answer(job);
    } finally {
      // Each job is a big body: its objects are garbage now, and this heap's collector would leave
      // them for a while (a 32 MiB body decoded whole makes several times that). Not right after
      // the job: its message is still on the stack, and a job that comes meanwhile would wait.
      collecting = setTimeout(collect, decoded >= THREAD_GC_EVERY_BYTES ? 0 : THREAD_IDLE_GC_MS);
    }
  },
  {
    wire: (error) => (error instanceof Error ? error.message : String(error)),
    // The rows are a buffer of their own (answer()): moved, not copied.
    transfer: (outcome) => ("rows" in outcome ? [outcome.rows.buffer as ArrayBuffer] : []),
  },
);

function answer(job: Job): Outcome {
  const { body, format, sourceId, reception, limits } = job;
  const prepared = prepareBody(body, format, sourceId, reception, limits, afterSlice);
  if (prepared instanceof AppError) {
    freeNow(body);
    return { reason: prepared.reason, message: prepared.message };
  }
  // Sliced rows are at the start of a buffer of their own (prepare.ts): sent as they are. Others
  // are a view of the encoder's scratch, which stays here: copied once into a buffer of their own.
  const rows = prepared.own ? prepared.rows : new Uint8Array(prepared.rows);
  freeNow(body); // the rows are copied out of it: nothing reads it now
  return { rows, count: prepared.count, refused: prepared.refused, refusal: prepared.refusal, tooOld: prepared.tooOld, tooFarAhead: prepared.tooFarAhead };
}
