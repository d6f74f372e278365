// The row format from the encoder to COPY: PostgreSQL's binary COPY tuples, one per event, for
// `COPY log_hot (id, source_id, dt, raw) FROM STDIN (FORMAT binary)` (store/copy.ts). The encoder writes them
// with id 0, the flusher sets a batch's ids in place, and the tail, dead letters, the spill file
// and logs read fields back here. Pure bytes in and out; no I/O.
//
// A tuple, big-endian: int16 4 (fields), then each field as int32 length and its bytes:
//   id bigint (8) | source_id bigint (8) | dt timestamptz (8: µs since 2000-01-01) |
//   raw jsonb (1 + n: version byte 1, then the JSON text, which PostgreSQL parses as for text).
// Why binary (docs/storage.md): PostgreSQL spends 14.0–14.6 µs of backend CPU per
// realistic row read this way against 17.1–18.3 µs as COPY text (no line and field scanning, no
// de-escaping, no timestamp parsing), and the encoder escapes no backslashes.
import { eventMicros, microsText, type PgMicros } from "./time";

/** Bytes before the JSON text. */
export const TUPLE_HEAD = 43;
/** Where a tuple's id, source_id and dt values start (each 8 bytes, big-endian). */
export const ID_AT = 6;
export const SOURCE_AT = 18;
export const DT_AT = 30;
const RAW_LENGTH_AT = 38;
const TWO_32 = 4294967296;

/** What a binary COPY starts with: signature, flags, header extension length. */
export const COPY_HEADER: Uint8Array = Buffer.concat([Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(8)]);
/** And ends with: a field count of -1. */
export const COPY_TRAILER: Uint8Array = Buffer.from([0xff, 0xff]);

/** The fixed part of every tuple of one source: field count, id 0, source_id, dt's length. */
export function tupleHead(sourceId: number): Buffer {
  const head = Buffer.alloc(DT_AT);
  head.writeInt16BE(4, 0);
  head.writeInt32BE(8, 2);
  head.writeInt32BE(8, 14);
  writeInt64(head, SOURCE_AT, sourceId);
  head.writeInt32BE(8, 26);
  return head;
}

/**
 * One tuple at `at` (the caller has made room for TUPLE_HEAD + 3 × json.length bytes); `head` is
 * tupleHead(source). Returns the tuple's length.
 */
export function writeTuple(out: Buffer, at: number, head: Uint8Array, dt: PgMicros, json: string): number {
  out.set(head, at);
  if (typeof dt === "number") {
    const high = Math.floor(dt / TWO_32);
    out.writeInt32BE(high, at + DT_AT);
    out.writeUInt32BE(dt - high * TWO_32, at + DT_AT + 4);
  } else {
    out.writeBigInt64BE(dt, at + DT_AT);
  }
  out[at + TUPLE_HEAD - 1] = 1;
  const bytes = out.write(json, at + TUPLE_HEAD);
  out.writeInt32BE(bytes + 1, at + RAW_LENGTH_AT);
  return TUPLE_HEAD + bytes;
}

/** Sets the ids of `count` tuples in place, from firstId up; throws if the bytes hold another count. */
export function setIds(rows: Uint8Array, count: number, firstId: number): void {
  const bytes = asBuffer(rows);
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + TUPLE_HEAD > bytes.length) throw new Error(`rows said ${count} events but hold ${i}`);
    writeInt64(bytes, at + ID_AT, firstId + i);
    at = next(bytes, at);
  }
  if (at !== bytes.length) throw new Error(`rows said ${count} events but hold more`);
}

/** How many tuples the bytes hold. */
export function tupleCount(rows: Uint8Array): number {
  const bytes = asBuffer(rows);
  let count = 0;
  for (let at = 0; at < bytes.length; at = next(bytes, at)) count++;
  return count;
}

/** Each tuple as a view of the bytes. */
export function tuplesOf(rows: Uint8Array): Uint8Array[] {
  const bytes = asBuffer(rows);
  const tuples: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; ) {
    const end = next(bytes, at);
    tuples.push(bytes.subarray(at, end));
    at = end;
  }
  return tuples;
}

export function idOf(tuple: Uint8Array): number {
  return readInt64(asBuffer(tuple), ID_AT);
}

export function sourceOf(tuple: Uint8Array): number {
  return readInt64(asBuffer(tuple), SOURCE_AT);
}

const DAY_MICROS = 86_400_000_000;

/**
 * Which of `ways` builders a tuple goes to: a stable mix of its source and its UTC day (dt's
 * microseconds since 2000-01-01, a UTC midnight), so every event of one (source, day) goes to the
 * same one whatever batch brings it.
 */
function wayOf(bytes: Buffer, at: number, ways: number): number {
  const day = Math.floor((bytes.readInt32BE(at + DT_AT) * TWO_32 + bytes.readUInt32BE(at + DT_AT + 4)) / DAY_MICROS);
  let hash = Math.imul(bytes.readUInt32BE(at + SOURCE_AT + 4) ^ Math.imul(day | 0, 0x9e3779b1), 0x85ebca6b);
  hash ^= hash >>> 15;
  return (hash >>> 0) % ways;
}

/**
 * The tuples of `parts` split into `ways` new buffers by (source, UTC day) (wayOf), each in the
 * order they came; a way none goes to is empty. Runs of neighbours bound for one way (a request's
 * events of one source) are copied at once.
 */
export function routeTuples(parts: readonly Uint8Array[], ways: number): Uint8Array[] {
  const sizes = new Float64Array(ways);
  /** Quadruples: part, start, end, way. */
  const runs: number[] = [];
  for (let p = 0; p < parts.length; p++) {
    const bytes = asBuffer(parts[p]!);
    let from = 0;
    let way = -1;
    for (let at = 0; at < bytes.length; ) {
      const to = wayOf(bytes, at, ways);
      if (to !== way) {
        if (way >= 0) runs.push(p, from, at, way);
        from = at;
        way = to;
      }
      at = next(bytes, at);
    }
    if (way >= 0) runs.push(p, from, bytes.length, way);
  }
  for (let i = 0; i < runs.length; i += 4) {
    const way = runs[i + 3]!;
    sizes[way] = sizes[way]! + runs[i + 2]! - runs[i + 1]!;
  }
  const out = Array.from(sizes, (size) => new Uint8Array(size));
  const filled = new Float64Array(ways);
  for (let i = 0; i < runs.length; i += 4) {
    const way = runs[i + 3]!;
    const at = filled[way]!;
    out[way]!.set(parts[runs[i]!]!.subarray(runs[i + 1]!, runs[i + 2]!), at);
    filled[way] = at + runs[i + 2]! - runs[i + 1]!;
  }
  return out;
}

export interface Fields {
  id: number;
  sourceId: number;
  dt: PgMicros;
  /** The JSON text. */
  raw: string;
}

export function fieldsOf(tuple: Uint8Array): Fields {
  const bytes = asBuffer(tuple);
  const high = bytes.readInt32BE(DT_AT);
  const dt = Math.abs(high) < 2 ** 20 ? high * TWO_32 + bytes.readUInt32BE(DT_AT + 4) : bytes.readBigInt64BE(DT_AT);
  return { id: readInt64(bytes, ID_AT), sourceId: readInt64(bytes, SOURCE_AT), dt, raw: bytes.toString("utf8", TUPLE_HEAD, next(bytes, 0)) };
}

/** A tuple as a COPY text line (`id \t source_id \t dt \t raw \n`): psql's ceiling, logs. */
export function toText(tuple: Uint8Array): string {
  const { id, sourceId, dt, raw } = fieldsOf(tuple);
  return `${id}\t${sourceId}\t${microsText(dt)}\t${raw.replaceAll("\\", "\\\\")}\n`;
}

/**
 * COPY text lines (`[id \t] source_id \t dt \t raw \n`, as logpond wrote them before binary COPY:
 * spill files of that version, and tools and tests that write text) as tuples; ids are kept when
 * the lines carry them (`prefixed`), else 0.
 */
export function fromText(text: string, prefixed: boolean): Uint8Array {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const out = Buffer.allocUnsafe(lines.reduce((sum, line) => sum + TUPLE_HEAD + line.length * 3, 0));
  let at = 0;
  for (const line of lines) {
    const fields = line.split("\t");
    if (fields.length !== (prefixed ? 4 : 3)) throw new Error(`not a COPY text line: ${line.slice(0, 200)}`);
    const [id, sourceId, dtText, raw] = prefixed ? fields : ["0", ...fields];
    const dt = eventMicros(dtText);
    if (dt === undefined) throw new Error(`not a COPY text time: ${dtText}`);
    const length = writeTuple(out, at, tupleHead(Number(sourceId)), dt, unescape(raw!));
    writeInt64(out, at + ID_AT, Number(id));
    at += length;
  }
  return out.subarray(0, at);
}

const ESCAPES: Record<string, string> = { b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };

function unescape(value: string): string {
  return value.includes("\\") ? value.replace(/\\(.)/g, (_, c: string) => ESCAPES[c] ?? c) : value;
}

/** Where the tuple starting at `at` ends. */
export function next(bytes: Buffer, at: number): number {
  const end = at + TUPLE_HEAD - 1 + bytes.readInt32BE(at + RAW_LENGTH_AT);
  if (bytes.readInt16BE(at) !== 4 || end > bytes.length) throw new Error(`not a logpond COPY tuple at byte ${at}`);
  return end;
}

/** Ids and source ids are below 2^53. */
function writeInt64(out: Buffer, at: number, value: number): void {
  const high = Math.floor(value / TWO_32);
  out.writeInt32BE(high, at);
  out.writeUInt32BE(value - high * TWO_32, at + 4);
}

export function readInt64(bytes: Buffer, at: number): number {
  return bytes.readInt32BE(at) * TWO_32 + bytes.readUInt32BE(at + 4);
}

export function asBuffer(rows: Uint8Array): Buffer {
  return Buffer.isBuffer(rows) ? rows : Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength);
}
