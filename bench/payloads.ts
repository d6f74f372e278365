// What the bench sends: per scenario and corpus a pool of ready request bodies (built once, before
// timing, so the load generator spends its CPU on HTTP, not on encoding). Two corpora: "synthetic"
// (one small event shape, the bench's original) and "realistic" (bench/corpus.ts).
import { encode as logtailEncode } from "@msgpack/msgpack";
import { Packr } from "msgpackr";
import { gzipSync } from "node:zlib";
import { realisticBatch } from "./corpus";

export interface Payload {
  contentType: string;
  contentEncoding?: string;
  eventsPerBody: number;
  bodies: Uint8Array[];
}

export const SCENARIO_FORMATS = ["json-100", "json-1", "ndjson-100", "msgpack-100", "msgpack-records-100", "logtail-gzip-msgpack-1000"] as const;
export type PayloadName = (typeof SCENARIO_FORMATS)[number];
export const CORPORA = ["synthetic", "realistic"] as const;
export type Corpus = (typeof CORPORA)[number];

const POOL = 64;

export function event(i: number, dt: number | Date = Date.now()) {
  return {
    dt,
    level: i % 10 === 0 ? "warn" : "info",
    message: `GET /api/items/${i % 5000} 200 in ${i % 97} ms`,
    context: {
      request_id: `req-${i.toString(36)}`,
      user: { id: `u${i % 1000}`, plan: i % 3 ? "free" : "pro" },
      http: { method: "GET", status: 200, bytes: 512 + (i % 4096) },
    },
  };
}

const syntheticBatch = (n: number, from: number, dates = false) => Array.from({ length: n }, (_, i) => event(from + i, dates ? new Date() : Date.now()));
const text = (s: string) => new TextEncoder().encode(s);

const cache = new Map<string, Payload>();

export function payload(name: PayloadName, corpus: Corpus = "synthetic"): Payload {
  const key = `${name}/${corpus}`;
  let built = cache.get(key);
  if (!built) cache.set(key, (built = build(name, corpus)));
  return built;
}

function build(name: PayloadName, corpus: Corpus): Payload {
  const batch = corpus === "synthetic" ? syntheticBatch : realisticBatch;
  const pool = <T>(make: (k: number) => T) => Array.from({ length: POOL }, (_, k) => make(k));
  switch (name) {
    case "json-100":
      return { contentType: "application/json", eventsPerBody: 100, bodies: pool((k) => text(JSON.stringify(batch(100, k * 100)))) };
    case "json-1":
      // k * 100 + 1: never one of the corpus's large events (single events are small ones).
      return { contentType: "application/json", eventsPerBody: 1, bodies: pool((k) => text(JSON.stringify(batch(1, k * 100 + 1)[0]))) };
    case "ndjson-100":
      return {
        contentType: "application/x-ndjson",
        eventsPerBody: 100,
        bodies: pool((k) =>
          text(
            batch(100, k * 100)
              .map((e) => JSON.stringify(e))
              .join("\n"),
          ),
        ),
      };
    case "msgpack-100": {
      const packr = new Packr({ useRecords: false });
      return { contentType: "application/msgpack", eventsPerBody: 100, bodies: pool((k) => packr.pack(batch(100, k * 100))) };
    }
    case "msgpack-records-100": {
      // A fresh Packr per body: each body carries its own record definitions, as one client
      // request does (a long-lived Packr with shared structures would not be decodable alone).
      return { contentType: "application/msgpack", eventsPerBody: 100, bodies: pool((k) => new Packr({ useRecords: true }).pack(batch(100, k * 100))) };
    }
    case "logtail-gzip-msgpack-1000":
      // @logtail/node: @msgpack/msgpack encode of up to batchSize (1000) events with Date dt, gzip.
      return {
        contentType: "application/msgpack",
        contentEncoding: "gzip",
        eventsPerBody: 1000,
        bodies: pool((k) => gzipSync(logtailEncode(batch(1000, k * 1000, true)))),
      };
  }
}
