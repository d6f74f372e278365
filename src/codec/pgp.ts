// A sealed block's payload (store/blocks.ts): its text deflated by the application, framed as an
// OpenPGP symmetric message (RFC 4880) that pgcrypto's pgp_sym_decrypt(payload, PAYLOAD_PASSPHRASE)
// opens in SQL (drizzle/0010). The passphrase is fixed and documented: the frame is how PostgreSQL
// can inflate the text, not a secret. Packets: SKESK v4 (AES-128, simple S2K over SHA-1: the key is
// derived once here, and a salted or iterated S2K would cost every block's reader a hash), then a
// SEIPD packet (AES-128-CFB, zero IV, a random 16-byte prefix and its last two bytes repeated, no
// resynchronisation) holding a compressed-data packet (ZIP: raw deflate) of one literal-data packet
// ('u': UTF-8 text, converted to the database's encoding by pgcrypto), and the MDC (SHA-1).
// Pure: no I/O; runs on the seal threads (store/seal-worker.ts).
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { inflateRawSync } from "node:zlib";

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

/** A new-format packet header for a body of `length` bytes (one-, two- or five-byte length). */
function header(tag: number, length: number): Buffer {
  if (length < 192) return Buffer.from([0xc0 | tag, length]);
  if (length < 8384) return Buffer.from([0xc0 | tag, ((length - 192) >> 8) + 192, (length - 192) & 0xff]);
  const head = Buffer.alloc(6);
  head[0] = 0xc0 | tag;
  head[1] = 255;
  head.writeUInt32BE(length, 2);
  return head;
}

function packet(tag: number, body: Buffer): Buffer {
  return Buffer.concat([header(tag, body.length), body]);
}

/**
 * `text` (UTF-8) as a message pgp_sym_decrypt(message, PAYLOAD_PASSPHRASE) returns it from, in an
 * ArrayBuffer of its own (a seal thread transfers it).
 */
export function sealPayload(text: string, level: number = DEFLATE_LEVEL): Uint8Array {
  const data = Buffer.from(text, "utf8");
  const literal = Buffer.concat([header(TAG_LITERAL, LITERAL_HEAD.length + data.length), LITERAL_HEAD, data]);
  const deflated = Bun.deflateSync(literal, { level: level as 6, library: "libdeflate" }); // raw DEFLATE
  const compressed = Buffer.concat([header(TAG_COMPRESSED, 1 + deflated.length), Buffer.from([ZIP]), deflated]);
  const prefix = randomBytes(BLOCK + 2);
  prefix[BLOCK] = prefix[BLOCK - 2]!;
  prefix[BLOCK + 1] = prefix[BLOCK - 1]!;
  const mdc = createHash("sha1").update(prefix).update(compressed).update(MDC_HEAD).digest();
  const cipher = createCipheriv("aes-128-cfb", KEY, ZERO_IV);
  const parts = [SKESK, header(TAG_SEIPD, 1 + prefix.length + compressed.length + MDC_HEAD.length + mdc.length), Buffer.from([1])];
  for (const plain of [prefix, compressed, MDC_HEAD, mdc]) parts.push(cipher.update(plain));
  parts.push(cipher.final());
  const message = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    message.set(part, at);
    at += part.length;
  }
  return message;
}

/** The text of a message sealPayload built (tests; reads in the application are a later step). */
export function openPayload(message: Uint8Array): string {
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
  const [literal] = readPacket(inflateRawSync(compressed.body.subarray(1)), 0);
  return literal.body.subarray(LITERAL_HEAD.length).toString("utf8");
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
