// Snappy's block format (not the framed one), for both of its senders: Loki's protobuf pushes
// (always a block, whatever Content-Encoding says: loki.ts) and Content-Encoding: snappy (what
// Vector's http sink and Fluent Bit's `compress snappy` send: snap::raw::Encoder, snappy_compress;
// body.ts). Bounded: the block's varint header (its uncompressed length) is checked against
// INGEST_MAX_DECOMPRESSED_BYTES before the output is allocated, and the decoder writes exactly that
// many bytes. Decoding is the `snappy` package's (napi-rs over Rust's snap crate, prebuilt: no
// build step): it refuses a cut, lying or looping body at its first bad op, where snappyjs 0.7.0
// loops forever on a 6-byte body (a literal whose 4-byte length wraps negative), ignores copies past
// the declared length (9 MB spun for over a second) and pads cut bodies with zeros. Never throws.
import { uncompress, uncompressSync } from "snappy";
import { AppError } from "../errors";

/** The framing format's stream identifier chunk (framing_format.txt): not what the shippers send. */
const FRAMED = Buffer.from([0xff, 0x06, 0x00, 0x00, 0x73, 0x4e, 0x61, 0x50, 0x70, 0x59]);

/** Who sent a block, for the refusal's message. */
const CARRIER = "Content-Encoding: snappy";

/** The uncompressed length a block states (a varint of at most 32 bits), or why it cannot be read. */
export function snappyLength(body: Uint8Array): number | string {
  if (body.length >= FRAMED.length && FRAMED.equals(body.subarray(0, FRAMED.length))) {
    return "the body is in snappy's framing format; send the block format (what Vector and Fluent Bit send)";
  }
  let length = 0;
  for (let i = 0; i < 5 && i < body.length; i++) {
    length += (body[i]! & 0x7f) * 2 ** (7 * i);
    if (body[i]! < 0x80) return length <= 0xffffffff ? length : "its length header is over 32 bits";
  }
  return body.length === 0 ? "the body is empty" : "its length header is cut short or over 32 bits";
}

/** The stated length when it is within maxBytes, or the refusal (413 past it, else not snappy). */
export function checkSnappy(body: Uint8Array, maxBytes: number, carrier = CARRIER): number | AppError {
  const length = snappyLength(body);
  if (typeof length === "string") return broken(length, carrier);
  if (length > maxBytes) {
    return new AppError(
      "decompressed_too_large",
      `Snappy body says it decompresses to ${length} bytes; the limit is ${maxBytes} bytes (INGEST_MAX_DECOMPRESSED_BYTES). Send fewer events per request.`,
    );
  }
  return length;
}

/** The uncompressed block, bounded by maxBytes, or why it is refused. */
export function unsnappy(body: Uint8Array, maxBytes: number, carrier = CARRIER): Buffer | AppError {
  const length = checkSnappy(body, maxBytes, carrier);
  if (length instanceof AppError) return length;
  try {
    return uncompressSync(body, { asBuffer: true }) as Buffer;
  } catch (error) {
    return broken(reason(error), carrier);
  }
}

/** The same on libuv's thread pool, for big outputs (280–380 MiB/s measured: 100 MiB held the loop ~0.3 s). */
export async function unsnappyOffLoop(body: Uint8Array, maxBytes: number, carrier = CARRIER): Promise<Buffer | AppError> {
  const length = checkSnappy(body, maxBytes, carrier);
  if (length instanceof AppError) return length;
  try {
    return (await uncompress(body, { asBuffer: true })) as Buffer;
  } catch (error) {
    return broken(reason(error), carrier);
  }
}

function reason(error: unknown): string {
  return (error as Error).message.replace(/^snappy: /, "");
}

function broken(problem: string, carrier: string): AppError {
  return new AppError("body_undecodable", `Body is not valid snappy data (${carrier}): ${problem}`);
}
