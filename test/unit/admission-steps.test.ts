// One request's Admission (memory/admission.ts) on its own: a real gate, ring and pacer, the
// pacer's collections counted instead of run, lanes on a clock the test moves. Each step's answer
// and what it leaves charged.
import { expect, test } from "bun:test";
import { Ring } from "../../src/buffer/ring";
import { Admission } from "../../src/memory/admission";
import { BIG_BODY_BYTES, COST_FACTOR, PACE_BYTES, SLICED_COST_FACTOR } from "../../src/memory/costs";
import { Gate, Ticket } from "../../src/memory/gate";
import { GcPacer } from "../../src/memory/gcpace";
import { TestClock } from "../helpers/clock";

const MIB = 1024 * 1024;

function world(budgetBytes = 100 * MIB, ringBytes = 1024 * MIB) {
  const clock = new TestClock();
  const gate = new Gate({ budgetBytes, lanes: 1, clock });
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: ringBytes });
  const collections: boolean[] = [];
  const gcPacer = new GcPacer(
    Infinity,
    Infinity,
    () => ({ rss: 0, spare: 0 }),
    (full) => collections.push(full),
    () => 0,
    (run) => run(),
  );
  return { clock, gate, ring, collections, admission: () => new Admission({ gate, ring, gcPacer }) };
}

test("announced: charged by the Content-Length as it may decode; refused unread, its bytes still pace the collector", () => {
  const w = world();
  const first = w.admission();
  expect(first.announced(20 * MIB, "json", true)).toBeUndefined();
  expect(w.gate.bytes).toBe(20 * MIB * SLICED_COST_FACTOR);
  const second = w.admission();
  expect(second.announced(PACE_BYTES * 8, "json", false)?.reason).toBe("overloaded");
  expect(w.collections).toEqual([false]); // one quick collection for the 64 MiB that arrive anyway
  second.release(); // holds nothing: changes nothing
  expect([w.gate.bytes, w.gate.size]).toEqual([20 * MIB * SLICED_COST_FACTOR, 1]);
  first.release();
  first.release();
  expect([w.gate.bytes, w.gate.size]).toEqual([0, 0]);
});

test("inflating: a full ring refuses by the trailer's size; a bigger size that does not fit beside the others is overloaded", () => {
  const w = world(100 * MIB, 10 * MIB);
  const other = w.admission();
  expect(other.announced(10 * MIB, "json", false)).toBeUndefined(); // 40 MiB
  const a = w.admission();
  expect(a.announced(100_000, "json", false)).toBeUndefined();
  // Past what the ring ever holds: the encoder decides (413), not the ring; recharged as sliced.
  expect(a.inflating(11 * MIB, 100_000, "json", true)).toBeUndefined();
  expect(w.gate.bytes).toBe(10 * MIB * COST_FACTOR + 11 * MIB * SLICED_COST_FACTOR);
  expect(w.ring.append(new Uint8Array(9 * MIB), 1)).toBe(true);
  expect(a.inflating(2 * MIB, 100_000, "json", false)?.reason).toBe("buffer_full");
  w.ring.release(w.ring.take(1_000_000));
  expect(a.inflating(20 * MIB, 100_000, "json", false)?.reason).toBe("overloaded"); // 80 MiB beside 40
  expect(w.gate.bytes).toBe(10 * MIB * COST_FACTOR + 11 * MIB * SLICED_COST_FACTOR); // the old charge holds until it leaves
  a.release();
  other.release();
});

test("decoding and charged: the ring's room first, then the charge by size and shape (admitted now when no length was announced)", () => {
  const w = world();
  const chunked = w.admission();
  expect(chunked.decoding(2 * MIB)).toBeUndefined();
  expect(chunked.big).toBe(true);
  expect(chunked.charged("msgpack", false)).toBeUndefined();
  expect(w.gate.bytes).toBe(2 * MIB * 8); // big MessagePack decoded whole: packed
  const announced = w.admission();
  expect(announced.announced(BIG_BODY_BYTES - 1, "json", false)).toBeUndefined();
  expect(announced.decoding(BIG_BODY_BYTES - 1)).toBeUndefined();
  expect(announced.big).toBe(false);
  expect(announced.charged("json", false)).toBeUndefined();
  expect(w.gate.size).toBe(2); // recharged, not admitted twice
  chunked.release();
  announced.release();
  expect([w.gate.bytes, w.gate.size]).toEqual([0, 0]);
});

test("lane: a big body waits its turn; after the wait, a client that left or a ring that filled refuses it", async () => {
  const w = world(1024 * MIB, 10 * MIB);
  const first = w.admission();
  first.decoding(2 * MIB);
  first.charged("json", true);
  expect(await first.lane(new AbortController().signal)).toBeUndefined();

  const gone = new AbortController();
  const second = w.admission();
  second.decoding(2 * MIB);
  second.charged("json", true);
  const waiting = second.lane(gone.signal);
  gone.abort();
  first.release(); // its lane goes to the one waiting
  expect((await waiting)?.reason).toBe("overloaded");
  second.release();

  const third = w.admission();
  third.decoding(2 * MIB);
  third.charged("json", true);
  expect(w.ring.append(new Uint8Array(9 * MIB), 1)).toBe(true);
  expect((await third.lane(new AbortController().signal))?.reason).toBe("buffer_full");
  third.release();
  expect([w.gate.bytes, w.gate.size, w.gate.waitingForLane]).toEqual([0, 0, 0]);
  expect(w.gate.admit(1, "whole")).toBeInstanceOf(Ticket);
});
