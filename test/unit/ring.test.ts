import { expect, test } from "bun:test";
import { Ring, type Chunk } from "../../src/buffer/ring";

const b = (text: string) => Buffer.from(text);
const chunk = (events: number, bytes = 10): Chunk => ({ rows: b("x".repeat(bytes)), events, bytes, seq: 0 });

test("bounded by events and bytes, counting taken-but-unreleased chunks", () => {
  const ring = new Ring({ maxEvents: 10, maxBytes: 100 });
  expect(ring.push(chunk(6))).toBe(true);
  expect(ring.push(chunk(5))).toBe(false);
  expect(ring.push(chunk(4))).toBe(true);
  const taken = ring.take(100);
  expect(taken.map((c) => c.events)).toEqual([6, 4]);
  expect(ring.pendingEvents).toBe(0);
  expect(ring.push(chunk(1))).toBe(false); // still held until released
  ring.release(taken);
  expect(ring.push(chunk(1))).toBe(true);
  expect(ring.push(chunk(1, 200))).toBe(false);
});

test("take respects maxEvents but always takes at least one chunk; FIFO across growth", () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 1 << 30 });
  for (let i = 0; i < 5000; i++) ring.push({ ...chunk(1), rows: b(String(i)) });
  const first = ring.take(3000);
  expect(first).toHaveLength(3000);
  expect(first[0]!.rows).toEqual(b("0"));
  expect(ring.take(2000).map((c) => c.rows)[1999]).toEqual(b("4999"));
  ring.push(chunk(50));
  expect(ring.take(10)).toHaveLength(1);
});

test("sequence numbers tell what is still pending", () => {
  const ring = new Ring({ maxEvents: 100, maxBytes: 1000 });
  expect(ring.oldestPendingSeq).toBe(1);
  ring.push(chunk(1));
  ring.push(chunk(1));
  expect(ring.lastSeq).toBe(2);
  ring.take(1);
  expect(ring.oldestPendingSeq).toBe(2);
});

// The ring never reads its rows: any bytes stand for tuples here.
const ROW = "1\t2026-01-01T00:00:00.000Z\t{}\n";
const text = (chunks: Chunk[]) => chunks.map((c) => Buffer.from(c.rows).toString()).join("");

test("append: small rows share one chunk, one sequence number per call, sealed as bytes when taken", () => {
  const ring = new Ring({ maxEvents: 100, maxBytes: 10_000 });
  expect(ring.append(b(ROW), 1)).toBe(true);
  expect(ring.append(b(ROW + ROW), 2)).toBe(true);
  expect(ring.lastSeq).toBe(2);
  expect(ring.oldestPendingSeq).toBe(1);
  expect([ring.pendingEvents, ring.heldBytes]).toEqual([3, ROW.length * 3]);
  const taken = ring.take(100);
  expect(taken).toHaveLength(1);
  expect(taken[0]!.rows).toBeInstanceOf(Uint8Array);
  expect([taken[0]!.events, taken[0]!.bytes, taken[0]!.seq]).toEqual([3, ROW.length * 3, 1]);
  expect(text(taken)).toBe(ROW.repeat(3));
  // After the take a new chunk opens; the sealed one kept its own copy of the bytes.
  ring.append(b("2\tx\t{}\n"), 1);
  expect(text(taken)).toBe(ROW.repeat(3));
  expect(ring.oldestPendingSeq).toBe(3);
  expect(text(ring.take(100))).toBe("2\tx\t{}\n");
});

test("append: a pushed chunk seals the open one (FIFO); long rows get a chunk of their own", () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 1 << 30 });
  ring.append(b(ROW), 1);
  ring.push({ rows: b("pushed\n"), events: 1, bytes: 7, seq: 0 });
  ring.append(b(ROW), 1);
  ring.append(b("y".repeat(5_000) + "\n"), 1);
  ring.append(b("small\n"), 1);
  const taken = ring.take(100);
  expect(taken.map((c) => c.events)).toEqual([1, 1, 1, 1, 1]);
  expect(taken.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5]);
  expect(text([taken[1]!])).toBe("pushed\n");
  expect(taken[3]!.bytes).toBe(5_001);
  expect(text([taken[4]!])).toBe("small\n");
});

test("append copies the rows: the caller's buffer may be reused at once (the encoder's scratch is)", () => {
  const ring = new Ring({ maxEvents: 100, maxBytes: 1 << 20 });
  const scratch = Buffer.alloc(10_000, "a");
  ring.append(scratch.subarray(0, 10), 1); // coalesced into the slab
  ring.append(scratch.subarray(0, 6_000), 1); // a chunk of its own
  scratch.fill("z");
  const taken = ring.take(100);
  expect(text(taken)).toBe("a".repeat(6_010));
});

test("append: refused when it does not fit, leaving the ring as it was", () => {
  const ring = new Ring({ maxEvents: 2, maxBytes: ROW.length * 10 });
  expect(ring.append(b(ROW), 1)).toBe(true);
  expect(ring.append(b(ROW + ROW), 2)).toBe(false);
  expect(ring.append(b(ROW.repeat(10)), 1)).toBe(false);
  expect([ring.pendingEvents, ring.heldBytes, ring.lastSeq]).toEqual([1, ROW.length, 1]);
  expect(ring.append(b(ROW), 1)).toBe(true);
  expect(text(ring.take(10))).toBe(ROW.repeat(2));
});

test("append: multi-byte rows across slab boundaries keep every byte; a chunk is sealed at chunkMaxEvents", () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 1 << 30, chunkMaxEvents: 10_000 });
  const rows: string[] = [];
  for (let i = 0; i < 3000; i++) rows.push(`${i}\t€ü${"€".repeat(1_200 + (i % 150))}\n`); // ~4 KB each, coalesced: several slabs
  for (const row of rows) expect(ring.append(b(row), 1)).toBe(true);
  const taken = ring.take(1_000_000);
  expect(taken.length).toBeGreaterThan(1);
  expect(taken.length).toBeLessThan(10); // slabs, not a chunk per row
  expect(text(taken)).toBe(rows.join(""));
  expect(taken.reduce((sum, c) => sum + c.bytes, 0)).toBe(Buffer.byteLength(rows.join("")));
  for (let i = 0; i < 25_000; i++) ring.append(b(ROW), 1);
  expect(ring.take(1_000_000).map((c) => c.events)).toEqual([10_000, 10_000, 5_000]);
});

test("slabs: rows lie in shared memory; a slab is written again only once all its chunks are released", () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 1 << 30 });
  const row = (i: number) => b(`${String(i).padStart(6, "0")}${"r".repeat(100_000)}`); // a chunk each, ~40 per slab
  ring.append(row(0), 1);
  const [held] = ring.take(1);
  expect(held!.rows.buffer).toBeInstanceOf(SharedArrayBuffer);
  // Many slabs' worth pass through while `held` is kept: none of them may overwrite it.
  const seen = new Set<ArrayBufferLike>();
  for (let i = 1; i <= 2_000; i++) {
    expect(ring.append(row(i), 1)).toBe(true);
    const [chunk] = ring.take(1);
    expect(Buffer.from(chunk!.rows).subarray(0, 6).toString()).toBe(String(i).padStart(6, "0"));
    seen.add(chunk!.rows.buffer);
    ring.release([chunk!]);
  }
  expect(Buffer.from(held!.rows).equals(row(0))).toBe(true);
  expect(seen.size).toBeLessThan(4); // reused, not a new slab per 4 MiB
  ring.release([held!]);
  for (let i = 0; i < 200; i++) {
    ring.append(row(i), 1);
    const [chunk] = ring.take(1);
    seen.add(chunk!.rows.buffer);
    ring.release([chunk!]);
  }
  expect(seen.size).toBeLessThan(5);
  expect([ring.heldEvents, ring.heldBytes]).toEqual([0, 0]);
});

test("slabs: free ones are kept while they are needed, and let go once a minute passes without", () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 1 << 30 });
  const row = b("x".repeat(1_000_000)); // a chunk each, four per slab
  const MiB = 1024 * 1024;
  for (let i = 0; i < 80; i++) ring.append(row, 1); // 20 slabs
  expect([ring.heldBytes, ring.memoryBytes]).toEqual([80_000_000, 20 * 4 * MiB]);
  ring.append(b("y".repeat(2 * MiB)), 1); // over 1 MiB: a buffer of its own
  expect(ring.memoryBytes).toBe(20 * 4 * MiB + 2 * MiB);
  ring.release(ring.take(1_000_000));
  expect(ring.spareBytes).toBe(19 * 4 * 1024 * 1024); // the current slab is not spare
  expect([ring.heldBytes, ring.memoryBytes]).toEqual([0, 20 * 4 * MiB]);
  ring.shed(60_000); // the slabs ran out in this first minute: every one was needed, all are kept
  expect(ring.spareBytes).toBe(19 * 4 * 1024 * 1024);
  ring.shed(120_000); // a quiet minute: down to 8
  expect(ring.spareBytes).toBe(8 * 4 * 1024 * 1024);
  expect(ring.memoryBytes).toBe(9 * 4 * MiB);
  for (let i = 0; i < 60; i++) ring.append(row, 1); // 15 slabs: the 8 spares and new ones
  ring.release(ring.take(1_000_000));
  const afterBurst = ring.spareBytes;
  expect(afterBurst).toBeGreaterThan(8 * 4 * 1024 * 1024);
  ring.shed(150_000); // too soon: nothing happens
  expect(ring.spareBytes).toBe(afterBurst);
  ring.shed(180_000); // the spares ran out in this minute: all are kept
  expect(ring.spareBytes).toBe(afterBurst);
  ring.shed(240_000); // a quiet minute: down to 8
  expect(ring.spareBytes).toBe(8 * 4 * 1024 * 1024);
});

test("adopt: big rows at the start of a buffer of their own are kept as they are, others copied as append does; the ring's own buffers are freed at release", () => {
  const ring = new Ring({ maxEvents: 100, maxBytes: 10 << 20 });
  const big = new Uint8Array(new ArrayBuffer((2 << 20) + 100), 0, 2 << 20).fill(7);
  expect(ring.adopt(big, 3)).toBe(true);
  const small = Buffer.from("abc");
  expect(ring.adopt(small, 1)).toBe(true);
  const view = new Uint8Array(new ArrayBuffer(3 << 20), 1024, 2 << 20); // not at the start: copied
  expect(ring.adopt(view, 1)).toBe(true);
  expect(ring.heldBytes).toBe((4 << 20) + 3);
  const [first, second, third] = ring.take(100);
  expect(first!.rows).toBe(big);
  expect(first!.bytes).toBe(2 << 20);
  expect(second!.rows.buffer).toBeInstanceOf(SharedArrayBuffer); // into a slab
  expect(third!.rows).not.toBe(view);
  expect(third!.rows.length).toBe(2 << 20);
  expect(ring.adopt(big, 200)).toBe(false); // refused when it does not fit, as append
  // Released, buffers of the ring's own are freed at once (their rows must not be read after).
  ring.release([first!, second!, third!]);
  expect([big.byteLength, third!.rows.byteLength, ring.heldBytes]).toEqual([0, 0, 0]);
  const kept = new Uint8Array(2 << 20); // pushed by the caller (durable mode): the caller's, left alone
  ring.push({ rows: kept, events: 1, bytes: kept.length, seq: 0 });
  ring.release(ring.take(10));
  expect(kept.byteLength).toBe(2 << 20);
});

test("a taken chunk in a buffer of its own counts three times until it is released (the flush thread's copy and postgres.js's); one in a slab once", () => {
  const ring = new Ring({ maxEvents: 1000, maxBytes: 10 << 20 });
  const own = new Uint8Array(new ArrayBuffer(2 << 20));
  expect(ring.adopt(own, 1)).toBe(true);
  expect(ring.append(new Uint8Array(1000), 1)).toBe(true); // into a slab
  expect(ring.chargedBytes).toBe((2 << 20) + 1000);
  const taken = ring.take(10);
  expect(ring.chargedBytes).toBe(3 * (2 << 20) + 1000);
  expect(ring.fits(1, (10 << 20) - 3 * (2 << 20) - 1000)).toBe(true);
  expect(ring.fits(1, (10 << 20) - 3 * (2 << 20) - 999)).toBe(false);
  expect(ring.roomFor(5 << 20)).toBe(false); // 6 MiB + 5 MiB > 10 MiB, though 2 MiB are held
  ring.release(taken);
  expect([ring.chargedBytes, ring.heldBytes]).toEqual([0, 0]);
  expect(ring.roomFor(5 << 20)).toBe(true);
});
