// Part of the ingest path (between body and decode): paces JavaScriptCore's garbage collector by
// the bytes of request bodies handled, so the garbage each body leaves (decoded objects, JSON text,
// row strings, and the rows of chunks already flushed) is collected before it piles up beside a
// full ring buffer. Never blocks: Bun.gc(false) asks for a collection, it does not run one here.
//
// Measured under wrk -c64 on a shared box (issue 10): realistic @logtail/node bodies with the ring
// full peaked at 683–914 MiB RSS unpaced, 506–515 MiB paced; msgpack-100 with the ring full, A/B
// against the previous commit (bench/ab.ts): 478 / 730 → 386 / 453 MiB; no measurable CPU cost
// (json-100: 428–439 CPU µs per request either way).
const PACE_BYTES = 8 * 1024 * 1024;
let since = 0;

export function handled(bytes: number): void {
  since += bytes;
  if (since >= PACE_BYTES) {
    since = 0;
    Bun.gc(false);
  }
}
