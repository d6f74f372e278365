import { expect, test } from "bun:test";
import { COST_FACTOR, InFlight } from "../../src/memory/inflight";

const MIB = 1024 * 1024;

test("requests share the budget; past it undefined (503), a request alone always goes in", () => {
  const inFlight = new InFlight(100 * MIB);
  const first = inFlight.charge(20 * MIB); // 80 MiB charged
  expect(first).toBe(20 * MIB * COST_FACTOR);
  expect(inFlight.charge(10 * MIB)).toBeUndefined();
  inFlight.release(first!);
  expect(inFlight.bytes).toBe(0);
  const alone = inFlight.charge(50 * MIB); // 200 MiB, over the budget, but alone
  expect(alone).toBe(50 * MIB * COST_FACTOR);
  inFlight.release(alone!);
});

test("the room the ring leaves bounds requests too, whichever is smaller", () => {
  let room = 300 * MIB;
  const inFlight = new InFlight(100 * MIB, () => room);
  const first = inFlight.charge(10 * MIB)!; // 40 MiB
  const second = inFlight.charge(10 * MIB)!; // 80 MiB ≤ min(100, 300)
  room = 82 * MIB; // the ring filled up
  expect(inFlight.charge(1 * MIB)).toBeUndefined(); // 84 ≤ 100, but > 82
  room = 84 * MIB;
  const third = inFlight.charge(1 * MIB)!;
  expect(third).toBe(4 * MIB);
  for (const cost of [first, second, third]) inFlight.release(cost);
  room = 0; // the ring is full: one request at a time
  const alone = inFlight.charge(1 * MIB)!;
  expect(alone).toBe(4 * MIB);
  expect(inFlight.charge(1)).toBeUndefined();
  inFlight.release(alone);
});

test("a big request beside another big one is judged by the big room; alone among big ones, by the ring's room, whatever small ones are in flight", () => {
  const room = 400 * MIB;
  let bigRoom = 100 * MIB; // the process's RSS leaves less
  const inFlight = new InFlight(
    1024 * MIB,
    () => room,
    () => bigRoom,
    MIB,
  );
  const small = inFlight.charge(0.5 * MIB)!; // 2 MiB: small, by the ring's room
  const first = inFlight.charge(30 * MIB)!; // 120 MiB: the only big one, so by the ring's room (122 ≤ 400)
  expect(first).toBe(120 * MIB);
  expect(inFlight.charge(30 * MIB)).toBeUndefined(); // beside it: 242 > 100
  expect(inFlight.charge(0.5 * MIB)).toBe(2 * MIB); // small ones are not judged by the big room
  bigRoom = 300 * MIB;
  const second = inFlight.charge(30 * MIB)!; // 244 ≤ 300
  expect(second).toBe(120 * MIB);
  inFlight.release(first);
  inFlight.release(second);
  bigRoom = -50 * MIB; // memory past the bound: still one big one at a time beside the small ones
  const alone = inFlight.charge(30 * MIB)!;
  expect(alone).toBe(120 * MIB);
  expect(inFlight.charge(2 * MIB)).toBeUndefined();
  for (const cost of [alone, small, 2 * MIB]) inFlight.release(cost);
  expect(inFlight.bytes).toBe(0);
});
