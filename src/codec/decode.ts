// Bytes → a list of decoded events, per format. JSON and NDJSON keep integers beyond
// 2^53 exact (JSON.rawJSON) and numbers a double cannot hold at all (1e400, 1e-400) as strings of
// their text; that slower parse runs only when the parsed value holds a doubtful number and a
// number token (not a string) has a 16-digit run or a 3-digit exponent (parseJson, numbers.ts).
// MessagePack goes through long-lived msgpackr decoders with structured-clone references off and
// 64-bit integers as BigInt only when they do not fit a double. A body with record definitions
// goes to msgpackr's no-eval build: each request carries its own definitions, so the regular
// build's compiled record readers (a `new Function` per definition) would be compiled afresh for
// every body; no-eval serves 1.7× the requests and never stalls on many definitions. Plain maps keep the regular
// build, 2.8× faster on them (bench/micro.ts). Several values back to back (Fluent Bit, Fluentd's
// headerless maps, json_stream) are tried only once the single-value decode has refused the body.
// Other protocols' bodies (format.ts's Envelope: OTLP, Loki) go to their own decoders, one event
// per record.
import { addExtension, Unpackr, type Options } from "msgpackr";
import { addExtension as addNoEvalExtension, Unpackr as NoEvalUnpackr } from "msgpackr/unpack-no-eval";
import { MAX_BIGINT_BYTES, MAX_BIGINT_BYTES_PER_REQUEST, maxValues, type CostLimits } from "./bounds";
import { hasCandidate, holdsDoubtfulNumber, MAX_NUMERIC_DIGITS, needsExactNumbers } from "./numbers";
import { AppError } from "../errors";
import { DEFAULTS } from "../config";
import type { Format } from "./format";
import { eventsOfEntries, isEntry, mayHoldEntries, unpackExtensionZero } from "./fluent";
import { splitJsonValues } from "./sequence";
import { isOtlpEnvelope, otlpJsonEvents } from "./otlp-json";
import { decodeOtlpProto } from "./otlp-proto";
import { decodeLokiProto, lokiJsonEvents } from "./loki";

// int64AsType "auto": a double where exact, a BigInt beyond 2^53 (msgpackr supports it; its types lag).
const MSGPACK_OPTIONS = { mapsAsObjects: true, int64AsType: "auto", structuredClone: false } as unknown as Options;
const mapsUnpackr = new Unpackr(MSGPACK_OPTIONS);
const recordsUnpackr = new NoEvalUnpackr(MSGPACK_OPTIONS);
// msgpackr renames a `__proto__` key to `__proto_`; with Maps we see the key as sent.
const mapUnpackr = new NoEvalUnpackr({ ...MSGPACK_OPTIONS, mapsAsObjects: false });

const PROTO_KEY = Buffer.from("__proto__");
/** msgpackr's record definition: ext type 0x72 ("r") in a fixext 1 or 2. */
const RECORD_DEFINITION = Buffer.from([0xd4, 0x72]);
const RECORD_DEFINITION_WIDE = Buffer.from([0xd5, 0x72]);
const decoder = new TextDecoder();

/** The configuration's defaults, for callers that pass no limits (tests): envelopes' decoders are bounded by them. */
const DEFAULT_LIMITS: CostLimits = {
  maxEvents: DEFAULTS.INGEST_MAX_EVENTS_PER_REQUEST,
  maxDecompressedBytes: DEFAULTS.INGEST_MAX_DECOMPRESSED_BYTES,
  maxDepth: DEFAULTS.INGEST_MAX_DEPTH,
  maxEventBytes: DEFAULTS.INGEST_MAX_EVENT_BYTES,
};

/** The events of a body: an array of whatever the body holds; `encode.ts` checks each is an event. */
export function decodeBody(body: Buffer, format: Format, limits: CostLimits = DEFAULT_LIMITS): unknown[] | AppError {
  if (body.length === 0) return new AppError("body_empty", "Request body is empty; send one event or an array of events");
  switch (format) {
    case "otlp-proto":
      return decodeOtlpProto(body, { maxDepth: limits.maxDepth, maxValues: maxValues(limits) });
    case "otlp-json": {
      const value = parseEnvelope(body);
      return value instanceof AppError ? value : otlpJsonEvents(value, limits);
    }
    case "loki-proto":
      return decodeLokiProto(body, { parse: parseJson, maxDepth: limits.maxDepth });
    case "loki-json": {
      const value = parseEnvelope(body);
      return value instanceof AppError ? value : lokiJsonEvents(value, { parse: parseJson, maxDepth: limits.maxDepth });
    }
    case "json":
      return decodeJson(body, limits);
    case "ndjson":
      return decodeNdjson(body);
    case "msgpack":
      return decodeMsgpack(body);
  }
}

function decodeJson(body: Buffer, limits: CostLimits): unknown[] | AppError {
  const text = decoder.decode(body);
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (error) {
    const pieces = splitJsonValues(text);
    if (pieces !== undefined) return decodeJsonValues(pieces);
    return new AppError("body_undecodable", `Couldn't parse JSON content: ${(error as Error).message}`);
  }
  // An OTLP/JSON request sent to `/` (an exporter pointed at the bare URL) is its records, not one event.
  return Array.isArray(value) ? value : isOtlpEnvelope(value) ? otlpJsonEvents(value, limits) : [value];
}

/** An envelope's JSON (OTLP/JSON, a Loki push): the value, or why it is not JSON. */
function parseEnvelope(body: Buffer): unknown {
  try {
    return parseJson(decoder.decode(body));
  } catch (error) {
    return new AppError("body_undecodable", `Couldn't parse JSON content: ${(error as Error).message}`);
  }
}

/**
 * Values back to back: each is one event. Parsed one by one, not joined into one array text: a
 * copy of the whole body more (a big one's memory is bounded at 4× its size), for ~20% speed.
 */
function decodeJsonValues(pieces: string[]): unknown[] | AppError {
  const values: unknown[] = new Array(pieces.length);
  let i = 0;
  try {
    for (; i < pieces.length; i++) values[i] = parseJson(pieces[i]!);
  } catch (error) {
    return new AppError(
      "body_undecodable",
      `Couldn't parse JSON content: value ${i} of ${pieces.length} back to back (event ${i}): ${(error as Error).message}`,
    );
  }
  return values;
}

/** Lines are found with one regex step per non-blank line, so a body of blank lines costs no strings. */
function decodeNdjson(body: Buffer): unknown[] | AppError {
  const text = decoder.decode(body);
  const events: unknown[] = [];
  NON_BLANK.lastIndex = 0;
  while (NON_BLANK.exec(text) !== null) {
    const at = NON_BLANK.lastIndex - 1;
    const end = text.indexOf("\n", at);
    const line = text.slice(at, end < 0 ? text.length : end);
    try {
      events.push(parseJson(line));
    } catch (error) {
      const number = countLines(text, at);
      return new AppError("body_undecodable", `Couldn't parse NDJSON line ${number} (event ${events.length}): ${(error as Error).message}`);
    }
    NON_BLANK.lastIndex = end < 0 ? text.length : end + 1;
  }
  if (events.length === 0) return new AppError("body_empty", "NDJSON body has no events (only blank lines)");
  return events;
}

const NON_BLANK = /\S/g;

function countLines(text: string, upTo: number): number {
  let lines = 1;
  for (let i = text.indexOf("\n"); i >= 0 && i < upTo; i = text.indexOf("\n", i + 1)) lines++;
  return lines;
}

/**
 * Plain JSON.parse unless a number may not have survived it. In order, cheapest first: no 16-digit
 * run and no 3-digit exponent anywhere (most synthetic texts); no integer beyond 2^53, no ±Infinity
 * and no 0 in the parsed value (the reviver changes nothing else); no such run in a number token
 * once strings are cut out (numbers.ts). Realistic logs (hex ids, "node1234", 20-digit order ids)
 * pass the first test but almost never the second, so their decode does not pay the reviver.
 */
function parseJson(text: string): unknown {
  if (!hasCandidate(text)) return JSON.parse(text);
  const value = JSON.parse(text);
  if (!holdsDoubtfulNumber(value) || !needsExactNumbers(text)) return value;
  return JSON.parse(text, keepExactNumbers);
}

/**
 * Integers JSON.parse would round come back exact (as raw JSON); numbers that overflow a double
 * (to ±Infinity) or underflow it (to 0 from a non-zero text) come back as the string of their text.
 */
export function keepExactNumbers(this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  const source = context?.source;
  if (typeof value !== "number" || source === undefined) return value;
  if (/^-?\d+$/.test(source)) {
    if (Number.isSafeInteger(value)) return value;
    return source.length <= MAX_NUMERIC_DIGITS ? JSON.rawJSON(source) : source;
  }
  if (!Number.isFinite(value) || (value === 0 && /[1-9]/.test(source.split(/[eE]/)[0]!))) return source;
  return value;
}

function decodeMsgpack(body: Buffer): unknown[] | AppError {
  let value: unknown;
  bigintBytes = 0;
  const records = body.includes(RECORD_DEFINITION) || body.includes(RECORD_DEFINITION_WIDE);
  const unpackr = body.includes(PROTO_KEY) ? mapUnpackr : records ? recordsUnpackr : mapsUnpackr;
  try {
    value = unpackr.unpack(body);
  } catch (error) {
    return decodeMsgpackValues(body, unpackr, error);
  }
  if (!Array.isArray(value)) return [value];
  // Fluent Bit's one entry, or an array of entries; an array of events starts with a map.
  return value.length > 0 && mayHoldEntries(value[0]) ? eventsOfEntries(isEntry(value) ? [value] : value) : value;
}

/**
 * Whether a MessagePack body is one big array of events: a 16- or 32-bit array header (an array
 * of 1 MiB or more has one, unless it holds 15 elements at most) and a map or a record definition
 * first (not Fluent Bit's entries). Such a body is decoded in slices (ingest/prepare.ts).
 */
export function isMsgpackEventArray(body: Uint8Array): boolean {
  const first = body[0] === 0xdc ? 3 : body[0] === 0xdd ? 5 : -1;
  const token = body[first];
  if (token === undefined) return false;
  return (token >= 0x80 && token <= 0x8f) || token === 0xde || token === 0xdf || ((token === 0xd4 || token === 0xd5) && body[first + 1] === 0x72);
}

/**
 * A big MessagePack array's elements a slice at a time (ingest/prepare.ts): the values back to
 * back in body[from, to), the first being element `index` of the array. One reader per body:
 * record definitions hold for the slices after the one that defines them, so a body with any
 * gets a decoder of its own that keeps them (msgpackr keeps `structures` across unpackMultiple
 * calls). Each value must end where the byte walk says its element ends (`ends`, from
 * codec/bounds.ts): where msgpackr reads otherwise, the slice is refused and the body decoded
 * whole, so what it answers is what decoding whole answers.
 */
export function msgpackSliceReader(body: Buffer, ends: Uint32Array): (from: number, to: number, index: number) => unknown[] | AppError {
  const proto = body.includes(PROTO_KEY);
  const records = body.includes(RECORD_DEFINITION) || body.includes(RECORD_DEFINITION_WIDE);
  const unpackr = records ? new NoEvalUnpackr({ ...MSGPACK_OPTIONS, mapsAsObjects: !proto, structures: [] } as Options) : proto ? mapUnpackr : mapsUnpackr;
  return (from, to, index) => {
    bigintBytes = 0; // the request's whole count was bounded by its walk (codec/bounds.ts)
    const values: unknown[] = [];
    let apart = false;
    try {
      unpackr.unpackMultiple(body.subarray(from, to), (value, _start, end) => {
        if (from + (end ?? -1) !== ends[index + values.length]) {
          apart = true;
          return false;
        }
        values.push(value);
      });
    } catch (error) {
      return new AppError("body_undecodable", `Couldn't parse MessagePack content: ${(error as Error).message}`);
    }
    return apart ? new AppError("body_undecodable", "a value does not end where the walk's element does") : values;
  };
}

/**
 * After a refusal as one value: values back to back (Fluent Bit's entries, Fluentd's maps with no
 * array header), each one event. A body cut inside its first value is refused as it was.
 */
function decodeMsgpackValues(body: Buffer, unpackr: typeof mapsUnpackr | typeof recordsUnpackr, refusal: unknown): unknown[] | AppError {
  if ((refusal as { incomplete?: boolean }).incomplete)
    return new AppError("body_undecodable", `Couldn't parse MessagePack content: ${(refusal as Error).message}`);
  bigintBytes = 0;
  try {
    return eventsOfEntries(unpackr.unpackMultiple(body) as unknown[]);
  } catch (error) {
    const { values, lastPosition } = error as { values?: unknown[]; lastPosition?: number };
    const where = values === undefined ? "" : `value ${values.length} (at byte ${lastPosition}) of values back to back: `;
    return new AppError("body_undecodable", `Couldn't parse MessagePack content: ${where}${(error as Error).message}`);
  }
}

/**
 * msgpackr's BigInt extension (0x42, big-endian two's complement), bounded: rendering a BigInt to
 * digits is superlinear (1.7 s for 1 MiB), so one may be MAX_BIGINT_BYTES and a request may hold
 * MAX_BIGINT_BYTES_PER_REQUEST of them (bounds.ts checks the same before decoding big bodies;
 * this catches small ones). Replaces msgpackr's own decoder for the type, in both builds.
 */
let bigintBytes = 0;
function unpackBigInt(data: Uint8Array): bigint {
  if (data.length > MAX_BIGINT_BYTES)
    throw new RangeError(`an integer is ${data.length} bytes long (BigInt extension); the limit is ${MAX_BIGINT_BYTES} bytes (about 157,000 digits)`);
  bigintBytes += data.length;
  if (bigintBytes > MAX_BIGINT_BYTES_PER_REQUEST)
    throw new RangeError(`the body holds more than ${MAX_BIGINT_BYTES_PER_REQUEST} bytes of BigInts (extension 0x42)`);
  if (data.length === 0) return 0n;
  const value = BigInt(`0x${Buffer.from(data.buffer, data.byteOffset, data.length).toString("hex")}`);
  return data[0]! & 0x80 ? value - (1n << BigInt(data.length * 8)) : value;
}
addExtension({ type: 0x42, unpack: unpackBigInt } as Parameters<typeof addExtension>[0]);
addNoEvalExtension({ type: 0x42, unpack: unpackBigInt } as Parameters<typeof addNoEvalExtension>[0]);
// Extension 0: Fluent's EventTime (8 bytes) where msgpackr knows only notepack's undefined (fluent.ts).
addExtension({ type: 0, unpack: unpackExtensionZero } as Parameters<typeof addExtension>[0]);
addNoEvalExtension({ type: 0, unpack: unpackExtensionZero } as Parameters<typeof addNoEvalExtension>[0]);
// msgpackr's bundled strings (0x62) move the read position by an offset the body states, backwards
// too: a crafted one, read as values back to back, loops for ever (a 15-byte body holds the main
// thread and grows without bound). No client we know packs them (msgpackr's `bundleStrings`, off
// by default): refused, 406.
function refuseBundledStrings(): never {
  throw new Error("extension 0x62 (msgpackr's bundleStrings) is not supported; pack without bundleStrings");
}
addExtension({ type: 0x62, unpack: refuseBundledStrings } as Parameters<typeof addExtension>[0]);
addNoEvalExtension({ type: 0x62, unpack: refuseBundledStrings } as Parameters<typeof addNoEvalExtension>[0]);
