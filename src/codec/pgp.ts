// A sealed block's payload (store/blocks.ts): its text deflated by the application, framed as an
// OpenPGP symmetric message (RFC 4880) that pgcrypto's pgp_sym_decrypt(payload, PAYLOAD_PASSPHRASE)
// opens in SQL (drizzle/0010). The passphrase is fixed and documented: the frame is how PostgreSQL
// can inflate the text, not a secret. Packets: SKESK v4 (AES-128, simple S2K over SHA-1: the key is
// derived once here, and a salted or iterated S2K would cost every block's reader a hash), then a
// SEIPD packet (AES-128-CFB, zero IV, a random 16-byte prefix and its last two bytes repeated, no
// resynchronisation) holding a compressed-data packet (ZIP: raw deflate) of one literal-data packet
// ('u': UTF-8 text, converted to the database's encoding by pgcrypto), and the MDC (SHA-1).
// Pure: no I/O; runs on the seal threads (store/seal-worker.ts).
import { createCipheriv, createDecipheriv, createHash, randomFillSync } from "node:crypto";

/** The passphrase of every payload: framing, not secrecy (README: SQL). */
export const PAYLOAD_PASSPHRASE = "logpond";
/**
 * libdeflate's level. On 30,000 of bench/corpus.ts's events as jsonb prints them (blocks of 1,000
 * lines in shape order, this 2-core machine under other load, 3 runs): zlib's level 4 made 130.7
 * B/event at 6.0–16.2 µs/event; libdeflate's 4, 5, 6, 7 made 133.1, 125.4, 120.4, 118.0 at
 * 5.2–12.2, 4.8–12.9, 6.1–14.9, 8.7–17.4 (docs/storage.md).
 */
export const DEFLATE_LEVEL = 6;

const TAG_SKESK = 3;
const TAG_COMPRESSED = 8;
const TAG_LITERAL = 11;
const TAG_SEIPD = 18;
const TAG_MDC = 19;
const AES_128 = 7;
const SHA_1 = 2;
const ZIP = 1;
const BLOCK = 16;

const KEY = createHash("sha1").update(PAYLOAD_PASSPHRASE).digest().subarray(0, BLOCK);
const ZERO_IV = Buffer.alloc(BLOCK);
/** SKESK v4, AES-128, S2K 0 (simple) with SHA-1; no encrypted session key: the S2K's key is it. */
const SKESK = packet(TAG_SKESK, Buffer.from([4, AES_128, 0, SHA_1]));
/** Literal data: format 'u', no file name, date 0. */
const LITERAL_HEAD = Buffer.from([0x75, 0, 0, 0, 0, 0]);
const MDC_HEAD = Buffer.from([0xc0 | TAG_MDC, 20]);

/** The bytes of a new-format packet header for a body of `length` bytes (one-, two- or five-byte length). */
function headerSize(length: number): number {
  return length < 192 ? 2 : length < 8384 ? 3 : 6;
}

/** Writes the header headerSize(length) counts into `into` at `at`. */
function writeHeader(into: Uint8Array, at: number, tag: number, length: number): void {
  into[at] = 0xc0 | tag;
  if (length < 192) into[at + 1] = length;
  else if (length < 8384) {
    into[at + 1] = ((length - 192) >> 8) + 192;
    into[at + 2] = (length - 192) & 0xff;
  } else {
    into[at + 1] = 255;
    into[at + 2] = length >>> 24;
    into[at + 3] = (length >>> 16) & 0xff;
    into[at + 4] = (length >>> 8) & 0xff;
    into[at + 5] = length & 0xff;
  }
}

function packet(tag: number, body: Buffer): Buffer {
  const out = Buffer.alloc(headerSize(body.length) + body.length);
  writeHeader(out, 0, tag, body.length);
  out.set(body, out.length - body.length);
  return out;
}

/** Where a literal packet's text starts in PayloadText's buffer: room for the longest header, then LITERAL_HEAD. */
const TEXT_START = 6 + LITERAL_HEAD.length;
/** A buffer grown past this for a big block is let go after it. */
const TEXT_KEEP_BYTES = 4 << 20;

/**
 * A payload's text written as UTF-8 straight into the literal packet's body, in one buffer that
 * is reused (one per thread: the module is synchronous), then sealed. Each string is encoded on
 * its own, so an 8-bit (Latin-1) one costs a copy; joining the lines first and encoding the whole
 * cost about three times as much (a single non-Latin-1 line makes a joined string 16-bit).
 */
export class PayloadText {
  private buffer = Buffer.allocUnsafe(1 << 16);
  private at = TEXT_START;

  /** Appends `text` as UTF-8. */
  text(text: string): void {
    this.room(text.length * 3); // UTF-8 bytes per UTF-16 unit, at most
    this.at += this.buffer.write(text, this.at, "utf8");
  }

  /** Appends bytes already UTF-8 (a tuple's JSON text: store/chunks.ts). */
  bytes(bytes: Uint8Array, start: number, end: number): void {
    this.room(end - start);
    this.buffer.set(bytes.subarray(start, end), this.at);
    this.at += end - start;
  }

  /** Appends one ASCII byte. */
  byte(code: number): void {
    this.room(1);
    this.buffer[this.at++] = code;
  }

  /** Appends `value` (an integer of at most 2^53) as String(value) writes it. */
  integer(value: number): void {
    this.room(17);
    const buffer = this.buffer;
    if (value < 0) {
      buffer[this.at++] = 0x2d;
      value = -value;
    }
    let digits = 1;
    for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits++;
    this.at += digits;
    for (let i = this.at - 1, rest = value; i >= this.at - digits; i--, rest = Math.floor(rest / 10)) buffer[i] = 48 + (rest % 10);
  }

  /** The text so far as a sealed message (sealPayload's), and a fresh start. */
  seal(level: number = DEFLATE_LEVEL): Uint8Array {
    const length = LITERAL_HEAD.length + this.at - TEXT_START;
    const start = 6 - headerSize(length);
    writeHeader(this.buffer, start, TAG_LITERAL, length);
    this.buffer.set(LITERAL_HEAD, 6);
    const literal = this.buffer.subarray(start, this.at);
    this.at = TEXT_START;
    if (this.buffer.length > TEXT_KEEP_BYTES) this.buffer = Buffer.allocUnsafe(1 << 16);
    return sealLiteral(literal, level);
  }

  private room(bytes: number): void {
    if (this.at + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.at + bytes, this.buffer.length * 2));
    grown.set(this.buffer.subarray(0, this.at));
    this.buffer = grown;
  }
}

/**
 * `text` (UTF-8) as a message pgp_sym_decrypt(message, PAYLOAD_PASSPHRASE) returns it from, in an
 * ArrayBuffer of its own (a seal thread transfers it).
 */
export function sealPayload(text: string, level: number = DEFLATE_LEVEL): Uint8Array {
  const payload = new PayloadText();
  payload.text(text);
  return payload.seal(level);
}

/** A literal-data packet (header and all) deflated, then encrypted with its MDC; the message written once. */
function sealLiteral(literal: Uint8Array<ArrayBuffer>, level: number): Uint8Array {
  const deflated = Bun.deflateSync(literal, { level: level as 6, library: "libdeflate" }); // raw DEFLATE
  // The plaintext of the SEIPD packet: the random prefix, the compressed packet's header and ZIP's
  // byte, the deflated bytes, then the MDC's packet.
  const compressedLength = 1 + deflated.length;
  const head = Buffer.allocUnsafe(BLOCK + 2 + headerSize(compressedLength) + 1);
  randomFillSync(head, 0, BLOCK);
  head[BLOCK] = head[BLOCK - 2]!;
  head[BLOCK + 1] = head[BLOCK - 1]!;
  writeHeader(head, BLOCK + 2, TAG_COMPRESSED, compressedLength);
  head[head.length - 1] = ZIP;
  const mdc = createHash("sha1").update(head).update(deflated).update(MDC_HEAD).digest();
  const sealedLength = head.length + deflated.length + MDC_HEAD.length + mdc.length;
  const seipdLength = 1 + sealedLength;
  const message = new Uint8Array(SKESK.length + headerSize(seipdLength) + seipdLength);
  message.set(SKESK, 0);
  let at = SKESK.length;
  writeHeader(message, at, TAG_SEIPD, seipdLength);
  at += headerSize(seipdLength);
  message[at++] = 1;
  const cipher = createCipheriv("aes-128-cfb", KEY, ZERO_IV);
  for (const plain of [head, deflated, MDC_HEAD, mdc]) {
    const sealed = cipher.update(plain);
    message.set(sealed, at);
    at += sealed.length;
  }
  message.set(cipher.final(), at);
  return message;
}

/** The text of a message sealPayload built (tests; reads in the application are a later step). */
export function openPayload(message: Uint8Array): string {
  return openPayloadBytes(message).toString("utf8");
}

/** The text of a message sealPayload built, as its UTF-8 bytes (a chunk's read-back: store/chunks.ts). */
export function openPayloadBytes(message: Uint8Array): Buffer {
  const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  const [skesk, afterSkesk] = readPacket(bytes, 0);
  if (skesk.tag !== TAG_SKESK || !skesk.body.equals(SKESK.subarray(2))) throw new Error("not a logpond payload (SKESK)");
  const [seipd] = readPacket(bytes, afterSkesk);
  if (seipd.tag !== TAG_SEIPD || seipd.body[0] !== 1) throw new Error("not a logpond payload (SEIPD)");
  const decipher = createDecipheriv("aes-128-cfb", KEY, ZERO_IV);
  const plain = Buffer.concat([decipher.update(seipd.body.subarray(1)), decipher.final()]);
  const end = plain.length - MDC_HEAD.length - 20;
  const mdc = createHash("sha1")
    .update(plain.subarray(0, end + MDC_HEAD.length))
    .digest();
  if (!mdc.equals(plain.subarray(end + MDC_HEAD.length))) throw new Error("the payload's MDC does not match");
  const [compressed] = readPacket(plain.subarray(0, end), BLOCK + 2);
  if (compressed.tag !== TAG_COMPRESSED || compressed.body[0] !== ZIP) throw new Error("not a logpond payload (compression)");
  // Bun's inflate (raw DEFLATE, as Bun.deflateSync writes it): 0.76 ms for a 1,000-event block's
  // text against node:zlib's 1.04 (one-off measurement on 200 blocks of bench/scale.ts's events).
  const inflated = Bun.inflateSync(compressed.body.subarray(1) as Uint8Array<ArrayBuffer>);
  const [literal] = readPacket(Buffer.from(inflated.buffer, inflated.byteOffset, inflated.byteLength), 0);
  return literal.body.subarray(LITERAL_HEAD.length);
}

function readPacket(bytes: Buffer, at: number): [{ tag: number; body: Buffer }, number] {
  const tag = bytes[at]! & 0x3f;
  const first = bytes[at + 1]!;
  let length: number;
  let start: number;
  if (first < 192) [length, start] = [first, at + 2];
  else if (first < 224) [length, start] = [((first - 192) << 8) + bytes[at + 2]! + 192, at + 3];
  else [length, start] = [bytes.readUInt32BE(at + 2), at + 6];
  return [{ tag, body: bytes.subarray(start, start + length) }, start + length];
}
