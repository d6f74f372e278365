// Micro-benchmarks of the hot path's pure hops, per format and corpus: decode (bytes → values) and
// encode (validate + normalise + render COPY text, one pass in src/codec/encode.ts), and the sent
// key order the flush thread reads from the tuples (src/store/key-orders.ts). No HTTP, no I/O.
// "JSON.parse with the exact-number reviver" is what every realistic JSON body would cost
// if a whole-text check sent them all there; "decode" is what it costs now.
//   bun bench/micro.ts            prints a table; imported by bench/run.ts for RESULTS.md
import { gunzipSync } from "node:zlib";
import { decodeBody, keepExactNumbers } from "../src/codec/decode";
import type { Format } from "../src/codec/format";
import { encodeEvents, type Encoded } from "../src/codec/encode";
import { keyOrdersOf } from "../src/store/key-orders";
import { receptionOf, retentionGraceMs } from "../src/codec/reception";
import { DEFAULTS } from "../src/config";
import { AppError } from "../src/errors";
import { CORPORA, payload, type Corpus, type PayloadName } from "./payloads";

export interface MicroResult {
  name: string;
  eventsPerSecond: number;
  microsecondsPerBody: number;
}

const LIMITS = { maxEventBytes: 1 << 20, maxDepth: 64 };
const CASES: [PayloadName, Format][] = [
  ["json-100", "json"],
  ["json-1", "json"],
  ["ndjson-100", "ndjson"],
  ["msgpack-100", "msgpack"],
  ["msgpack-records-100", "msgpack"],
  ["logtail-gzip-msgpack-1000", "msgpack"],
];

/** Events per second: the median of `rounds` timed rounds of 250 ms, after a warm-up round. */
function time(rounds: number, work: () => number): { perSecond: number } {
  const results: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const started = performance.now();
    let events = 0;
    while (performance.now() - started < 250) events += work();
    if (r > 0) results.push(events / ((performance.now() - started) / 1000));
  }
  results.sort((a, b) => a - b);
  return { perSecond: results[results.length >> 1]! };
}

export function runMicro(corpora: readonly Corpus[] = CORPORA, rounds = 3): MicroResult[] {
  const out: MicroResult[] = [];
  const push = (name: string, eventsPerBody: number, perSecond: number) =>
    out.push({ name, eventsPerSecond: perSecond, microsecondsPerBody: (1e6 * eventsPerBody) / perSecond });
  for (const corpus of corpora) {
    for (const [name, format] of CASES) {
      const label = `${name} ${corpus}`;
      const { bodies, eventsPerBody, contentEncoding } = payload(name, corpus);
      const raw = bodies.map((b) => (contentEncoding === "gzip" ? gunzipSync(b) : Buffer.from(b)));
      let i = 0;
      if (contentEncoding === "gzip") {
        const g = time(rounds, () => {
          gunzipSync(bodies[i++ % bodies.length]!);
          return eventsPerBody;
        });
        push(`gunzip ${label}`, eventsPerBody, g.perSecond);
      }
      if (name === "json-100") {
        const texts = raw.map((b) => b.toString());
        const slow = time(rounds, () => (JSON.parse(texts[i++ % texts.length]!, keepExactNumbers) as unknown[]).length);
        push(`JSON.parse with the exact-number reviver ${label}`, eventsPerBody, slow.perSecond);
      }
      const d = time(rounds, () => {
        const events = decodeBody(raw[i++ % raw.length]!, format);
        if (events instanceof AppError) throw new Error(events.message);
        return events.length;
      });
      push(`decode ${label}`, eventsPerBody, d.perSecond);
      const decoded = raw.map((b) => decodeBody(b, format) as unknown[]);
      // The window ingestion uses (a 30-day source, the default settings): the bodies' events are in it.
      const now = receptionOf(Date.now(), 30, {
        maxFutureMs: DEFAULTS.INGEST_MAX_FUTURE_MS,
        retentionGraceMs: retentionGraceMs(DEFAULTS.RETENTION_SWEEP_INTERVAL_MS, DEFAULTS.SEAL_INTERVAL_MS),
      });
      const e = time(rounds, () => {
        // msgpack encode normalises in place; re-decode is outside the timing, so reuse is fine:
        // a second pass over already-normal values costs the same walk.
        const encoded = encodeEvents(decoded[i++ % decoded.length]!, format, 1, now, LIMITS);
        if (encoded instanceof AppError) throw new Error(encoded.message);
        return encoded.count;
      });
      push(`encode ${label}`, eventsPerBody, e.perSecond);
      // What the flush thread adds per write: each event's sent key order (store/key-orders.ts).
      const tuples = decoded.map((events) => Buffer.from((encodeEvents(events, format, 1, now, LIMITS) as Encoded).rows));
      const k = time(rounds, () => {
        keyOrdersOf([tuples[i++ % tuples.length]!]);
        return eventsPerBody;
      });
      push(`key orders ${label}`, eventsPerBody, k.perSecond);
    }
  }
  return out;
}

if (import.meta.main) {
  for (const r of runMicro()) {
    console.log(
      `${r.name.padEnd(60)} ${Math.round(r.eventsPerSecond).toLocaleString("en").padStart(12)} events/s  ${r.microsecondsPerBody.toFixed(1).padStart(9)} µs/body`,
    );
  }
}
