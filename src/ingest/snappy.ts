// Snappy's block format (not the framed one): how Loki's protobuf pushes are compressed, whatever
// Content-Encoding says. Bounded: the declared length is checked against INGEST_MAX_DECOMPRESSED_BYTES
// before the output is allocated; every literal and copy is checked against the input and against
// that declared length, and the output must come out exactly that long. Hand-written (about 60
// lines) because snappyjs 0.7.0, the pure-JS package, loops forever on a 6-byte body (a literal
// whose 4-byte length wraps negative) and ignores output past the declared length, which let a
// 9 MB body spin for over a second; the native packages need a build step. Never throws.
import { AppError } from "../errors";

export function unsnappy(body: Uint8Array, maxBytes: number): Buffer | AppError {
  let at = 0;
  let length = 0;
  for (let shift = 0; ; shift += 7) {
    if (at >= body.length || shift > 28) return broken("its length header is cut short or too long");
    const byte = body[at++]!;
    length += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) break;
  }
  if (length > maxBytes) {
    return new AppError("decompressed_too_large", `Snappy body says it decompresses to ${length} bytes; the limit is ${maxBytes} bytes (INGEST_MAX_DECOMPRESSED_BYTES). Send fewer entries per request.`);
  }
  const out = Buffer.allocUnsafe(length);
  let written = 0;
  while (at < body.length) {
    const tag = body[at++]!;
    let size: number;
    if ((tag & 3) === 0) {
      // A literal: its length in the tag's upper six bits, or in the 1–4 bytes after it.
      size = tag >>> 2;
      if (size >= 60) {
        const bytes = size - 59;
        if (at + bytes > body.length) return broken("a literal's length is cut short");
        size = 0;
        for (let i = 0; i < bytes; i++) size += body[at + i]! * 2 ** (8 * i);
        at += bytes;
      }
      size += 1;
      if (at + size > body.length) return broken("a literal runs past the end of the body");
      if (written + size > length) return broken("it decompresses to more than its header says");
      out.set(body.subarray(at, at + size), written);
      at += size;
      written += size;
      continue;
    }
    let offset: number;
    if ((tag & 3) === 1) {
      if (at + 1 > body.length) return broken("a copy is cut short");
      size = ((tag >>> 2) & 7) + 4;
      offset = ((tag >>> 5) << 8) | body[at]!;
      at += 1;
    } else if ((tag & 3) === 2) {
      if (at + 2 > body.length) return broken("a copy is cut short");
      size = (tag >>> 2) + 1;
      offset = body[at]! | (body[at + 1]! << 8);
      at += 2;
    } else {
      if (at + 4 > body.length) return broken("a copy is cut short");
      size = (tag >>> 2) + 1;
      offset = (body[at]! | (body[at + 1]! << 8) | (body[at + 2]! << 16)) + body[at + 3]! * 0x1000000;
      at += 4;
    }
    if (offset === 0 || offset > written) return broken("a copy points before the start of the output");
    if (written + size > length) return broken("it decompresses to more than its header says");
    if (offset >= size) out.copyWithin(written, written - offset, written - offset + size);
    else for (let i = 0; i < size; i++) out[written + i] = out[written - offset + i]!; // overlapping: a run
    written += size;
  }
  if (written !== length) return broken(`it decompresses to ${written} bytes, its header says ${length}`);
  return out;
}

function broken(problem: string): AppError {
  return new AppError("body_undecodable", `Body is not valid snappy data (Loki's protobuf is snappy-compressed): ${problem}`);
}
