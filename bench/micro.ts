// Micro-benchmarks of the hot path's pure hops, per format: decode (bytes → values) and encode
// (validate + normalise + render COPY text, one pass in src/ingest/encode.ts). No HTTP, no I/O.
//   bun bench/micro.ts            prints a table; imported by bench/run.ts for RESULTS.md
import { gunzipSync } from "node:zlib";
import { decodeBody, type Format } from "../src/ingest/decode";
import { encodeEvents } from "../src/ingest/encode";
import { isRejection } from "../src/ingest/rejections";
import { payload, type PayloadName } from "./payloads";

export interface MicroResult {
  name: string;
  eventsPerSecond: number;
  microsecondsPerBody: number;
}

const LIMITS = { maxEventBytes: 1 << 20, maxDepth: 64 };
const CASES: [PayloadName, Format][] = [
  ["json-100", "json"],
  ["ndjson-100", "ndjson"],
  ["msgpack-100", "msgpack"],
  ["msgpack-records-100", "msgpack"],
  ["logtail-gzip-msgpack-1000", "msgpack"],
];

/** Events per second: the median of `rounds` timed rounds of 300 ms, after a warm-up round. */
function time(rounds: number, work: () => number): { perSecond: number } {
  const results: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const started = performance.now();
    let events = 0;
    while (performance.now() - started < 300) events += work();
    if (r > 0) results.push(events / ((performance.now() - started) / 1000));
  }
  results.sort((a, b) => a - b);
  return { perSecond: results[results.length >> 1]! };
}

export function runMicro(): MicroResult[] {
  const out: MicroResult[] = [];
  for (const [name, format] of CASES) {
    const { bodies, eventsPerBody, contentEncoding } = payload(name);
    const raw = bodies.map((b) => (contentEncoding === "gzip" ? gunzipSync(b) : Buffer.from(b)));
    let i = 0;
    if (contentEncoding === "gzip") {
      const g = time(5, () => {
        gunzipSync(bodies[i++ % bodies.length]!);
        return eventsPerBody;
      });
      out.push({ name: `gunzip ${name}`, eventsPerSecond: g.perSecond, microsecondsPerBody: (1e6 * eventsPerBody) / g.perSecond });
    }
    const d = time(5, () => {
      const events = decodeBody(raw[i++ % raw.length]!, format);
      if (isRejection(events)) throw new Error(events.message);
      return events.length;
    });
    out.push({ name: `decode ${name}`, eventsPerSecond: d.perSecond, microsecondsPerBody: (1e6 * eventsPerBody) / d.perSecond });
    const decoded = raw.map((b) => decodeBody(b, format) as unknown[]);
    const now = new Date().toISOString();
    const e = time(5, () => {
      // msgpack encode normalises in place; re-decode is outside the timing, so reuse is fine:
      // a second pass over already-normal values costs the same walk.
      const encoded = encodeEvents(decoded[i++ % decoded.length]!, format, 1, now, LIMITS);
      if (isRejection(encoded)) throw new Error(encoded.message);
      return encoded.count;
    });
    out.push({ name: `encode ${name}`, eventsPerSecond: e.perSecond, microsecondsPerBody: (1e6 * eventsPerBody) / e.perSecond });
  }
  return out;
}

if (import.meta.main) {
  for (const r of runMicro()) {
    console.log(`${r.name.padEnd(40)} ${Math.round(r.eventsPerSecond).toLocaleString("en").padStart(12)} events/s  ${r.microsecondsPerBody.toFixed(1).padStart(8)} µs/body`);
  }
}
