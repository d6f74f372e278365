// Part of the ingest path (after body, after encode): paces JavaScriptCore's garbage collector by
// the bytes of request bodies and of their COPY rows handled, so the garbage each body leaves (decoded objects, JSON text,
// row strings, and flushed rows that had a buffer of their own: the ring's slabs are reused, not
// garbage) is collected before it piles up beside a full ring buffer. Every PACE_BYTES it asks for a collection; a full, synchronous one only when
// the process's RSS is past its watermark. Reads nothing but the RSS; no timers.
//
// Measured under wrk -c64 on a shared box (issue 10): realistic @logtail/node bodies with the ring
// full peaked at 683–914 MiB RSS unpaced, 506–515 MiB paced; msgpack-100 with the ring full, A/B
// against the previous commit (bench/ab.ts): 478 / 730 → 386 / 453 MiB; no measurable CPU cost
// (json-100: 428–439 CPU µs per request either way).
// Bun.gc(false) leaves old garbage (flushed ring chunks, big strings) to JSC's own full
// collections, which let a heap of ~400 MiB grow far past it: json-100 realistic with the ring full
// still peaked at 564–610 MiB. A full collection costs 25–40 ms there (bench/rss.ts, shared box),
// so it runs only past the watermark (when the ring is nearly full and clients get 503 anyway), and
// never more than 10% of the time (a small BUFFER_MAX_BYTES puts the watermark under idle RSS).
// Rows count as well as bodies: msgpackr records bodies are a third of their rows' size.
const PACE_BYTES = 8 * 1024 * 1024;
/** A full collection waits this many times its last duration after it: ≤ 10% of the wall clock. */
const FULL_SPACING = 9;

export class GcPacer {
  private since = 0;
  private nextFullAt = 0;

  /** `fullAboveBytes`: RSS past which the collection is a full one (see server.ts for the figure). */
  constructor(
    private readonly fullAboveBytes: number,
    private readonly rss: () => number = () => process.memoryUsage.rss(),
    private readonly collect: (full: boolean) => void = (full) => Bun.gc(full),
    private readonly now: () => number = () => performance.now(),
  ) {}

  handled(bytes: number): void {
    this.since += bytes;
    if (this.since < PACE_BYTES) return;
    this.since = 0;
    const started = this.now();
    if (started < this.nextFullAt || this.rss() <= this.fullAboveBytes) return this.collect(false);
    this.collect(true);
    const ended = this.now();
    this.nextFullAt = ended + (ended - started) * FULL_SPACING;
  }
}
