// A big gzip body inflates on zlib's thread pool into one buffer the size its trailer states; the
// trailer is the sender's word, so a body whose trailer is wrong, or that has several members,
// still inflates to exactly its bytes, and the decompressed limit still holds.
import { expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { decompress } from "../../src/ingest/body";
import { AppError } from "../../src/errors";

/** Seeded text that gzip does not shrink to nothing (mulberry32). */
function text(bytes: number, seed: number): Buffer {
  let state = seed;
  const next = () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const words = ["alpha", "bravo", "cache", "shard", "queue", "retry", "lease", "token", "12", "404", "\n"];
  const parts: string[] = [];
  for (let size = 0; size < bytes; ) {
    const word = next() < 0.3 ? Math.floor(next() * 1e9).toString(36) : words[Math.floor(next() * words.length)]!;
    parts.push(word, " ");
    size += word.length + 1;
  }
  return Buffer.from(parts.join("")).subarray(0, bytes);
}

/** The gzip body with its trailer's ISIZE set to `stated`. */
function withTrailer(body: Buffer, stated: number): Buffer {
  const copy = Buffer.from(body);
  copy.writeUInt32LE(stated >>> 0, copy.length - 4);
  return copy;
}

const MAX = 64 * 1024 * 1024;

test.each([
  ["a true trailer", (z: Buffer, n: number) => withTrailer(z, n)],
  ["a trailer stating less", (z: Buffer, n: number) => withTrailer(z, n - 3_000_000)],
  ["a trailer stating more", (z: Buffer, n: number) => withTrailer(z, n + 5_000_000)],
  ["a trailer stating past the limit", (z: Buffer, _n: number) => withTrailer(z, MAX + 1)],
])("a big gzip body with %s inflates to exactly its bytes", async (_name, trailer) => {
  const original = text(9_000_000, 7);
  const zipped = gzipSync(original);
  const got = await decompress(trailer(zipped, original.length), "gzip", MAX);
  // Wrong trailers fail gzip's own length check: refused as undecodable, never a wrong body.
  if (got instanceof AppError) {
    expect(got.reason).toBe("body_undecodable");
    return;
  }
  expect(got.length).toBe(original.length);
  expect(got.equals(original)).toBe(true);
});

test("two gzip members inflate to both (the trailer states the last one's size); the limit holds whatever the trailer says", async () => {
  const first = text(6_000_000, 11);
  const second = text(2_000_000, 12);
  const got = await decompress(Buffer.concat([gzipSync(first), gzipSync(second)]), "gzip", MAX);
  expect(got).not.toBeInstanceOf(AppError);
  expect((got as Buffer).equals(Buffer.concat([first, second]))).toBe(true);
  const over = await decompress(gzipSync(text(9_000_000, 13)), "gzip", 8_000_000);
  expect(over).toBeInstanceOf(AppError);
  expect((over as AppError).reason).toBe("decompressed_too_large");
});
