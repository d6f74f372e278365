// The service's memory, built from the Config: the bound (BUFFER_MAX_BYTES + 200 MiB, docs/memory.md),
// what the ring costs of it, the gate requests are admitted by (gate.ts: bytes charged, decode
// lanes) and the GC pacer (gcpace.ts). Registers the memory gauges.
import type { Flusher } from "../buffer/flusher";
import { RING_COST_FACTOR, type Ring } from "../buffer/ring";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { Gate } from "./gate";
import { GcPacer } from "./gcpace";

/** What the process may use beside a full buffer: the aim is peak RSS ≤ BUFFER_MAX_BYTES + this. */
export const HEADROOM_BYTES = 200 * 1024 * 1024;
/**
 * What the process holds beside the ring and the requests, kept out of the requests' room: all of
 * the headroom. Idle ~75 MiB, the decode threads' heaps (~12 MiB each), one slice's objects per
 * decode lane, the flush thread's heap (postgres.js copies every COPY write), garbage between two
 * collections. Less (150 MiB) lets big bodies peak higher, no faster (docs/memory.md).
 */
export const PROCESS_RESERVE_BYTES = HEADROOM_BYTES;

/**
 * RSS less the ring's free slabs past BUFFER_MAX_BYTES + this → the GC pacer's collections are
 * full ones. Half of the headroom: the other half is for the garbage of the next PACE_BYTES of bodies.
 */
const GC_FULL_ABOVE_BUFFER_BYTES = HEADROOM_BYTES / 2;
/** The whole RSS past BUFFER_MAX_BYTES + this → full collections may come three times as often (gcpace.ts). */
const GC_PRESSED_ABOVE_BUFFER_BYTES = (HEADROOM_BYTES * 3) / 4;

export interface Memory {
  /** Whether a request may be read and decoded now, and if not why (docs/memory.md). */
  readonly gate: Gate;
  /** Asks for garbage collections by body bytes handled (full ones when memory is short). */
  readonly gcPacer: GcPacer;
  /**
   * Memory some other work holds while it runs (a seal's chunk, store/sealer.ts), kept out of the
   * requests' room (at most a quarter of BUFFER_MAX_BYTES) until the returned function is called.
   */
  hold(bytes: number): () => void;
}

/** `lanes`: the decode threads (offload.ts), as many big requests as may decode at once. */
export function startMemory(config: Config, { ring, flusher, metrics, lanes }: { ring: Ring; flusher: Flusher; metrics: Registry; lanes: number }): Memory {
  // Paced by what the flusher wrote too, for rows in buffers of their own (durable requests, rows
  // over 1 MiB, replayed spills): when clients stop, the buffer drains with no request to pace the
  // collector, and such chunks would pile up. Rows in the ring's slabs are no garbage; counting
  // them too costs @logtail/node bodies 10% of the main thread in collections.
  const gcPacer = new GcPacer(config.bufferMaxBytes + GC_FULL_ABOVE_BUFFER_BYTES, config.bufferMaxBytes + GC_PRESSED_ABOVE_BUFFER_BYTES, () => ({
    rss: process.memoryUsage.rss(),
    spare: ring.spareBytes,
  }));
  flusher.subscribe((batch) => {
    let bytes = 0;
    for (const part of batch.rows) if (!(part.buffer instanceof SharedArrayBuffer)) bytes += part.byteLength;
    if (bytes > 0) gcPacer.handled(bytes);
  });
  // The room requests being read and decoded may take: what BUFFER_MAX_BYTES + 200 MiB leaves
  // beside what the ring costs and what the process holds anyway, that is what the ring leaves of
  // BUFFER_MAX_BYTES. Counts only, so the answer does not hang on when the collector last ran (a
  // sampled RSS lags: bodies of tens of MB pass the bound before it shows them).
  const requestsBound = config.bufferMaxBytes + HEADROOM_BYTES - PROCESS_RESERVE_BYTES;
  let held = 0;
  const gate = new Gate({
    budgetBytes: config.ingestInflightMaxBytes,
    room: () => requestsBound - Math.max(ring.chargedBytes * RING_COST_FACTOR, ring.memoryBytes) - held,
    lanes,
  });
  // At most a quarter of the buffer: a small BUFFER_MAX_BYTES must still leave requests room.
  const hold = (asked: number) => {
    const bytes = Math.min(asked, Math.floor(config.bufferMaxBytes / 4));
    held += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held -= bytes;
    };
  };
  metrics.gauge("logpond_ingest_inflight_bytes", "Memory charged to requests being decoded (INGEST_INFLIGHT_MAX_BYTES).", () => gate.bytes);
  metrics.gauge("logpond_memory_held_bytes", "Memory other work holds out of the requests' room (a seal's chunk).", () => held);
  metrics.gauge("logpond_process_resident_bytes", "Resident memory of the process (RSS).", () => process.memoryUsage.rss());
  metrics.gauge("logpond_process_heap_bytes", "JavaScript heap in use.", () => process.memoryUsage().heapUsed);
  return { gate, gcPacer, hold };
}
