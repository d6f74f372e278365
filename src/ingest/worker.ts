// The decode worker's side (see offload.ts; calls and answers through rpc.ts): a body in, its COPY
// tuples out (in a buffer of their own, transferred), or the refusal's reason and message, or (it
// threw) the error's message. Runs prepareBody and nothing else; frees the body once it is done.
import { edenGC } from "bun:jsc";
import { pack } from "msgpackr";
import { ringMaxBytes } from "../buffer/ring";
import { DEFAULTS } from "../config";
import { AppError, type Reason } from "../errors";
import { freeNow } from "../memory/buffers";
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

/**
 * A body decoded in slices (prepare.ts) leaves each slice's objects behind: an eden collection
 * after each MiB of them. A 15 MB realistic JSON array went +97 MiB of RSS with none, +45 with this
 * (+53 every 4 MiB, +130 decoded whole), 165–200 ms either way (a one-off probe of prepareBody
 * on json-big's body, bench/rss.ts, RSS read every ms; shared box).
 */
const SLICE_GC_BYTES = 1024 * 1024;
let sliced = 0;
function afterSlice(bytes: number): void {
  sliced += bytes;
  if (sliced < SLICE_GC_BYTES) return;
  sliced = 0;
  edenGC();
}

const IDLE_MS = 20;
/**
 * Bytes of bodies between two full collections when the thread is never idle IDLE_MS.
 * CPU per body and the thread's peak RSS (a one-off probe: prepareBody in a loop on realistic JSON
 * arrays, bodies and rows freed, shared box): a full collection after every body cost 78 ms per
 * 3.7 MB body (peak 91 MiB) and 215 ms per 14.9 MB one (114 MiB); every 32 MiB, 49 and 172 ms
 * (123 and 172 MiB); never, 50 and 177 ms (142 and 236 MiB); decoded whole, 58 and 246 ms.
 */
const COLLECT_EVERY_BYTES = 32 * 1024 * 1024;
let collecting: ReturnType<typeof setTimeout> | undefined;
let decoded = 0;
function collect(): void {
  decoded = 0;
  Bun.gc(true);
}
serve<Job, Outcome, string>(
  (job) => {
    clearTimeout(collecting);
    if (decoded >= COLLECT_EVERY_BYTES) collect(); // its timer did not fire before this job came
    decoded += job.body.byteLength;
    try {
      return answer(job);
    } finally {
      // Each job is a body of 1 MiB or more: its objects are garbage now, and this heap's collector
      // would leave them for a while (a 32 MiB body decoded whole makes several times that). Once
      // the thread has been idle IDLE_MS: the job's message is off the stack, and a job that comes
      // meanwhile does not wait behind the collection (run right after each job, a refusal in
      // hostile-load.test.ts that takes 690–800 ms took 1,042). Under a load that never leaves it
      // idle, every COLLECT_EVERY_BYTES of bodies, before the next one.
      collecting = setTimeout(collect, decoded >= COLLECT_EVERY_BYTES ? 0 : IDLE_MS);
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
