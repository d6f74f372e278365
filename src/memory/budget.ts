// The service's memory, built from the Config: the bound (BUFFER_MAX_BYTES + 200 MiB, docs/memory.md),
// what the ring costs of it, the gate requests are admitted by (gate.ts: bytes charged, decode
// lanes) and the GC pacer (gcpace.ts). Registers the memory gauges.
import type { Flusher } from "../buffer/flusher";
import type { Ring } from "../buffer/ring";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { GC_FULL_ABOVE_BUFFER_BYTES, GC_PRESSED_ABOVE_BUFFER_BYTES, HEADROOM_BYTES, HELD_SHARE, PROCESS_RESERVE_BYTES, RING_COST_FACTOR } from "./costs";
import { Gate } from "./gate";
import { GcPacer } from "./gcpace";

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
  const hold = (asked: number) => {
    const bytes = Math.min(asked, Math.floor(config.bufferMaxBytes * HELD_SHARE));
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
