// The service's memory, built from the Config: the bound (BUFFER_MAX_BYTES + 200 MiB, issue 10),
// what the ring costs of it, the in-flight gate requests are charged to (inflight.ts) and the GC
// pacer (gcpace.ts) with its RSS sampler. Registers the memory gauges; stop() ends the sampler.
import type { Flusher } from "../buffer/flusher";
import { RING_COST_FACTOR, type Ring } from "../buffer/ring";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { GcPacer } from "./gcpace";
import { InFlight } from "./inflight";

/** What the process may use beside a full buffer (issue 10: peak RSS ≤ BUFFER_MAX_BYTES + 200 MiB). */
export const HEADROOM_BYTES = 200 * 1024 * 1024;

/**
 * RSS less the ring's free slabs past BUFFER_MAX_BYTES + this → the GC pacer's collections are
 * full ones. Half of the headroom: the other half is for the garbage of the next PACE_BYTES of bodies.
 */
const GC_FULL_ABOVE_BUFFER_BYTES = HEADROOM_BYTES / 2;
/** The whole RSS past BUFFER_MAX_BYTES + this → full collections may come three times as often (gcpace.ts). */
const GC_PRESSED_ABOVE_BUFFER_BYTES = (HEADROOM_BYTES * 3) / 4;
/** How often the GC pacer reads the RSS between requests (admission uses its last reading). */
const RSS_SAMPLE_MS = 50;

export interface Memory {
  /** Memory of requests being decoded, process-wide (CONTRACT §3.1). */
  readonly inFlight: InFlight;
  /** Asks for garbage collections by body bytes handled (full ones when memory is short). */
  readonly gcPacer: GcPacer;
  stop(): void;
}

/** `bigFromBytes`: a request this big (decompressed) is a big one (offload.ts: decoded on a thread). */
export function startMemory(config: Config, ring: Ring, flusher: Flusher, metrics: Registry, bigFromBytes: number): Memory {
  // Paced by what the flusher wrote too, for rows in buffers of their own (durable requests, rows
  // over 1 MiB, replayed spills): when clients stop, the buffer drains with no request to pace the
  // collector, and such chunks piled up (bench/rss.ts, json-100 realistic before the slabs: VmHWM
  // 389–410 MiB under load, 494–503 MiB through the drain). Rows in the ring's slabs are no
  // garbage; counting them too cost @logtail/node bodies 10% of the main thread in collections.
  const gcPacer = new GcPacer(config.bufferMaxBytes + GC_FULL_ABOVE_BUFFER_BYTES, config.bufferMaxBytes + GC_PRESSED_ABOVE_BUFFER_BYTES, () => ({
    rss: process.memoryUsage.rss(),
    spare: ring.spareBytes,
  }));
  flusher.subscribe((batch) => {
    let bytes = 0;
    for (const part of batch.rows) if (!(part.buffer instanceof SharedArrayBuffer)) bytes += part.byteLength;
    if (bytes > 0) gcPacer.handled(bytes);
  });
  // The room requests being decoded may take: what BUFFER_MAX_BYTES + 200 MiB leaves beside what
  // the ring costs, and for a big request (a decode thread's) beside another big one, beside the
  // whole process's RSS at the last reading when that is more (garbage not yet collected, threads'
  // heaps, allocators' free pages). Requests in flight are in that RSS and charged too: the double
  // count is the margin for the reading's age (≤ RSS_SAMPLE_MS). 4 MB JSON bodies from 64
  // connections (bench/rss.ts json-6400) peaked at 531–532 MiB without the RSS, 376–450 with it,
  // at 24–31k events/s against 20–21k. Bodies of tens of MB can still pass the bound: a big one
  // alone among big ones is judged by the ring only (docs/known-gaps.md). Small requests are judged
  // by the ring only: by the RSS, one big body's decoding refused the small batches of every other
  // client (test/reliability/hostile-load.test.ts).
  const processBound = config.bufferMaxBytes + HEADROOM_BYTES;
  const ringCost = () => Math.max(ring.heldBytes * RING_COST_FACTOR, ring.memoryBytes);
  const inFlight = new InFlight(
    config.ingestInflightMaxBytes,
    () => processBound - ringCost(),
    () => processBound - Math.max(ringCost(), gcPacer.rssBytes),
    bigFromBytes,
  );
  metrics.gauge("logpond_ingest_inflight_bytes", "Memory charged to requests being decoded (INGEST_INFLIGHT_MAX_BYTES).", () => inFlight.bytes);
  metrics.gauge("logpond_process_resident_bytes", "Resident memory of the process (RSS).", () => process.memoryUsage.rss());
  metrics.gauge("logpond_process_heap_bytes", "JavaScript heap in use.", () => process.memoryUsage().heapUsed);
  const sampler = setInterval(() => gcPacer.sample(), RSS_SAMPLE_MS);
  sampler.unref();
  return { inFlight, gcPacer, stop: () => clearInterval(sampler) };
}
