// Part of the ingest path (after body, after encode): paces JavaScriptCore's garbage collector by
// the bytes of request bodies and of their COPY rows handled, so the garbage each body leaves (decoded objects, JSON text,
// row strings, and flushed rows that had a buffer of their own: the ring's slabs are reused, not
// garbage) is collected before it piles up beside a full ring buffer. Every PACE_BYTES it runs a collection; a full one only when
// memory is past one of two marks. Reads the RSS and the ring's gauges (given) when it collects,
// never for admission (gate.ts decides by counts).
//
// Measured under wrk -c64 on a shared box (issue 10): realistic @logtail/node bodies with the ring
// full peaked at 683–914 MiB RSS unpaced, 506–515 MiB paced; msgpack-100 with the ring full, A/B
// against the previous commit (bench/ab.ts): 478 / 730 → 386 / 453 MiB; no measurable CPU cost
// (json-100: 428–439 CPU µs per request either way).
// Quick collections leave old garbage (flushed ring chunks, big strings) to JSC's own full
// collections, which let a heap of ~400 MiB grow far past it: json-100 realistic with the ring full
// still peaked at 564–610 MiB. A full collection costs 25–40 ms there (bench/rss.ts, shared box),
// so it runs only past a mark (in practice when the ring is nearly full and clients get 503 anyway),
// and never more than 10% of the time (a small BUFFER_MAX_BYTES puts the mark under idle RSS).
// Rows count as well as bodies: msgpackr records bodies are a third of their rows' size.
// Free slabs are the ring's, kept for reuse, not garbage: the first mark leaves them out (counted,
// a burst's slabs kept RSS past it afterwards, and the full collections that followed put
// json-100's p99 at half load from 15 to 42 ms). But garbage left in their shadow stays when the
// ring fills them again: after a burst, RSS went from 305 MiB (220 of them free slabs) to 439–465
// within 3 s of the next one (realistic @logtail/node bodies, bench/rss.ts, a 2 ms RSS sampler).
// So past a second mark, on the whole RSS, full collections may take a quarter of the time instead
// of a tenth (one of 30–110 ms held the next off for up to a second while RSS climbed). (Judging
// instead the RSS the process would have were the ring to fill now passed that mark with a nearly
// empty ring: realistic json-100's p99 at half load went to 26–45 ms in a full bench run.)
// Quick collections are synchronous eden ones (bun:jsc edenGC, ~0.2 ms): Bun.gc(false) only asks
// for one, which runs later in the loop, after more requests have been decoded. Either runs in a
// microtask, once the request that handled the bytes is off the stack: run inside it, they kept
// its decoded objects alive and moved them to the old generation, which only full collections
// free (bench/rss.ts, realistic @logtail/node bodies, 3 rounds each way: VmHWM 391/403/421 MiB
// against 408/421/441, events/s 2–8% higher). A setImmediate instead ran after every request of
// the loop's turn had been decoded: 513–555 MiB.
import { edenGC } from "bun:jsc";

const PACE_BYTES = 8 * 1024 * 1024;
/** A full collection waits this many times its last duration after it: ≤ 10% of the wall clock. */
const FULL_SPACING = 9;
/** Past the second mark: ≤ 25%. */
const PRESSED_SPACING = 3;

/** What the pacer reads: the RSS, and the ring's free memory in it. */
export interface Memory {
  rss: number;
  spare: number;
}

export class GcPacer {
  private since = 0;
  private lastFullEnded = -Infinity;
  private lastFullTook = 0;
  private queued = false;

  /**
   * `fullAboveBytes`: RSS less the ring's free memory past which the collection is a full one,
   * taking at most a tenth of the time; `pressedAboveBytes`: RSS past which it may take a quarter
   * (memory/budget.ts: the figures).
   */
  constructor(
    private readonly fullAboveBytes: number,
    private readonly pressedAboveBytes: number = Infinity,
    private readonly memory: () => Memory = () => ({ rss: process.memoryUsage.rss(), spare: 0 }),
    private readonly collect: (full: boolean) => void = (full) => (full ? Bun.gc(true) : edenGC()),
    private readonly now: () => number = () => performance.now(),
    private readonly later: (run: () => void) => void = queueMicrotask,
  ) {}

  handled(bytes: number): void {
    this.since += bytes;
    if (this.since < PACE_BYTES) return;
    this.since = 0;
    if (this.queued) return;
    this.queued = true;
    this.later(() => {
      this.queued = false;
      if (!this.collectFull()) this.collect(false);
    });
  }

  /** A full collection if a mark is passed and its spacing allows. */
  private collectFull(): boolean {
    const started = this.now();
    const { rss, spare } = this.memory();
    const spacing = rss > this.pressedAboveBytes ? PRESSED_SPACING : rss - spare > this.fullAboveBytes ? FULL_SPACING : 0;
    if (spacing === 0 || started < this.lastFullEnded + this.lastFullTook * spacing) return false;
    this.collect(true);
    this.lastFullEnded = this.now();
    this.lastFullTook = this.lastFullEnded - started;
    return true;
  }
}
