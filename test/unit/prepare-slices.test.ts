// Big NDJSON, JSON-array and MessagePack-array bodies are decoded and encoded in slices
// (ingest/prepare.ts, slices.ts, codec/bounds.ts): the same rows, the same count, the same refusals with the same messages as decoding
// them whole, on seeded random bodies and on bodies broken on purpose at random places; and the
// body is left as it was sent.
import { expect, test } from "bun:test";
import { Packr, pack } from "msgpackr";
import { checkEventCount, measureBody, msgpackArrayCuts, type CostLimits } from "../../src/codec/bounds";
import { decodeBody, msgpackSliceReader } from "../../src/codec/decode";
import type { Format } from "../../src/codec/format";
import { encodeEvents } from "../../src/codec/encode";
import { AppError } from "../../src/errors";
import { decodedInSlices, prepareBody, type PrepareLimits } from "../../src/ingest/prepare";
import { BIG_BODY_BYTES, SLICE_BYTES } from "../../src/memory/costs";
import { arrayCuts, ndjsonCuts } from "../../src/ingest/slices";
import { unbounded } from "../../src/codec/reception";

const LIMITS: PrepareLimits = {
  maxEventBytes: 64 * 1024,
  maxDepth: 16,
  maxDecompressedBytes: 100 << 20,
  maxEventsPerRequest: 100_000,
  bufferMaxEvents: 1_000_000,
  ringMaxBytes: 200 << 20,
};
const RECEIVED = 800_000_000_000_000;

/** Decoding whole, as prepareBody did before slices: the oracle. */
function whole(body: Buffer, format: Format, limits = LIMITS): { rows: Buffer; count: number } | AppError {
  const cost: CostLimits = {
    maxEvents: limits.maxEventsPerRequest,
    maxDecompressedBytes: limits.maxDecompressedBytes,
    maxDepth: limits.maxDepth,
    maxEventBytes: limits.maxEventBytes,
  };
  const measured = measureBody(body, format, cost);
  if (measured instanceof AppError) return measured;
  const events = decodeBody(body, format, cost);
  if (events instanceof AppError) return events;
  if (measured === undefined || events.length > measured) {
    const tooMany = checkEventCount(events.length, cost);
    if (tooMany) return tooMany;
  }
  const encoded = encodeEvents(events, format, 7, unbounded(RECEIVED), limits);
  if (encoded instanceof AppError) return encoded;
  if (encoded.rows.length > limits.ringMaxBytes)
    return new AppError(
      "never_fits",
      `Request holds ${encoded.rows.length} bytes of rows, more than the ingestion buffer can ever hold (${limits.ringMaxBytes} bytes of rows: BUFFER_MAX_BYTES / 1.2); split it into smaller requests`,
    );
  return { rows: Buffer.from(encoded.rows), count: encoded.count };
}

function sliced(body: Buffer, format: Format, limits = LIMITS): { rows: Buffer; count: number; own?: boolean } | AppError {
  const prepared = prepareBody(body, format, 7, unbounded(RECEIVED), limits);
  return prepared instanceof AppError ? prepared : { rows: Buffer.from(prepared.rows), count: prepared.count, own: prepared.own };
}

/** The same answer, byte for byte or reason and message; the body as it was. */
function expectSame(body: Buffer, format: Format, limits = LIMITS): void {
  const before = Buffer.from(body);
  const got = sliced(body, format, limits);
  expect(body.equals(before)).toBe(true);
  const want = whole(body, format, limits);
  if (want instanceof AppError) {
    expect(got).toBeInstanceOf(AppError);
    expect([(got as AppError).reason, (got as AppError).message]).toEqual([want.reason, want.message]);
  } else {
    expect(got).not.toBeInstanceOf(AppError);
    const { rows, count, own } = got as { rows: Buffer; count: number; own?: boolean };
    expect(own).toBe(true); // decoded in slices, not whole
    expect(count).toBe(want.count);
    expect(rows.equals(want.rows)).toBe(true);
  }
}

/** A seeded generator (mulberry32). */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NASTY = ['"', "\\", ",", "[", "]", "{", "}", "\n", "é", "日本", "😀", "\u2028", "\\u0000", " ", "},{", '\\"],['];

function text(next: () => number): string {
  let s = "";
  const n = Math.floor(next() * 12);
  for (let i = 0; i < n; i++) s += next() < 0.4 ? NASTY[Math.floor(next() * NASTY.length)] : String.fromCharCode(97 + Math.floor(next() * 26));
  return s;
}

function value(next: () => number, depth: number): unknown {
  const r = next();
  if (depth > 3 || r < 0.35) return text(next);
  if (r < 0.5) return Math.floor(next() * 1e6) * (next() < 0.5 ? 1 : -1);
  if (r < 0.55) return next() * 1e3;
  if (r < 0.6) return next() < 0.5 ? null : true;
  if (r < 0.75) return Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth + 1));
  return Object.fromEntries(Array.from({ length: Math.floor(next() * 4) }, () => [text(next), value(next, depth + 1)]));
}

function event(next: () => number, i: number): Record<string, unknown> {
  const e: Record<string, unknown> = { i, message: text(next), level: ["info", "warn", "error"][i % 3], nested: value(next, 1) };
  if (next() < 0.5) e.dt = next() < 0.5 ? 1_700_000_000_123 + i : "2026-11-25T12:00:00.123456Z";
  if (next() < 0.05) e.big = JSON.rawJSON("123456789012345678901234567890"); // kept exact, whole or sliced
  return e;
}

/** Events' texts until they are past `bytes` (JSON spaced for even seeds). */
function texts(seed: number, bytes = BIG_BODY_BYTES + 200_000, spaced = false): string[] {
  const next = random(seed);
  const parts: string[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const part = JSON.stringify(event(next, i), null, spaced ? 1 : undefined);
    parts.push(part);
    size += part.length;
  }
  return parts;
}

/** A JSON array (compact, or spaced around its commas) or NDJSON (LF or CRLF, blank lines between). */
function join(parts: string[], format: "json" | "ndjson", seed = 1): Buffer {
  if (format === "json") return Buffer.from(seed % 3 === 0 ? ` [\n${parts.join(" ,\n ")}\n] \n` : `[${parts.join(",")}]`);
  const newline = seed % 2 === 0 ? "\r\n" : "\n";
  return Buffer.from(parts.map((p, i) => (i % 50 === 7 ? `${newline}  ${newline}${p}` : p)).join(newline) + newline);
}

function body(seed: number, format: "json" | "ndjson", bytes?: number): Buffer {
  return join(texts(seed, bytes, format === "json" && seed % 2 === 0), format, seed);
}

test.each([1, 2, 3, 4])("seed %d: a big JSON array and a big NDJSON body give the rows decoding whole gives", (seed) => {
  for (const format of ["json", "ndjson"] as const) {
    const b = body(seed, format);
    expect(decodedInSlices(b, format)).toBe(true);
    expectSame(b, format);
  }
});

test("the cuts: a JSON array's at commas between its elements (never in a string or deeper), NDJSON's after a newline, a slice at least SLICE_BYTES", () => {
  const b = body(11, "json", 3 * SLICE_BYTES);
  const cuts = arrayCuts(b, SLICE_BYTES)!;
  expect(cuts.at.length).toBeGreaterThan(3);
  expect(b[cuts.at[0]!]).toBe(0x5b);
  expect(b[cuts.at.at(-1)!]).toBe(0x5d);
  for (const at of cuts.at.slice(1, -1)) {
    expect(b[at]).toBe(0x2c);
    // A comma between elements: the text before it is the array's first elements, whole.
    expect(() => JSON.parse(`${b.subarray(cuts.at[0]!, at).toString()}]`)).not.toThrow();
  }
  for (let k = 0; k + 2 < cuts.at.length; k++) expect(cuts.at[k + 1]! - cuts.at[k]!).toBeGreaterThanOrEqual(SLICE_BYTES);
  expect(cuts.elements.reduce((a, n) => a + n, 0)).toBe((JSON.parse(b.toString()) as unknown[]).length);
  const n = body(11, "ndjson", 3 * SLICE_BYTES);
  const lines = ndjsonCuts(n, SLICE_BYTES);
  expect(lines[0]).toBe(0);
  expect(lines.at(-1)).toBe(n.length);
  for (const at of lines.slice(1, -1)) expect(n[at - 1]).toBe(0x0a);
});

test.each([
  ["not an array", "{}"],
  ["a bracket closing the array early", "[{}]]"],
  ["something after the array", "[{}] {}"],
  ["a string never closed", '[{"a":"'],
  ["an array never closed", "[{},{}"],
  ["a byte-order mark first", "\ufeff[{}]"],
])("no cuts for a body the scan cannot follow (%s): decoded whole", (_name, text) => {
  expect(arrayCuts(Buffer.from(text), 1)).toBeUndefined();
});

const DEEP = `{"a":${"[".repeat(20)}1${"]".repeat(20)}}`;
const HUGE = JSON.stringify({ s: "x".repeat(70_000) });

test.each([
  ["not an event", "[1,2]"],
  ["a scalar", "42"],
  ["too deep", DEEP],
  ["too large", HUGE],
  ["a syntax error", '{"a":tru}'],
  ["an unclosed object", '{"a":1'],
  ["a string that swallows the next comma", '{"a":"x'],
  ["an empty element", ""],
  ["a stray bracket", '{"a":1}]'],
])("a big body with one event broken (%s) at random places gets the refusal decoding whole gives, word for word", (_name, bad) => {
  const next = random(bad.length + 1);
  const parts = texts(21, BIG_BODY_BYTES + 100_000);
  for (const format of ["json", "ndjson"] as const) {
    for (const i of [0, Math.floor(next() * parts.length), parts.length - 1]) {
      if (format === "ndjson" && bad === "") continue; // a blank line: skipped, not an error
      expectSame(join(parts.with(i, bad), format), format);
    }
  }
});

test("a refused event in an early slice and a syntax error in a later one: the syntax error, as whole (the body is decoded before any event is encoded)", () => {
  const parts = texts(31, BIG_BODY_BYTES + 4 * SLICE_BYTES).with(3, "[1]");
  const broken = join(parts.with(parts.length - 2, '{"a":nul}'), "json");
  expectSame(broken, "json");
  expect((sliced(broken, "json") as AppError).reason).toBe("body_undecodable");
  const onlyEvent = join(parts, "json");
  expectSame(onlyEvent, "json");
  expect((sliced(onlyEvent, "json") as AppError).message).toStartWith("event 3 ");
});

test("more rows than the ring can ever hold: never_fits with the size decoding whole gives; NDJSON of blank lines: body_empty", () => {
  const b = body(41, "ndjson");
  const small = { ...LIMITS, ringMaxBytes: 500_000 };
  expectSame(b, "ndjson", small);
  expect((sliced(b, "ndjson", small) as AppError).reason).toBe("never_fits");
  const blank = Buffer.from("\n \r\n".repeat(BIG_BODY_BYTES / 4 + 10));
  expectSame(blank, "ndjson");
  expect((sliced(blank, "ndjson") as AppError).reason).toBe("body_empty");
});

test("sliced rows are a buffer of their own (handed on whole); small bodies and other shapes are decoded whole", () => {
  const b = body(51, "json");
  const prepared = prepareBody(b, "json", 7, unbounded(RECEIVED), LIMITS) as { rows: Uint8Array; own?: boolean };
  expect(prepared.own).toBe(true);
  expect(prepared.rows.byteOffset).toBe(0);
  expect(decodedInSlices(b.subarray(0, BIG_BODY_BYTES - 1), "json")).toBe(false);
  expect(decodedInSlices(Buffer.from(`  {"a":${JSON.stringify("x".repeat(BIG_BODY_BYTES))}}`), "json")).toBe(false);
  expect(decodedInSlices(b, "msgpack")).toBe(false);
});

/** MessagePack events: the JSON ones without raw JSON, some with 64-bit integers, some with keys only a few events share (more record definitions). */
function packedEvents(seed: number, bytes = 2 * BIG_BODY_BYTES): Record<string, unknown>[] {
  const next = random(seed);
  const events: Record<string, unknown>[] = [];
  for (let i = 0, size = 0; size < bytes; i++) {
    const e = event(next, i);
    delete e.big;
    if (next() < 0.05) e.wide = 2n ** 60n + BigInt(i);
    if (next() < 0.1) e[`k${Math.floor(next() * 40)}`] = text(next);
    events.push(e);
    size += JSON.stringify(e, (_k, v) => (typeof v === "bigint" ? String(v) : v)).length;
  }
  return events;
}

const RECORDS = () => new Packr({ useRecords: true, mapsAsObjects: true });

test.each([1, 2, 3])("seed %d: a big MessagePack array, of maps or of msgpackr records, gives the rows decoding whole gives", (seed) => {
  const events = packedEvents(seed);
  for (const b of [pack(events), RECORDS().pack(events)]) {
    expect(decodedInSlices(b, "msgpack")).toBe(true);
    expect(msgpackArrayCuts(b, SLICE_BYTES)!.at.length).toBeGreaterThan(4); // several slices
    expectSame(b, "msgpack");
  }
});

test("MessagePack cuts: between elements, a slice at least SLICE_BYTES, every element once", () => {
  const events = packedEvents(61, 3 * SLICE_BYTES);
  const b = pack(events);
  const cuts = msgpackArrayCuts(b, SLICE_BYTES)!;
  expect(cuts.at[0]).toBe(b[0] === 0xdd ? 5 : 3);
  expect(cuts.at.at(-1)).toBe(b.length);
  for (let k = 0; k + 2 < cuts.at.length; k++) expect(cuts.at[k + 1]! - cuts.at[k]!).toBeGreaterThanOrEqual(SLICE_BYTES);
  expect(cuts.elements.reduce((a, n) => a + n, 0)).toBe(events.length);
  // Each slice is whole elements: its bytes are those elements packed one by one.
  let first = 0;
  for (let k = 0; k + 1 < cuts.at.length; k++) {
    const elements = events.slice(first, first + cuts.elements[k]!);
    expect(b.subarray(cuts.at[k], cuts.at[k + 1]).equals(Buffer.concat(elements.map((e) => pack(e))))).toBe(true);
    first += cuts.elements[k]!;
  }
});

test.each([
  ["values back to back", () => Buffer.concat([pack([{ a: 1 }]), pack({ b: 2 })])],
  ["bytes after the array", () => Buffer.concat([pack([{ a: 1 }]), Buffer.from([0xc0])])],
  ["an array cut short", () => pack([{ a: 1 }, { b: 2 }]).subarray(0, -2)],
  ["one map", () => pack({ a: 1 })],
])("no MessagePack cuts for a body that is not one whole array (%s)", (_name, make) => {
  expect(msgpackArrayCuts(make(), 1)).toBeUndefined();
});

test("MessagePack bodies decoded whole as before: Fluent Bit's entries, a first element that is no map, a __proto__ key, a broken event", () => {
  const events = packedEvents(71);
  // Fluent Bit's entries [time, record]: events of their own, not sliced.
  const entries = pack(events.map((e, i) => [1_700_000_000 + i, e]));
  expect(decodedInSlices(entries, "msgpack")).toBe(false);
  const fluent = sliced(entries, "msgpack");
  expect(fluent).not.toBeInstanceOf(AppError);
  expect((fluent as { count: number; own?: boolean }).own).toBeUndefined();
  expect((fluent as { count: number }).count).toBe(events.length);
  // A __proto__ key: kept as sent, whole or sliced (Maps), in both encodings.
  for (const b of [
    pack(events.with(5, { ...events[5], ["__proto__"]: { x: 1 } })),
    RECORDS().pack(events.with(9, JSON.parse('{"__proto__":{"y":2},"message":"p"}'))),
  ]) {
    expectSame(b, "msgpack");
  }
  // Not an event in a late slice: the refusal whole decoding gives, its index in the body.
  const late = events.length - 3;
  for (const b of [pack(events.with(late, [1, 2] as never)), RECORDS().pack(events.with(late, "text" as never))]) {
    expectSame(b, "msgpack");
    expect((sliced(b, "msgpack") as AppError).message).toStartWith(`event ${late} `);
  }
  // A byte no MessagePack uses (0xc1) inside a late event's string length: undecodable, as whole.
  const b = pack(events);
  const at = b.lastIndexOf(Buffer.from("message"));
  const broken = Buffer.from(b);
  broken[at - 1] = 0xc1;
  expectSame(broken, "msgpack");
  expect((sliced(broken, "msgpack") as AppError).reason).toBe("body_undecodable");
});

/** A big MessagePack array (32-bit header) of these elements, each packed on its own unless given as bytes. */
function arrayOf(elements: (Buffer | Record<string, unknown>)[]): Buffer {
  const header = Buffer.alloc(5);
  header[0] = 0xdd;
  header.writeUInt32BE(elements.length, 1);
  return Buffer.concat([header, ...elements.map((e) => (Buffer.isBuffer(e) ? e : pack(e)))]);
}

test.each([
  // msgpackr's bundled strings move its read position by an offset the body states: refused whole and sliced.
  ["a bundle jumping back to itself", Buffer.from([0xd6, 0x62, 0xff, 0xff, 0xff, 0xfc])],
  ["a bundle jumping to the next element", Buffer.from([0xc7, 0x06, 0x62, 0x00, 0x00, 0x00, 0x04, 0xa0, 0xa0])],
  // ext 8 forms of Set (0x73) and Error (0x65): msgpackr reads the value after their data as theirs.
  ["a Set in an ext 8", Buffer.concat([Buffer.from([0xc7, 0x00, 0x73]), pack(["x"])])],
  ["an Error in an ext 8", Buffer.concat([Buffer.from([0xc7, 0x01, 0x65, 0x00]), pack(["Error", "boom"])])],
])("MessagePack the walk must read as msgpackr does (%s) in a big array: the answer decoding whole gives", (_name, odd) => {
  const events = Array.from({ length: 12_000 }, (_, i): Buffer | Record<string, unknown> => ({ i, message: `event ${i} ${"x".repeat(80)}` }));
  events[4999] = Buffer.from([0x81, 0xa0, 0xa0]); // {"": ""}
  events[5000] = odd;
  const b = arrayOf(events);
  expect(decodedInSlices(b, "msgpack")).toBe(true);
  const got = sliced(b, "msgpack");
  const want = whole(b, "msgpack");
  expect(got instanceof AppError ? [got.reason, got.message] : got.count).toEqual(want instanceof AppError ? [want.reason, want.message] : want.count);
  if (!(want instanceof AppError)) expect((got as { rows: Buffer }).rows.equals(want.rows)).toBe(true);
});

test("a MessagePack slice whose values do not end where the walk's elements do is refused, so the body is decoded whole", () => {
  const b = pack(packedEvents(81, BIG_BODY_BYTES + 100_000));
  const cuts = msgpackArrayCuts(b, SLICE_BYTES)!;
  const read = (ends: Uint32Array) => msgpackSliceReader(b, ends)(cuts.at[1]!, cuts.at[2]!, cuts.elements[0]!);
  expect(read(cuts.ends)).toHaveLength(cuts.elements[1]!);
  const shifted = Uint32Array.from(cuts.ends, (end, i) => (i === cuts.elements[0]! + 3 ? end + 1 : end));
  expect(read(shifted)).toBeInstanceOf(AppError);
});

test("a record definition whose keys have a 32-bit array header is followed by the walk: sliced", () => {
  const definition = Buffer.from([0xd4, 0x72, 0x40, 0xdd, 0, 0, 0, 2, 0xa1, 0x69, 0xa1, 0x6d]); // record 0x40: keys ["i", "m"]
  const elements = [Buffer.concat([definition, pack(1000), pack("x".repeat(80))])]; // numbers past 127: no fixint reads as a record
  for (let i = 1; i < 13_000; i++) elements.push(Buffer.concat([Buffer.from([0x40]), pack(1000 + i), pack("x".repeat(80))]));
  const b = arrayOf(elements);
  expect(msgpackArrayCuts(b, SLICE_BYTES)).toBeDefined();
  expectSame(b, "msgpack");
});
