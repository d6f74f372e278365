import { expect, test } from "bun:test";
import { Ring, type Chunk } from "../../src/buffer/ring";

const chunk = (events: number, bytes = 10): Chunk => ({ rows: "x".repeat(bytes), events, bytes, seq: 0 });

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
  for (let i = 0; i < 5000; i++) ring.push({ ...chunk(1), rows: String(i) });
  const first = ring.take(3000);
  expect(first).toHaveLength(3000);
  expect(first[0]!.rows).toBe("0");
  expect(ring.take(2000).map((c) => c.rows)[1999]).toBe("4999");
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
