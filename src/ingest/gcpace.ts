// Part of the ingest path (between body and decode): paces JavaScriptCore's garbage collector by
// the bytes of request bodies handled, so the garbage each body leaves (decoded objects, JSON text,
// row strings, and the rows of chunks already flushed) is collected before it piles up beside a
// full ring buffer. Never blocks: Bun.gc(false) asks for a collection, it does not run one here.
//
// Measured (bench/RESULTS.md, issue 10): @logtail/node bodies of the realistic corpus with the
// ring full peaked at 683–914 MiB RSS without pacing, 506–515 MiB with it; msgpack-100 468 → 421
// MiB; no measurable CPU cost (json-100: 436–439 vs 428–439 CPU µs per request).
const PACE_BYTES = 8 * 1024 * 1024;
let since = 0;

export function handled(bytes: number): void {
  since += bytes;
  if (since >= PACE_BYTES) {
    since = 0;
    Bun.gc(false);
  }
}
