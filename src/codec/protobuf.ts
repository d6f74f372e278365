// A minimal protobuf wire reader for the few messages logpond decodes (OTLP logs, Loki push): varints,
// fixed 32/64, length-delimited fields, unknown fields skipped. Bounded: every length is checked
// against the bytes left in its message before anything is read or built, so a length past the end,
// a varint past 10 bytes or a wire type that cannot be skipped throws WireError (the decoders catch
// it once per body and answer a refusal), never an out-of-bounds read or an allocation.
// Reads bytes only; what a field means is the caller's business.

/** Thrown by the reader, caught once per body by the decoder that called it. */
export class WireError {
  constructor(readonly problem: string) {}
}

export const VARINT = 0,
  FIXED64 = 1,
  LEN = 2,
  FIXED32 = 5;

/** Hex of each byte, for trace and span ids. */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const TWO_32 = 4294967296;

/**
 * Buffer's native slices (Bun and Node have them; their typings do not): utf8Slice took 38–47 ns
 * for a 12–55-byte string, toString("utf8", …) 50–58 (Bun 1.4.5).
 */
interface Slices {
  utf8Slice(start: number, end: number): string;
  base64Slice(start: number, end: number): string;
}

export class Reader {
  pos = 0;
  /** fixed64()'s result: low and high 32 bits. */
  lo = 0;
  hi = 0;

  constructor(readonly buf: Buffer) {}

  /** A field's tag: its number << 3 | its wire type. Field number 0 does not exist (zeros are no message). */
  tag(): number {
    const tag = this.uint();
    if (tag < 8) throw new WireError("a field number is 0");
    return tag;
  }

  /** An unsigned varint as a number (tags, lengths, enums, counts: exact up to 2^53). */
  uint(): number {
    const buf = this.buf;
    const first = buf[this.pos];
    if (first !== undefined && first < 0x80) {
      this.pos++;
      return first;
    }
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const byte = buf[this.pos++];
      if (byte === undefined) throw new WireError("a varint runs past the end of the body");
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    throw new WireError("a varint is longer than 10 bytes");
  }

  /**
   * An int64 varint: a number while it is exact, else the decimal digits as a string (the caller
   * keeps them exact). Negative values are ten-byte two's complement.
   */
  int64(): number | string {
    this.varint64();
    const { lo, hi } = this;
    if (hi < 0x200000) return hi * TWO_32 + lo; // below 2^53, non-negative
    if (hi >= 0xffe00000) return -((0xffffffff - hi) * TWO_32 + (TWO_32 - lo)); // above -2^53
    const unsigned = (BigInt(hi) << 32n) | BigInt(lo);
    return (hi & 0x80000000 ? unsigned - (1n << 64n) : unsigned).toString();
  }

  /** A varint's 64 bits into lo/hi (two's complement for negative int64). */
  private varint64(): void {
    const buf = this.buf;
    let lo = 0,
      hi = 0;
    for (let i = 0; i < 10; i++) {
      const byte = buf[this.pos++];
      if (byte === undefined) throw new WireError("a varint runs past the end of the body");
      const bits = byte & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (7 * i - 32);
      if (byte < 0x80) {
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return;
      }
    }
    throw new WireError("a varint is longer than 10 bytes");
  }

  /** A fixed64 into lo/hi. */
  fixed64(): void {
    this.need(8);
    const buf = this.buf,
      at = this.pos;
    this.lo = (buf[at]! | (buf[at + 1]! << 8) | (buf[at + 2]! << 16) | (buf[at + 3]! << 24)) >>> 0;
    this.hi = (buf[at + 4]! | (buf[at + 5]! << 8) | (buf[at + 6]! << 16) | (buf[at + 7]! << 24)) >>> 0;
    this.pos = at + 8;
  }

  fixed32(): number {
    this.need(4);
    const buf = this.buf,
      at = this.pos;
    this.pos = at + 4;
    return (buf[at]! | (buf[at + 1]! << 8) | (buf[at + 2]! << 16) | (buf[at + 3]! << 24)) >>> 0;
  }

  double(): number {
    this.need(8);
    const value = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return value;
  }

  /** A length-delimited field's end, checked against its message's end. */
  end(within: number): number {
    const length = this.uint();
    const end = this.pos + length;
    if (end > within) throw new WireError(`a field of ${length} bytes runs past the end of its message`);
    return end;
  }

  string(within: number): string {
    const end = this.end(within);
    const start = this.pos;
    this.pos = end;
    return (this.buf as unknown as Slices).utf8Slice(start, end);
  }

  /** Bytes as lowercase hex (trace and span ids). */
  hex(within: number): string {
    const end = this.end(within);
    const buf = this.buf;
    let text = "";
    for (let i = this.pos; i < end; i++) text += HEX[buf[i]!];
    this.pos = end;
    return text;
  }

  base64(within: number): string {
    const end = this.end(within);
    const start = this.pos;
    this.pos = end;
    return (this.buf as unknown as Slices).base64Slice(start, end);
  }

  /** Skips a field of this wire type (unknown fields, or known ones sent with another type). */
  skip(wireType: number, within: number): void {
    switch (wireType) {
      case VARINT:
        this.uint();
        return;
      case FIXED64:
        this.need(8);
        this.pos += 8;
        return;
      case LEN:
        this.pos = this.end(within);
        return;
      case FIXED32:
        this.need(4);
        this.pos += 4;
        return;
    }
    // Groups (3, 4) are proto2's, never in these messages; 6 and 7 do not exist.
    throw new WireError(`wire type ${wireType} cannot be read here`);
  }

  private need(bytes: number): void {
    if (this.pos + bytes > this.buf.length) throw new WireError("a fixed-size field runs past the end of the body");
  }
}

/**
 * Messages at `path` (field numbers, each a length-delimited field of the one before), counted
 * without reading them: OTLP's log records are [1, 2, 2], Loki's entries [1, 2]. Undefined when the
 * body cannot be read that far (the decoder then says why). Costs one step per field on the path.
 */
export function countAt(body: Buffer, path: readonly number[]): number | undefined {
  const reader = new Reader(body);
  try {
    return countWithin(reader, body.length, path, 0);
  } catch (error) {
    if (error instanceof WireError) return undefined;
    throw error;
  }
}

function countWithin(reader: Reader, end: number, path: readonly number[], level: number): number {
  const wanted = (path[level]! << 3) | LEN;
  const last = level === path.length - 1;
  let count = 0;
  while (reader.pos < end) {
    const tag = reader.tag();
    if (tag !== wanted) {
      reader.skip(tag & 7, end);
      continue;
    }
    const fieldEnd = reader.end(end);
    if (last) {
      count++;
      reader.pos = fieldEnd;
    } else count += countWithin(reader, fieldEnd, path, level + 1);
  }
  if (reader.pos !== end) throw new WireError("a field runs past the end of its message");
  return count;
}
