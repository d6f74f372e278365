// The decode worker's side (see offload.ts; calls and answers through rpc.ts): a body in, its COPY
// tuples out (copied out of the encoder's scratch once, then transferred), or the refusal's reason
// and message, or (it threw) the error's message. Runs prepareBody and nothing else.
import { pack } from "msgpackr";
import { ringMaxBytes } from "../buffer/ring";
import { DEFAULTS } from "../config";
import { AppError, type Reason } from "../errors";
import { prepareBody, type PrepareLimits } from "./prepare";
import type { Format } from "../codec/format";
import { microsOfMillis, type PgMicros } from "../codec/time";
import { serve } from "../rpc";

export interface Job {
  body: Uint8Array;
  format: Format;
  sourceId: number;
  receivedAt: PgMicros;
  limits: PrepareLimits;
}

/** The rows, or the refusal's reason and message; a job that threw comes back as an error (its message). */
export type Outcome = { rows: Uint8Array; count: number; refused?: number; refusal?: string } | { reason: Reason; message: string };

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
  prepareBody(Buffer.from(JSON.stringify(warmEvents)), "json", 0, microsOfMillis(Date.now()), WARM_LIMITS);
  prepareBody(Buffer.from(warmEvents.map((e) => JSON.stringify(e)).join("\n")), "ndjson", 0, microsOfMillis(Date.now()), WARM_LIMITS);
  prepareBody(pack(warmEvents), "msgpack", 0, microsOfMillis(Date.now()), WARM_LIMITS);
}

const IDLE_MS = 20;
let collecting: ReturnType<typeof setTimeout> | undefined;
serve<Job, Outcome, string>(
  (job) => {
    clearTimeout(collecting);
    try {
      return answer(job);
    } finally {
      // Each job is a body of 1 MiB or more: its objects are garbage now, and this heap's collector
      // would leave them for a while (a 32 MiB body's decoded objects are several times that). The
      // admission gate reads the process's RSS, this thread's heap included (memory/budget.ts). Once the
      // thread has been idle IDLE_MS: the job's message is off the stack, and a job that comes
      // meanwhile does not wait behind the collection (run right after each job, a refusal in
      // hostile-load.test.ts that takes 690–800 ms took 1,042).
      collecting = setTimeout(() => Bun.gc(true), IDLE_MS);
    }
  },
  {
    wire: (error) => (error instanceof Error ? error.message : String(error)),
    // The rows are a buffer of their own (answer()): moved, not copied.
    transfer: (outcome) => ("rows" in outcome ? [outcome.rows.buffer as ArrayBuffer] : []),
  },
);

function answer(job: Job): Outcome {
  const { body, format, sourceId, receivedAt, limits } = job;
  const prepared = prepareBody(body, format, sourceId, receivedAt, limits);
  if (prepared instanceof AppError) return { reason: prepared.reason, message: prepared.message };
  const rows = Buffer.from(prepared.rows); // a copy: the scratch stays here
  // A Buffer this size has an ArrayBuffer of its own (the pool is for small ones): transfer it.
  const own = rows.byteOffset === 0 && rows.buffer.byteLength === rows.length;
  const bytes = own ? new Uint8Array(rows.buffer) : new Uint8Array(rows);
  return { rows: bytes, count: prepared.count, refused: prepared.refused, refusal: prepared.refusal };
}
