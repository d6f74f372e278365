// The memory gate (memory/gate.ts) on its own: counts in, answers out, on a clock the test moves.
// No heap, no RSS, no wall clock: the same calls always get the same answers.
import { expect, test } from "bun:test";
import { BIG_BODY_BYTES, COST_FACTOR, LANE_WAIT_MS, PACKED_COST_FACTOR, SLICED_COST_FACTOR, SMALL_RESERVE_BYTES } from "../../src/memory/costs";
import { Gate, type GateOptions, type Refusal, type Shape, Ticket } from "../../src/memory/gate";
import { TestClock } from "../helpers/clock";

const MIB = 1024 * 1024;

/** A gate of 100 MiB; no share kept for small requests unless the test asks (its own test below). */
function gate(options: Partial<GateOptions> = {}) {
  const clock = new TestClock();
  return { gate: new Gate({ budgetBytes: 100 * MIB, clock, smallReserveBytes: 0, ...options }), clock };
}

const admitted = (answer: Ticket | Refusal): Ticket => {
  if (!(answer instanceof Ticket)) throw new Error(`refused: ${JSON.stringify(answer)}`);
  return answer;
};

/** Settles the lane promises resolved so far. */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

const SHAPES: Shape[] = ["sliced", "whole", "packed"];

test.each([
  ["small, decoded whole", 100_000, "whole", 100_000 * COST_FACTOR],
  ["small, sliced shape: charged as sliced (the caller says it is)", 100_000, "sliced", 100_000 * SLICED_COST_FACTOR],
  ["big, decoded whole (OTLP, Loki, a JSON object)", 16 * MIB, "whole", 16 * MIB * COST_FACTOR],
  ["big, decoded whole from MessagePack", 16 * MIB, "packed", 16 * MIB * PACKED_COST_FACTOR],
  ["big, decoded in slices (NDJSON, JSON array)", 16 * MIB, "sliced", 16 * MIB * SLICED_COST_FACTOR],
] as const)("%s: charged its size times what decoding it costs", (_name, bytes, shape, cost) => {
  const { gate: g } = gate({ budgetBytes: 1024 * MIB });
  expect(g.cost(bytes, shape)).toBe(cost);
  const ticket = admitted(g.admit(bytes, shape));
  expect([ticket.cost, g.bytes, g.size]).toEqual([cost, cost, 1]);
  g.leave(ticket);
  expect([g.bytes, g.size]).toEqual([0, 0]);
});

test("requests share the budget; past it, refused with why and the figures; an empty gate admits one whatever it costs", () => {
  const { gate: g } = gate();
  const first = admitted(g.admit(20 * MIB, "whole")); // 80 MiB
  expect(g.admit(10 * MIB, "whole")).toEqual({ why: "budget", costBytes: 40 * MIB, chargedBytes: 80 * MIB, limitBytes: 100 * MIB });
  const second = admitted(g.admit(5 * MIB, "whole")); // 100 MiB: exactly the budget
  expect(g.admit(1, "whole")).toMatchObject({ why: "budget" });
  g.leave(first);
  g.leave(second);
  expect(g.bytes).toBe(0);
  const alone = admitted(g.admit(50 * MIB, "whole")); // 200 MiB: over the budget, but the gate was empty
  expect(alone.cost).toBe(200 * MIB);
  expect(g.admit(1, "whole")).toMatchObject({ why: "budget", chargedBytes: 200 * MIB });
  g.leave(alone);
  expect(g.admit(1, "whole")).toBeInstanceOf(Ticket);
});

test("small requests keep a share big ones cannot take: big uploads fill the rest, small batches still come in", () => {
  const { gate: g } = gate({ smallReserveBytes: SMALL_RESERVE_BYTES }); // 100 MiB: 25 MiB kept (a quarter)
  const big = admitted(g.admit(18 * MIB, "whole")); // 72 MiB
  // Another big one would pass the 75 MiB big requests may hold; the refusal names that limit.
  expect(g.admit(BIG_BODY_BYTES, "whole")).toEqual({ why: "budget", costBytes: 4 * MIB, chargedBytes: 72 * MIB, limitBytes: 75 * MIB });
  // Small batches (under BIG_BODY_BYTES) fit up to the whole budget.
  const small = Array.from({ length: 28 }, () => admitted(g.admit(BIG_BODY_BYTES / 4, "whole"))); // 28 × 1 MiB
  expect(g.bytes).toBe(100 * MIB);
  expect(g.admit(1, "whole")).toMatchObject({ why: "budget", limitBytes: 100 * MIB });
  // A small request that turns out big (its decompressed size) is judged as big.
  g.leave(small.pop()!);
  const grown = small.pop()!;
  expect(g.recharge(grown, 2 * MIB, "whole")).toMatchObject({ why: "budget", limitBytes: 75 * MIB });
  for (const ticket of [big, grown, ...small]) g.leave(ticket);
  expect(g.bytes).toBe(0);
  // A big request admitted alone past the whole budget (the empty gate's exemption) does not shut
  // small ones out: they still have their share.
  const huge = admitted(g.admit(50 * MIB, "whole")); // 200 MiB
  const smallOnes = Array.from({ length: 25 }, () => admitted(g.admit(BIG_BODY_BYTES / 4, "whole"))); // 25 × 1 MiB: the share
  expect(g.admit(BIG_BODY_BYTES / 4, "whole")).toMatchObject({ why: "budget", chargedBytes: 225 * MIB, limitBytes: 100 * MIB });
  expect(g.admit(BIG_BODY_BYTES, "whole")).toMatchObject({ why: "budget", limitBytes: 75 * MIB });
  for (const ticket of [huge, ...smallOnes]) g.leave(ticket);
  expect(g.bytes).toBe(0);
});

test("the room the caller's budget leaves bounds requests too, whichever is smaller, read at each answer", () => {
  let room = 300 * MIB;
  const { gate: g } = gate({ room: () => room });
  const first = admitted(g.admit(10 * MIB, "whole")); // 40
  const second = admitted(g.admit(10 * MIB, "whole")); // 80 ≤ min(100, 300)
  room = 82 * MIB; // the ring filled up
  expect(g.limit()).toBe(82 * MIB);
  expect(g.admit(1 * MIB, "whole")).toEqual({ why: "budget", costBytes: 4 * MIB, chargedBytes: 80 * MIB, limitBytes: 82 * MIB });
  room = 84 * MIB;
  const third = admitted(g.admit(1 * MIB, "whole"));
  for (const ticket of [first, second, third]) g.leave(ticket);
  room = -50 * MIB; // the ring is past the bound: still one request at a time
  const alone = admitted(g.admit(1 * MIB, "whole"));
  expect(g.admit(1, "whole")).toMatchObject({ why: "budget" });
  g.leave(alone);
  expect(g.bytes).toBe(0);
});

test("recharge: raised when the size is known, refused when that does not fit beside the others (the old charge stays until it leaves); alone it always fits; lowered always fits", () => {
  let room = 100 * MIB;
  const { gate: g } = gate({ room: () => room });
  const other = admitted(g.admit(10 * MIB, "whole")); // 40
  const ticket = admitted(g.admit(1 * MIB, "whole")); // 4: a compressed body, as sent
  expect(g.recharge(ticket, 10 * MIB, "whole")).toBeUndefined(); // inflated: 40, 80 in all
  expect([ticket.cost, g.bytes]).toEqual([40 * MIB, 80 * MIB]);
  expect(g.recharge(ticket, 20 * MIB, "whole")).toEqual({ why: "budget", costBytes: 80 * MIB, chargedBytes: 40 * MIB, limitBytes: 100 * MIB });
  expect([ticket.cost, g.bytes]).toEqual([40 * MIB, 80 * MIB]);
  room = 10 * MIB; // the ring filled up meanwhile: a smaller charge is still taken
  expect(g.recharge(ticket, 20 * MIB, "sliced")).toBeUndefined(); // a JSON array after all: 20 × 2 = 40, no more than before
  expect(g.recharge(ticket, 8 * MIB, "sliced")).toBeUndefined(); // 16
  expect(g.bytes).toBe(56 * MIB);
  g.leave(other);
  expect(g.recharge(ticket, 100 * MIB, "whole")).toBeUndefined(); // alone in the gate: the one an empty gate admits
  expect(g.bytes).toBe(400 * MIB);
  g.leave(ticket);
  expect([g.bytes, g.size]).toEqual([0, 0]);
});

test("lanes: as many big requests decode at once as there are lanes; the next waits, first come first served, and gets a lane as one leaves", async () => {
  const { gate: g, clock } = gate({ budgetBytes: 1024 * MIB, lanes: 2 });
  const tickets = [0, 1, 2, 3].map(() => admitted(g.admit(16 * MIB, "sliced")));
  const answers: (Refusal | undefined | "waiting")[] = ["waiting", "waiting", "waiting", "waiting"];
  tickets.forEach((ticket, i) => g.lane(ticket).then((answer) => (answers[i] = answer)));
  await settled();
  expect(answers).toEqual([undefined, undefined, "waiting", "waiting"]);
  expect(g.waitingForLane).toBe(2);
  clock.advance(LANE_WAIT_MS - 1);
  g.leave(tickets[1]!); // its lane goes to the first waiting
  await settled();
  expect(answers).toEqual([undefined, undefined, undefined, "waiting"]);
  expect(tickets[2]!.laned).toBe(true);
  expect(clock.pending).toBe(1); // the served waiter's timer is stopped
  g.leave(tickets[0]!);
  g.leave(tickets[2]!);
  await settled();
  expect(answers[3]).toBeUndefined();
  g.leave(tickets[3]!);
  // Every lane is free again: the next two get one at once.
  const next = [admitted(g.admit(16 * MIB, "sliced")), admitted(g.admit(16 * MIB, "sliced"))];
  expect(await Promise.all(next.map((ticket) => g.lane(ticket)))).toEqual([undefined, undefined]);
  expect([g.size, g.waitingForLane]).toEqual([2, 0]);
});

test("lanes: a wait is bounded: past laneWaitMs the request is refused (why: lane), keeps its charge until it leaves, and takes no lane", async () => {
  const { gate: g, clock } = gate({ budgetBytes: 1024 * MIB, lanes: 1, laneWaitMs: 300 });
  const decoding = admitted(g.admit(16 * MIB, "sliced"));
  expect(await g.lane(decoding)).toBeUndefined();
  const lateTicket = admitted(g.admit(16 * MIB, "sliced"));
  const late = { answer: "waiting" as Refusal | undefined | "waiting" };
  g.lane(lateTicket).then((a) => (late.answer = a));
  clock.advance(299);
  await settled();
  expect(late.answer).toBe("waiting");
  clock.advance(1);
  await settled();
  expect(late.answer).toEqual({ why: "lane", costBytes: 32 * MIB, chargedBytes: 32 * MIB, limitBytes: 1024 * MIB });
  expect([g.waitingForLane, g.bytes, lateTicket.laned]).toEqual([0, 64 * MIB, false]);
  g.leave(lateTicket);
  g.leave(lateTicket); // twice: nothing more
  expect(g.bytes).toBe(32 * MIB);
  g.leave(decoding);
  expect([g.bytes, g.size]).toEqual([0, 0]);
  // The lane the refused one never held is free once, not twice.
  const a = admitted(g.admit(1 * MIB, "sliced"));
  const b = admitted(g.admit(1 * MIB, "sliced"));
  expect(await g.lane(a)).toBeUndefined();
  const second = { answer: "waiting" as Refusal | undefined | "waiting" };
  g.lane(b).then((x) => (second.answer = x));
  await settled();
  expect(second.answer).toBe("waiting");
  g.leave(a);
  await settled();
  expect(second.answer).toBeUndefined();
  g.leave(b);
});

/** A seeded generator (mulberry32): the same run every time. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test.each([1, 2, 3, 4, 5, 6, 7, 8])("model, seed %d: random admissions, recharges, lane waits, leaves and clock moves keep the counts true", async (seed) => {
  const next = random(seed);
  const lanes = 1 + Math.floor(next() * 3);
  let room = 200 * MIB;
  const { gate: g, clock } = gate({ budgetBytes: 150 * MIB, lanes, laneWaitMs: 100, room: () => room });
  const inside = new Set<Ticket>(); // admitted, not left
  const waiting = new Map<Ticket, Refusal | undefined | "waiting">();
  for (let step = 0; step < 400; step++) {
    const action = next();
    if (action < 0.3) {
      const bytes = Math.floor(next() * 40 * MIB);
      const wasEmpty = inside.size === 0;
      const answer = g.admit(bytes, SHAPES[Math.floor(next() * SHAPES.length)]!);
      if (wasEmpty) expect(answer).toBeInstanceOf(Ticket); // the one exemption
      if (answer instanceof Ticket) inside.add(answer);
      else expect(answer.chargedBytes + answer.costBytes).toBeGreaterThan(answer.limitBytes);
    } else if (action < 0.4 && inside.size > 0) {
      const ticket = [...inside][Math.floor(next() * inside.size)]!;
      const before = ticket.cost;
      const refusal = g.recharge(ticket, Math.floor(next() * 40 * MIB), SHAPES[Math.floor(next() * SHAPES.length)]!);
      if (refusal) expect(ticket.cost).toBe(before);
    } else if (action < 0.6 && inside.size > 0) {
      const ticket = [...inside].find((t) => !t.laned && !waiting.has(t));
      if (ticket) {
        waiting.set(ticket, "waiting");
        g.lane(ticket).then((answer) => waiting.set(ticket, answer));
      }
    } else if (action < 0.85 && inside.size > 0) {
      // Only a request not waiting leaves (one that waits is awaiting its answer).
      const ticket = [...inside].find((t) => waiting.get(t) !== "waiting");
      if (ticket) {
        g.leave(ticket);
        inside.delete(ticket);
        waiting.delete(ticket);
      }
    } else if (action < 0.95) {
      clock.advance(Math.floor(next() * 60));
    } else {
      room = Math.floor(next() * 300 * MIB) - 50 * MIB;
    }
    await settled();
    const tickets = [...inside];
    expect(g.bytes).toBe(tickets.reduce((sum, t) => sum + t.cost, 0));
    expect(g.size).toBe(inside.size);
    const laned = tickets.filter((t) => t.laned).length;
    expect(laned).toBeLessThanOrEqual(lanes);
    const stillWaiting = [...waiting.values()].filter((a) => a === "waiting").length;
    expect(g.waitingForLane).toBe(stillWaiting);
    if (stillWaiting > 0) expect(laned).toBe(lanes); // nobody waits beside a free lane
    for (const [ticket, answer] of waiting) if (answer === undefined) expect(ticket.laned).toBe(true);
  }
  for (const ticket of inside) if (waiting.get(ticket) === "waiting") clock.advance(100);
  await settled();
  for (const ticket of inside) g.leave(ticket);
  expect([g.bytes, g.size, g.waitingForLane]).toEqual([0, 0, 0]);
});
