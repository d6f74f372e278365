// A batch's tuples (codec/tuples.ts) → the rows of log_chunks (drizzle/0015), as binary COPY tuples:
// what the flush writes with HOT_TIER=chunks instead of one jsonb row per event (store/copy.ts).
// One chunk holds up to CHUNK_EVENTS events of one source, in the order the batch holds them; its
// payload is a block's (codec/pgp.ts, store/blocks.ts): line 1 `{…}` each event's id minus
// first_id, line 2 `{…}` each dt minus min_dt in microseconds, then the JSON texts one per line as
// the encoder wrote them (JSON.stringify's: never a raw newline; what jsonb refuses already
// replaced: codec/encode.ts), deflated at CHUNK_LEVEL and framed so logpond_block_events opens it.
// Beside it, its events per (minute, level) as a block's hist_* (drizzle/0016): the level histogram
// counts a chunk inside its window from them without opening it (query/histogram.ts).
// And back (chunkRows): a chunk's events as the rows a seal builds blocks from, when the sealer reads
// a generation back (store/sealer.ts). Pure: bytes in, bytes out; chunkTuples runs on the flush
// thread (store/flush-worker.ts), chunkRows on the sealer's.
import { levelOfJson } from "../codec/jsonb-text";
import { openPayloadBytes, PayloadText } from "../codec/pgp";
import { epochMinute, microsText, type PgMicros } from "../codec/time";
import { asBuffer, DT_AT, ID_AT, next, readInt64, SOURCE_AT, TUPLE_HEAD } from "../codec/tuples";
import type { ReadRow } from "./seal-pool";

/** Events per chunk, at most: what a read of the hot tier opens at once (a block holds as many: store/sealer.ts BLOCK_EVENTS). */
export const CHUNK_EVENTS = 1_000;
/** Text per chunk, at most (a few big events make a chunk of their own). */
const CHUNK_MAX_BYTES = 4 * 1024 * 1024;
/**
 * A chunk's events lie within this many microseconds of its first one (about 71 years), so its dt
 * offsets stay below 2^52: logpond_block_events adds them as `offset * interval '1 microsecond'`,
 * a float8 product, exact only below 2^53.
 */
const CHUNK_MAX_SPAN_MICROS = 2 ** 51;
/**
 * The chunks' deflate level: a chunk lives until its generation is sealed (SEAL_INTERVAL_MS), so
 * its size matters for the WAL, hardly for the disk; level 1 is the cheapest that deflates.
 */
export const CHUNK_LEVEL = 1;
/** A log_chunks COPY tuple's fields: first_id, last_id, source_id, min_dt, max_dt, n, payload, hist_minutes, hist_levels, hist_counts. */
const FIELDS = 10;
const TWO_32 = 4294967296;
/** A one-dimensional array's head in COPY's binary form: five int32s. */
const ARRAY_HEAD = 20;
const INT8_OID = 20,
  INT4_OID = 23,
  TEXT_OID = 25;
/** An array field's length, then its head; where its elements start. */
function arrayHead(tuple: Buffer, at: number, elements: number, hasNull: number, oid: number, length: number): number {
  at = tuple.writeInt32BE(ARRAY_HEAD + elements, at);
  at = tuple.writeInt32BE(1, at);
  at = tuple.writeInt32BE(hasNull, at);
  at = tuple.writeInt32BE(oid, at);
  at = tuple.writeInt32BE(length, at);
  return tuple.writeInt32BE(1, at);
}

/** One tuple's place: its part, and where it starts and ends there. */
interface Place {
  part: number;
  at: number;
  end: number;
}

/** The log_chunks rows of a batch's tuples (ids set), as COPY binary tuples (without the COPY header and trailer). */
export function chunkTuples(parts: readonly Uint8Array[]): Uint8Array[] {
  const bySource = new Map<number, Place[]>();
  const buffers = parts.map(asBuffer);
  for (let part = 0; part < buffers.length; part++) {
    const bytes = buffers[part]!;
    for (let at = 0; at < bytes.length; ) {
      const end = next(bytes, at);
      const source = readInt64(bytes, at + SOURCE_AT);
      let places = bySource.get(source);
      if (!places) bySource.set(source, (places = []));
      places.push({ part, at, end });
      at = end;
    }
  }
  const out: Uint8Array[] = [];
  for (const places of bySource.values()) {
    for (let from = 0; from < places.length; ) {
      let to = from;
      let bytes = 0;
      const first = Number(dtOf(buffers[places[from]!.part]!, places[from]!.at));
      const near = (place: Place) => Math.abs(Number(dtOf(buffers[place.part]!, place.at)) - first) < CHUNK_MAX_SPAN_MICROS;
      while (
        to < places.length &&
        to - from < CHUNK_EVENTS &&
        (to === from || (bytes + places[to]!.end - places[to]!.at <= CHUNK_MAX_BYTES && near(places[to]!)))
      ) {
        bytes += places[to]!.end - places[to]!.at;
        to++;
      }
      out.push(chunkOf(buffers, places, from, to));
      from = to;
    }
  }
  return out;
}

const text = new PayloadText();

/** A dt as a number when exact (|µs| < 2^52: years 1858 to 2142), else as a bigint. */
function dtOf(bytes: Buffer, at: number): number | bigint {
  const high = bytes.readInt32BE(at + DT_AT);
  return Math.abs(high) < 2 ** 20 ? high * TWO_32 + bytes.readUInt32BE(at + DT_AT + 4) : bytes.readBigInt64BE(at + DT_AT);
}

function chunkOf(buffers: readonly Buffer[], places: readonly Place[], from: number, to: number): Uint8Array {
  let firstId = Infinity;
  let lastId = -Infinity;
  let minAt = places[from]!;
  let maxAt = minAt;
  const dts: (number | bigint)[] = new Array(to - from);
  let minDt = dtOf(buffers[minAt.part]!, minAt.at);
  let maxDt = minDt;
  let exact = true;
  // Events per (minute since the epoch, level), the level as the sealer reads it (codec/jsonb-text.ts).
  const counts = new Map<number, Map<string | null, number>>();
  let lastMinute = Number.NaN;
  let ofMinute: Map<string | null, number> | undefined;
  for (let i = from; i < to; i++) {
    const place = places[i]!;
    const bytes = buffers[place.part]!;
    const id = readInt64(bytes, place.at + ID_AT);
    if (id < firstId) firstId = id;
    if (id > lastId) lastId = id;
    const dt = dtOf(bytes, place.at);
    if (typeof dt === "bigint") exact = false;
    dts[i - from] = dt;
    const minute = epochMinute(dt);
    if (minute !== lastMinute) {
      ofMinute = counts.get(minute);
      if (!ofMinute) counts.set(minute, (ofMinute = new Map()));
      lastMinute = minute;
    }
    const level = levelOfJson(bytes, place.at + TUPLE_HEAD, place.end);
    ofMinute!.set(level, (ofMinute!.get(level) ?? 0) + 1);
    if (dt < minDt) [minDt, minAt] = [dt, place];
    if (dt > maxDt) [maxDt, maxAt] = [dt, place];
  }
  text.byte(0x7b);
  for (let i = from; i < to; i++) {
    if (i > from) text.byte(0x2c);
    const place = places[i]!;
    text.integer(readInt64(buffers[place.part]!, place.at + ID_AT) - firstId);
  }
  text.byte(0x7d);
  text.byte(0x0a);
  text.byte(0x7b);
  for (let i = 0; i < dts.length; i++) {
    if (i > 0) text.byte(0x2c);
    if (exact) text.integer((dts[i] as number) - (minDt as number));
    else text.text(String(BigInt(dts[i]!) - BigInt(minDt)));
  }
  text.byte(0x7d);
  for (let i = from; i < to; i++) {
    const place = places[i]!;
    text.byte(0x0a);
    text.bytes(buffers[place.part]!, place.at + TUPLE_HEAD, place.end);
  }
  const payload = text.seal(CHUNK_LEVEL);
  const minutes: number[] = [];
  const levels: (Buffer | null)[] = [];
  const tallies: number[] = [];
  let levelBytes = 0;
  for (const [minute, byLevel] of counts) {
    for (const [level, count] of byLevel) {
      const name = level === null ? null : Buffer.from(level);
      minutes.push(minute);
      levels.push(name);
      tallies.push(count);
      levelBytes += 4 + (name?.length ?? 0);
    }
  }
  const pairs = minutes.length;
  const histBytes = 3 * (4 + ARRAY_HEAD) + pairs * 12 + levelBytes + pairs * 8;
  const tuple = Buffer.allocUnsafe(2 + 5 * 12 + 8 + 4 + payload.length + histBytes);
  let at = tuple.writeInt16BE(FIELDS, 0);
  for (const value of [firstId, lastId, readInt64(buffers[minAt.part]!, minAt.at + SOURCE_AT)]) {
    at = tuple.writeInt32BE(8, at);
    at = tuple.writeInt32BE(Math.floor(value / TWO_32), at);
    at = tuple.writeUInt32BE((value % TWO_32) >>> 0, at);
  }
  // min_dt and max_dt: the tuples' own 8 bytes (timestamptz's binary form).
  for (const place of [minAt, maxAt]) {
    at = tuple.writeInt32BE(8, at);
    at += buffers[place.part]!.copy(tuple, at, place.at + DT_AT, place.at + DT_AT + 8);
  }
  at = tuple.writeInt32BE(4, at);
  at = tuple.writeInt32BE(to - from, at);
  at = tuple.writeInt32BE(payload.length, at);
  tuple.set(payload, at);
  at += payload.length;
  // hist_minutes bigint[], hist_levels text[], hist_counts integer[]: one-dimensional arrays in
  // COPY's binary form (ndim, has nulls, element type, length, lower bound 1, then the elements).
  at = arrayHead(tuple, at, pairs * 12, 0, INT8_OID, pairs);
  for (const minute of minutes) {
    at = tuple.writeInt32BE(8, at);
    at = tuple.writeInt32BE(Math.floor(minute / TWO_32), at);
    at = tuple.writeUInt32BE((minute % TWO_32) >>> 0, at);
  }
  at = arrayHead(tuple, at, levelBytes, levels.includes(null) ? 1 : 0, TEXT_OID, pairs);
  for (const level of levels) {
    at = tuple.writeInt32BE(level === null ? -1 : level.length, at);
    if (level !== null) at += level.copy(tuple, at);
  }
  at = arrayHead(tuple, at, pairs * 8, 0, INT4_OID, pairs);
  for (const tally of tallies) {
    at = tuple.writeInt32BE(4, at);
    at = tuple.writeInt32BE(tally, at);
  }
  return tuple;
}

/** A chunk as the sealer reads it back (store/sealer.ts): its columns, and which of its events are kept. */
export interface ReadChunk {
  firstId: number;
  sourceId: string;
  /** min_dt in microseconds since 2000-01-01 (PgMicros). */
  minDt: PgMicros;
  /** Events before this (microseconds since 2000-01-01) are past their source's retention; null: none is kept (a deleted source). */
  keepFrom: PgMicros | null;
  payload: Uint8Array;
  /** The payload's text when a seal thread has opened it already (SealPool.unseal): not opened again here. */
  text?: Buffer;
}

/**
 * A chunk's events as the rows a seal builds blocks from (store/seal-pool.ts ReadRow), for the
 * events it keeps, and how many it holds in all. A line is the JSON as sent: its shape and level
 * are left null, and the seal thread computes them with the line's jsonb text (codec/jsonb-text.ts),
 * as it does for the memory path's tuples.
 */
export function chunkRows(chunk: ReadChunk): { rows: ReadRow[]; events: number } {
  const text = chunk.text ?? openPayloadBytes(chunk.payload);
  const ids = arrayLine(text, 0);
  const dts = arrayLine(text, ids.end + 2);
  const source = Buffer.from(chunk.sourceId, "latin1");
  const rows: ReadRow[] = [];
  // The newline before the line being read; the last line ends with the text.
  let at = dts.end + 1;
  for (let i = 0; i < ids.values.length; i++) {
    const start = at + 1;
    let end = text.indexOf(0x0a, start);
    if (end < 0) end = text.length;
    at = end;
    const dt = add(chunk.minDt, dts.values[i]!);
    if (chunk.keepFrom === null || dt < chunk.keepFrom) continue;
    const dtText = microsText(dt);
    const id = Buffer.from(String(chunk.firstId + Number(ids.values[i]!)), "latin1");
    const wire = Buffer.allocUnsafe(6 * 4 + id.length + source.length + dtText.length + end - start);
    let w = wire.writeInt32BE(id.length, 0);
    w += id.copy(wire, w);
    w = wire.writeInt32BE(source.length, w);
    w += source.copy(wire, w);
    w = wire.writeInt32BE(dtText.length, w);
    w += wire.write(dtText, w, "latin1");
    w = wire.writeInt32BE(end - start, w);
    w += text.copy(wire, w, start, end);
    w = wire.writeInt32BE(-1, w);
    wire.writeInt32BE(-1, w);
    rows.push({ wire, source_id: chunk.sourceId, dt: dtText, size: end - start });
  }
  return { rows, events: ids.values.length };
}

const add = (a: PgMicros, b: number | bigint): PgMicros =>
  typeof a === "number" && typeof b === "number" && Math.abs(a + b) < 2 ** 52 ? a + b : BigInt(a) + BigInt(b);

/** A `{…}` line of integers starting at `at` (a payload's offsets: chunks' and blocks' alike): its values (bigint past 2^53), and where it ends (its closing brace). */
export function arrayLine(text: Buffer, at: number): { values: (number | bigint)[]; end: number } {
  if (text[at] !== 0x7b) throw new Error("not a chunk's payload (no offsets line)");
  const values: (number | bigint)[] = [];
  let i = at + 1;
  if (text[i] === 0x7d) return { values, end: i };
  for (;;) {
    let negative = false;
    if (text[i] === 0x2d) {
      negative = true;
      i++;
    }
    const from = i;
    let value = 0;
    while (text[i]! >= 0x30 && text[i]! <= 0x39) value = value * 10 + text[i++]! - 0x30;
    if (i - from > 15) {
      const exact = BigInt(text.toString("latin1", from, i));
      values.push(negative ? -exact : exact);
    } else values.push(negative ? -value : value);
    if (text[i] === 0x7d) return { values, end: i };
    if (text[i++] !== 0x2c) throw new Error("not a chunk's payload (bad offsets line)");
  }
}
