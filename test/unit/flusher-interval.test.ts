// The flusher's interval (buffer/flusher.ts's start(), a periodic() job on the flusher's clock): what
// waits below a batch's worth goes out at each turn, FLUSH_INTERVAL_MS apart from the start, and
// drain() leaves no turn armed. test/unit/flusher-model.test.ts calls tick() itself; this is the
// timer that calls it. No PostgreSQL: a stream that commits at once.
import { expect, test } from "bun:test";
import { Flusher, type Stream } from "../../src/buffer/flusher";
import { Ring } from "../../src/buffer/ring";
import { microsOfMillis } from "../../src/codec/time";
import { TUPLE_HEAD, tupleHead, writeTuple } from "../../src/codec/tuples";
import { Metrics } from "../../src/metrics";
import { quiet, TestClock } from "../helpers/clock";

const INTERVAL = 200;

/** A stream that commits every write at once; it records the writes' row counts. */
function committingStream(): Stream & { writes: number[] } {
  let nextId = 1;
  let seq = 0;
  const writes: number[] = [];
  return {
    writes,
    reserveIds: async (count) => {
      const first = nextId;
      nextId += count;
      return first;
    },
    write: async (_batchId, rows) => {
      writes.push(rows.length);
      return { seq: ++seq };
    },
    committed: async () => false,
    deadLetter: async () => {},
    forgetBatches: async () => {},
  };
}

function rows(count: number): Buffer {
  const json = "{}";
  const buffer = Buffer.allocUnsafe(count * (TUPLE_HEAD + json.length));
  let at = 0;
  for (let i = 0; i < count; i++) at += writeTuple(buffer, at, tupleHead(1), microsOfMillis(Date.UTC(2026, 0, 1)), json);
  return buffer.subarray(0, at);
}

test("start(): a turn every interval from the start takes what waits below a batch's worth; drain() arms nothing more", async () => {
  const clock = new TestClock();
  const ring = new Ring({ maxEvents: 1_000, maxBytes: 1 << 20 });
  const stream = committingStream();
  const flusher = new Flusher(ring, [stream], {
    intervalMs: INTERVAL,
    maxEvents: 100,
    eager: false,
    metrics: new Metrics(),
    log: () => {},
    clock,
    random: () => 0,
  });
  flusher.start();
  flusher.start(); // a second start arms no second timer
  expect(clock.pending).toBe(1);

  ring.append(rows(3), 3);
  flusher.pushed(); // below maxEvents, not eager: it waits for the interval
  clock.advance(INTERVAL - 1);
  await quiet();
  expect(stream.writes).toEqual([]);
  clock.advance(1);
  await quiet();
  expect(stream.writes.length).toBe(1);
  expect(ring.heldEvents).toBe(0);

  // The next turn: an interval after the previous one, whatever the write took.
  ring.append(rows(2), 2);
  clock.advance(INTERVAL);
  await quiet();
  expect(stream.writes.length).toBe(2);
  expect(ring.heldEvents).toBe(0);

  expect(await flusher.drain(1_000)).toBe(true);
  expect(clock.pending).toBe(0);
  ring.append(rows(1), 1);
  clock.advance(10 * INTERVAL);
  await quiet();
  expect(stream.writes.length).toBe(2);
  expect(ring.pendingEvents).toBe(1);
});
