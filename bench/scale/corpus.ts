// bench/scale.ts's corpus: N distinct realistic events (bench/corpus.ts's shapes) over the 24 h
// before the run, spread over the sources by the split, with planted needles; written to an
// NDJSON file chunk by chunk, and read back from it as request bodies, never held in memory.
import { statSync } from "node:fs";
import { realisticEvent } from "../corpus";
import { fmt, progress } from "../lib";
import { DAY_MS } from "./options";

/** Events per generator chunk: each chunk has its own seed, so any chunk can be rebuilt alone. */
const CHUNK = 1000;
/** corpus.ts makes one event in 1,600 a 50–200 KB dump; here one in LARGE_EVERY (~0.6 B/event on average). */
const LARGE_EVERY = 200_000;
const SEED = 0x5ca1e;
const NEEDLES = 3;
export const RARE_NUMBER = 123457;
const RARE_COUNT = 40;
/** `--order time`: how far an event's dt strays from its place in the day (± this, uniform). */
export const JITTER_MS = 2_500;

type Rand = () => number;

/**
 * sfc32: 128 bits of state. corpus.ts's mulberry32 has 2^32 states in one cycle, and 20M events
 * draw ~2·10^9 numbers: chunks seeded with it would overlap and repeat events.
 */
function sfc32(a: number, b: number, c: number, d: number): Rand {
  const next = () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 16; i++) next(); // mixes the seed in
  return next;
}

/** murmur3's finaliser: a bijection of 32-bit integers that scatters neighbours. */
function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * The source of event k, from k alone: the loader reads it back from the line number, so the
 * NDJSON file holds the events exactly as sent (no routing field added to them).
 */
function sourceOf(k: number, p: Plan): number {
  const u = fmix32((k + SEED) >>> 0) / 4294967296;
  const at = p.cumulative.findIndex((c) => u < c);
  return at < 0 ? p.cumulative.length - 1 : at;
}

export interface Plan {
  /** Generation start: every dt lies in (t0 − 24 h, t0]. */
  t0: number;
  n: number;
  order: "time" | "random";
  /** Cumulative shares of the split, ending at exactly 1. */
  cumulative: number[];
  needles: string[];
  needleAt: Map<number, string>;
  rareAt: Set<number>;
}

/** Where the needles go: spread over the stream; their words are new each run (crypto), so reruns on one DATABASE_URL never find an old run's needle. */
export function plan(n: number, split: number[], order: "time" | "random"): Plan {
  const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
  const needles = Array.from({ length: NEEDLES }, () => `req-needle-${hex(8)}`);
  const needleAt = new Map(needles.map((needle, i) => [Math.floor(((i + 0.37) * n) / NEEDLES), needle] as const));
  const rareAt = new Set<number>();
  for (let i = 0; i < RARE_COUNT; i++) {
    let k = Math.floor(((i + 0.61) * n) / RARE_COUNT);
    while (needleAt.has(k)) k++; // a needle's event is not also a rare number's
    rareAt.add(k);
  }
  const total = split.reduce((a, b) => a + b, 0);
  const cumulative = split.map((_, i) => split.slice(0, i + 1).reduce((a, b) => a + b, 0) / total);
  return { t0: Date.now(), n, order, cumulative, needles, needleAt, rareAt };
}

interface Access {
  message: string;
  request_id: string;
  http: { status: number; bytes: number };
}

/** Sets an access event's byte count, in its field and in its access-log line. */
function setBytes(event: Access, bytes: number): void {
  event.message = event.message.replace(`" ${event.http.status} ${event.http.bytes} "`, `" ${event.http.status} ${bytes} "`);
  event.http.bytes = bytes;
}

/** An access event (corpus.ts's nginx shape): drawn until one comes, for the planted fields. */
function accessEvent(r: Rand, dt: string): Access {
  for (;;) {
    const event = realisticEvent(r, dt, 0);
    if ("http" in event) return event as unknown as Access;
  }
}

/** Event k's time: its share of the day give or take JITTER_MS (time order), or anywhere in it (random). */
function eventTime(r: Rand, k: number, p: Plan): string {
  if (p.order === "random") return new Date(p.t0 - Math.floor(r() * DAY_MS)).toISOString();
  const at = p.t0 - DAY_MS + Math.floor(((k + 0.5) * DAY_MS) / p.n) + Math.floor((r() - 0.5) * 2 * JITTER_MS);
  return new Date(Math.min(p.t0, Math.max(p.t0 - DAY_MS + 1, at))).toISOString();
}

/** Event k of the stream. Index 0 to realisticEvent: its "large" slot is index 7 of 1,600, used here only once in LARGE_EVERY. */
function scaleEvent(r: Rand, k: number, p: Plan): Record<string, unknown> {
  const dt = eventTime(r, k, p);
  const needle = p.needleAt.get(k);
  if (needle !== undefined) {
    const event = accessEvent(r, dt);
    event.request_id = needle;
    event.message = event.message.replace(/req-\S+$/, needle);
    return event as unknown as Record<string, unknown>;
  }
  if (p.rareAt.has(k)) {
    const event = accessEvent(r, dt);
    setBytes(event, RARE_NUMBER);
    return event as unknown as Record<string, unknown>;
  }
  const event = realisticEvent(r, dt, k % LARGE_EVERY === LARGE_EVERY / 2 ? 7 : 0);
  // The rare number stays rare: one in 250,001 access events would draw it by chance.
  const http = (event as unknown as Partial<Access>).http;
  if (http?.bytes === RARE_NUMBER) setBytes(event as unknown as Access, RARE_NUMBER + 1);
  return event;
}

export interface Corpus {
  file: string;
  bytes: number;
  seconds: number;
  perSource: number[];
}

/** Writes the N events to `file` chunk by chunk (NDJSON, one event per line). */
export async function writeCorpus(file: string, n: number, p: Plan): Promise<Corpus> {
  const started = performance.now();
  const sink = Bun.file(file).writer({ highWaterMark: 4 << 20 });
  const perSource = p.cumulative.map(() => 0);
  for (let chunk = 0; chunk * CHUNK < n; chunk++) {
    const r = sfc32(SEED, chunk, fmix32(chunk ^ 0x9e3779b9), 0x51ed270b);
    const lines: string[] = [];
    for (let k = chunk * CHUNK; k < Math.min(n, (chunk + 1) * CHUNK); k++) {
      lines.push(JSON.stringify(scaleEvent(r, k, p)));
      perSource[sourceOf(k, p)]!++;
    }
    sink.write(`${lines.join("\n")}\n`);
    if (chunk % 100 === 99) await sink.flush();
    if (chunk % 2000 === 1999) progress(`generated ${fmt((chunk + 1) * CHUNK)} of ${fmt(n)} events`);
  }
  await sink.end();
  return { file, bytes: statSync(file).size, seconds: (performance.now() - started) / 1000, perSource };
}

// ---- request bodies -------------------------------------------------------------------------

/** One source's JSON array being built from NDJSON lines, without decoding them. */
class BodyBuilder {
  private buffer = new Uint8Array(2 << 20);
  private length = 1;
  events = 0;

  add(line: Uint8Array): void {
    const needed = this.length + line.length + 2;
    if (needed > this.buffer.length) {
      const bigger = new Uint8Array(Math.max(needed, this.buffer.length * 2));
      bigger.set(this.buffer.subarray(0, this.length));
      this.buffer = bigger;
    }
    this.buffer[0] = 0x5b; // [
    if (this.events > 0) this.buffer[this.length++] = 0x2c; // ,
    this.buffer.set(line, this.length);
    this.length += line.length;
    this.events++;
  }

  take(): Uint8Array {
    this.buffer[this.length++] = 0x5d; // ]
    const body = this.buffer.slice(0, this.length);
    this.length = 1;
    this.events = 0;
    return body;
  }
}

export interface Body {
  source: number;
  events: number;
  body: Uint8Array;
}

/**
 * The file's lines as request bodies of at most `batch` events of one source each, read as they are
 * sent. In time order every source's pending body also goes each `batch` lines of the stream, so a
 * sparse source's request covers seconds of its day (as a shipper's flush interval), not hours.
 */
export async function* requestBodies(file: string, batch: number, p: Plan): AsyncGenerator<Body> {
  const builders = p.cumulative.map(() => new BodyBuilder());
  let k = 0;
  let rest: Uint8Array | undefined;
  for await (const chunk of Bun.file(file).stream()) {
    let data = chunk;
    if (rest) {
      data = new Uint8Array(rest.length + chunk.length);
      data.set(rest);
      data.set(chunk, rest.length);
    }
    let start = 0;
    for (let end = data.indexOf(10, start); end >= 0; end = data.indexOf(10, start)) {
      const source = sourceOf(k++, p);
      const builder = builders[source]!;
      builder.add(data.subarray(start, end));
      start = end + 1;
      if (builder.events >= batch) yield { source, events: builder.events, body: builder.take() };
      if (p.order === "time" && k % batch === 0) {
        for (const [other, pending] of builders.entries()) {
          if (pending.events > 0) yield { source: other, events: pending.events, body: pending.take() };
        }
      }
    }
    rest = start < data.length ? data.slice(start) : undefined;
  }
  for (const [source, builder] of builders.entries()) {
    if (builder.events > 0) yield { source, events: builder.events, body: builder.take() };
  }
}
