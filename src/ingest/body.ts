// Hop 1: the request body as bytes. Caps the body as sent before it is allocated (Content-Length,
// then a counting reader for chunked bodies), then undoes Content-Encoding with a cap on the
// output, so neither a large upload nor a decompression bomb costs more memory than the limits.
import * as zlib from "node:zlib";
import { AppError } from "../errors";
import { timeout } from "../timers";
import { checkSnappy, unsnappy, unsnappyOffLoop } from "./snappy";

export interface BodyLimits {
  maxBodyBytes: number;
  maxDecompressedBytes: number;
  /** INGEST_BODY_TIMEOUT_MS: the whole body within this, from when its reading starts, or 408 (none: no bound). */
  bodyTimeoutMs?: number;
}

export const ENCODINGS = ["gzip", "deflate", "br", "zstd", "snappy", "identity"] as const;
/** Below this, decompressing on the event loop is cheaper than a hop to the thread pool… */
const SYNC_DECOMPRESS_BELOW_BYTES = 256 * 1024;
/**
 * …as long as the output stays small: a 100 KB gzip body can inflate to 100 MiB (0.3–0.7 s on the
 * loop, measured). Past this output the sync try is dropped and the thread pool inflates it.
 */
const SYNC_DECOMPRESS_MAX_OUTPUT = 4 * 1024 * 1024;
/** zlib's output chunk on the thread pool (its default is 16 KiB). */
const STREAM_CHUNK_BYTES = 1024 * 1024;

/** The body's Content-Length, checked against the limit before anything is read; undefined when chunked. */
export function declaredLength(header: string | null, limits: BodyLimits): number | undefined | AppError {
  if (header === null) return undefined;
  const length = Number(header);
  if (!Number.isSafeInteger(length) || length < 0) return new AppError("body_undecodable", "Content-Length is not a valid length");
  if (length > limits.maxBodyBytes) return tooLarge(limits.maxBodyBytes, length);
  return length;
}

/**
 * The body as sent; `declared` is declaredLength()'s answer (a chunked body is counted as it streams).
 * A body not whole within bodyTimeoutMs is a 408 (the client stalled, or sends too slowly): the
 * answer goes out at once and Bun closes the connection, so a stalled upload holds its memory
 * charge and its connection for that long only. Left alone, it was cut by Bun's idle timer after
 * 30 s with no answer. A body cut short by the client (the connection closed) is a 400 no one reads,
 * counted, not an internal error. A read given up is still handled when it fails later.
 */
export async function readBody(request: Request, declared: number | undefined, limits: BodyLimits): Promise<Buffer | AppError> {
  const reading = declared !== undefined ? wholeBody(request) : chunkedBody(request, limits);
  const ms = limits.bodyTimeoutMs;
  try {
    return await (ms === undefined ? reading : timeout(reading, ms, () => bodyTimedOut(ms)));
  } catch (error) {
    if ((error as Error | undefined)?.name === "AbortError") {
      return new AppError("body_incomplete", "The connection closed before the whole request body arrived; nothing of it was stored");
    }
    throw error;
  }
}

async function wholeBody(request: Request): Promise<Buffer> {
  return Buffer.from(await request.arrayBuffer());
}

async function chunkedBody(request: Request, limits: BodyLimits): Promise<Buffer | AppError> {
  if (request.body === null) return Buffer.alloc(0);
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const part of request.body) {
    size += part.byteLength;
    if (size > limits.maxBodyBytes) return tooLarge(limits.maxBodyBytes, size, "at least ");
    parts.push(part);
  }
  return Buffer.concat(parts, size);
}

function bodyTimedOut(ms: number): AppError {
  return new AppError(
    "body_timeout",
    `The request body did not arrive whole within ${ms} ms (INGEST_BODY_TIMEOUT_MS); nothing of it was stored. Send the body without pausing, or smaller batches.`,
  );
}

function tooLarge(limit: number, seen: number, qualifier = ""): AppError {
  return new AppError(
    "body_too_large",
    `Request body is ${qualifier}${seen} bytes; the limit is ${limit} bytes (INGEST_MAX_BODY_BYTES). Send fewer events per request.`,
  );
}

export type Encoding = (typeof ENCODINGS)[number];

export function parseEncoding(header: string | null): Encoding | AppError {
  if (header === null) return "identity";
  const value = header.trim().toLowerCase() || "identity";
  if ((ENCODINGS as readonly string[]).includes(value)) return value as Encoding;
  return new AppError("unsupported_encoding", `Content-Encoding ${JSON.stringify(value.slice(0, 64))} is not supported; use one of: ${ENCODINGS.join(", ")}`);
}

const inflaters = {
  gzip: [zlib.gunzipSync, zlib.createGunzip],
  deflate: [zlib.inflateSync, zlib.createInflate],
  deflateRaw: [zlib.inflateRawSync, zlib.createInflateRaw],
  br: [zlib.brotliDecompressSync, zlib.createBrotliDecompress],
  zstd: [zlib.zstdDecompressSync, zlib.createZstdDecompress],
} as const;
type Kind = keyof typeof inflaters;

/** An identity body as is, under the decompressed cap: synchronous, so the usual request awaits no promise here. */
export function identityBody(body: Buffer, maxBytes: number): Buffer | AppError {
  return body.length > maxBytes ? decompressedTooLarge(maxBytes) : body;
}

export async function decompress(body: Buffer, encoding: Encoding, maxBytes: number): Promise<Buffer | AppError> {
  if (encoding === "identity") return identityBody(body, maxBytes);
  if (encoding === "snappy") return snappyBody(body, maxBytes);
  // HTTP's "deflate" is zlib-wrapped, but some clients send raw deflate: the first byte tells.
  const kind = encoding === "deflate" && (body.length < 2 || (body[0]! & 0x0f) !== 8) ? "deflateRaw" : encoding;
  if (kind === "zstd") {
    const cut = zstdTruncation(body);
    if (cut) return new AppError("body_undecodable", `Body is not valid zstd data (Content-Encoding: zstd): ${cut}`);
  }
  try {
    const { output, consumed } = await inflate(kind, body, maxBytes);
    // zlib stops at the end of the compressed stream and ignores what follows: refuse it instead.
    if (consumed < body.length) {
      return new AppError("body_undecodable", `Body has ${body.length - consumed} bytes after the end of its ${encoding} data`);
    }
    return output;
  } catch (error) {
    if (isTooLarge(error)) {
      return decompressedTooLarge(maxBytes);
    }
    return new AppError("body_undecodable", `Body is not valid ${encoding} data (Content-Encoding: ${encoding}): ${(error as Error).message}`);
  }
}

/** A snappy block, its stated length checked before it is allocated; a big one off the event loop. */
async function snappyBody(body: Buffer, maxBytes: number): Promise<Buffer | AppError> {
  const length = checkSnappy(body, maxBytes);
  if (length instanceof AppError) return length;
  return length < SYNC_DECOMPRESS_MAX_OUTPUT ? unsnappy(body, maxBytes) : unsnappyOffLoop(body, maxBytes);
}

/** Small bodies inflate synchronously (cheaper); large ones on zlib's thread pool, capped as they grow. */
async function inflate(kind: Kind, body: Buffer, maxBytes: number): Promise<{ output: Buffer; consumed: number }> {
  const [sync, stream] = inflaters[kind];
  const syncMax = Math.min(maxBytes, SYNC_DECOMPRESS_MAX_OUTPUT);
  // A gzip body that says it inflates past syncMax goes to the pool at once: inflating 4 MiB on
  // the loop to throw it away cost a 20 KB body of 20 MB the better part of its 1 s bound.
  const hint = kind === "gzip" ? gzipSizeHint(body) : undefined;
  if (body.length < SYNC_DECOMPRESS_BELOW_BYTES && (hint === undefined || hint < syncMax)) {
    try {
      const chunkSize = Math.min(syncMax, outputHint(body, hint));
      const result = (sync as (input: Buffer, options: object) => unknown)(body, { maxOutputLength: syncMax, info: true, chunkSize }) as {
        buffer: Buffer;
        engine: { bytesWritten: number };
      };
      return { output: result.buffer, consumed: result.engine.bytesWritten };
    } catch (error) {
      if (syncMax === maxBytes || !isTooLarge(error)) throw error;
    }
  }
  return new Promise((resolve, reject) => {
    // Big outputs in 1 MiB chunks, not 16 KiB ones: each chunk is a turn of the event loop.
    const engine = (stream as (options: object) => ReturnType<typeof stream>)({ chunkSize: STREAM_CHUNK_BYTES });
    // Into one buffer the size the gzip trailer states (a body with a Content-Length is charged
    // that size by the gate; a wrong trailer's untouched pages cost no memory): parts joined at the
    // end held the output twice at once, 60 MB for a 30 MB body. Past the stated size (the last of
    // several members states only its own), the rest in parts, joined at the end.
    let whole = hint !== undefined && hint <= maxBytes ? Buffer.allocUnsafeSlow(hint) : undefined; // never a slice of the shared pool: it may be transferred
    const parts: Buffer[] = [];
    let size = 0;
    engine.on("data", (part: Buffer) => {
      size += part.length;
      if (size > maxBytes) engine.destroy(Object.assign(new Error("too large"), { code: "ERR_BUFFER_TOO_LARGE" }));
      else if (whole !== undefined && size <= whole.length) whole.set(part, size - part.length);
      else {
        if (whole !== undefined) parts.push(whole.subarray(0, size - part.length));
        whole = undefined;
        parts.push(part);
      }
    });
    engine.on("end", () => {
      // Shorter than stated: zlib has refused a wrong trailer by now; bytes after the gzip data get their 400 from the caller.
      const output = whole === undefined ? Buffer.concat(parts, size) : whole.subarray(0, size);
      resolve({ output, consumed: engine.bytesWritten });
    });
    engine.on("error", reject);
    engine.end(body);
  });
}

/**
 * zlib's output chunk for a sync inflate: the whole output when it can be told, so the output is
 * one chunk and not 16 KiB ones joined at the end (realistic @logtail/node bodies, 568 KB inflated:
 * 1.22 → 0.95 ms each, bench-style loop). Gzip's trailer holds the size (mod 2^32; a hint only, a
 * wrong one costs a join; trusted up to 64× the compressed size); other formats get four times it.
 */
function outputHint(body: Buffer, gzipHint: number | undefined): number {
  return Math.max(16 * 1024, gzipHint === undefined ? body.length * 4 : Math.min(gzipHint + 1, body.length * 64));
}

/** The inflated size a gzip body's trailer states (ISIZE, mod 2^32): a hint, the sender's word. */
export function gzipSizeHint(body: Uint8Array): number | undefined {
  const at = body.length - 4;
  return at >= 14 ? (body[at]! | (body[at + 1]! << 8) | (body[at + 2]! << 16)) + body[at + 3]! * 0x1000000 : undefined;
}

/**
 * zstd's decoder (node:zlib, Bun 1.4) ends quietly at a body cut short inside a frame and returns
 * what it decoded so far: a cut NDJSON upload got 202 with half its events. So the frames are
 * walked first (headers and block headers only, no decoding): a frame or block that runs past the
 * body's end is a cut; what the frames do not cover is left to the "bytes after the end" check.
 */
function zstdTruncation(body: Uint8Array): string | undefined {
  const cut = "unexpected end of file (the body ends inside a zstd frame)";
  const u32 = (at: number) => body[at]! + (body[at + 1]! << 8) + (body[at + 2]! << 16) + body[at + 3]! * 0x1000000;
  let at = 0;
  while (at < body.length) {
    if (at + 4 > body.length) return cut;
    const magic = u32(at);
    if (magic >>> 4 === 0x184d2a5) {
      // A skippable frame: its size, then that many bytes.
      if (at + 8 > body.length) return cut;
      at += 8 + u32(at + 4);
      if (at > body.length) return cut;
      continue;
    }
    if (magic !== 0xfd2fb528) return undefined; // not a frame: the decoder says what is wrong
    if (at + 5 > body.length) return cut;
    const descriptor = body[at + 4]!;
    const singleSegment = (descriptor >> 5) & 1;
    const contentSizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][descriptor >> 6]!;
    const dictionaryBytes = [0, 1, 2, 4][descriptor & 3]!;
    const checksumBytes = descriptor & 4 ? 4 : 0;
    at += 5 + (singleSegment ? 0 : 1) + dictionaryBytes + contentSizeBytes;
    for (let last = false; !last; ) {
      if (at + 3 > body.length) return cut;
      const header = body[at]! | (body[at + 1]! << 8) | (body[at + 2]! << 16);
      last = (header & 1) === 1;
      const type = (header >> 1) & 3;
      at += 3 + (type === 1 ? 1 : header >>> 3);
      if (at > body.length) return cut;
    }
    at += checksumBytes;
    if (at > body.length) return cut;
  }
  return undefined;
}

function isTooLarge(error: unknown): boolean {
  return (error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE" || error instanceof RangeError;
}

function decompressedTooLarge(maxBytes: number): AppError {
  return new AppError(
    "decompressed_too_large",
    `Decompressed body is over ${maxBytes} bytes, the limit (INGEST_MAX_DECOMPRESSED_BYTES). Send fewer events per request.`,
  );
}
