// Part of the ingest path (after body, after encode): paces JavaScriptCore's garbage collector by
// the bytes of request bodies and of their COPY rows handled, so the garbage each body leaves
// (decoded objects, JSON text, row strings, and flushed rows that had a buffer of their own: the
// ring's slabs are reused, not garbage) is collected before it piles up beside a full ring buffer.
// Every PACE_BYTES it runs a collection; a full one only when memory is past one of two marks.
// Reads the RSS and the ring's free slabs (given) when it collects, never for admission (gate.ts
// decides by counts). The measurements behind each choice: docs/memory.md, "The collector".
//
// - Quick collections leave old garbage (flushed chunks, big strings) to JSC's own full ones, which
//   let the heap grow far past the bound; a full one costs 25–110 ms, so it runs only past a mark,
//   and at most a tenth of the time (a small BUFFER_MAX_BYTES puts the mark under idle RSS).
// - The first mark leaves the ring's free slabs out: they are kept for reuse, and counting them
//   makes full collections follow every burst. Garbage in their shadow stays when the ring fills
//   them again, so past a second mark, on the whole RSS, full collections may take a quarter.
// - Quick collections are synchronous eden ones (edenGC): Bun.gc(false) only asks for one, which
//   runs after more requests have been decoded. Either runs in a microtask, once the request that
//   handled the bytes is off the stack: inside it, it keeps that request's objects alive into the
//   old generation, which only full collections free.
import { edenGC } from "bun:jsc";
import { GC_FULL_SPACING, GC_PRESSED_SPACING, PACE_BYTES } from "./costs";

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
    const spacing = rss > this.pressedAboveBytes ? GC_PRESSED_SPACING : rss - spare > this.fullAboveBytes ? GC_FULL_SPACING : 0;
    if (spacing === 0 || started < this.lastFullEnded + this.lastFullTook * spacing) return false;
    this.collect(true);
    this.lastFullEnded = this.now();
    this.lastFullTook = this.lastFullEnded - started;
    return true;
  }
}
