// The admission gate for memory (docs/memory.md, "Why a request gets a 503"): the one place that says whether a request may
// go on, and if not, why. It decides from counts alone (bytes charged, requests, decode lanes, and
// the room the caller's budget gives, memory/budget.ts: the ring's own counts), never from a
// reading of the heap or the RSS, so the same calls always get the same answers.
//
// - Bytes: a request is charged what it may cost (its Content-Length before the body is read, its
//   decompressed size once known, times what decoding it costs: cost()) until it is buffered or
//   refused. The charges stay within min(INGEST_INFLIGHT_MAX_BYTES, room()).
// - The big lane: a big request (decoded on a decode thread) decodes only in one of `lanes` places,
//   as many as the threads; the others wait their turn, first come first served, at most
//   `laneWaitMs`, then are refused (VictoriaMetrics' write-concurrency limiter).
// - Small requests (under BIG_BODY_BYTES) keep a share of the budget big ones cannot take
//   (SMALL_RESERVE_BYTES, at most a quarter): a few big uploads do not turn every client's small
//   batch away (test/reliability/hostile-load.test.ts).
// - One exemption: an empty gate admits one request whatever it costs (Vector's limited queue), so
//   a request bigger than the budget, or one that comes while the ring is full, is never refused
//   forever. Nothing else is exempt.
import { type Clock, realClock } from "../timers";
import { BIG_BODY_BYTES, COST_FACTOR, LANE_WAIT_MS, PACKED_COST_FACTOR, SLICED_COST_FACTOR, SMALL_RESERVE_BYTES } from "./costs";

/** How a request's bytes cost memory: decoded in slices, whole, or whole from MessagePack. */
export type Shape = "sliced" | "whole" | "packed";

/** Why a request may not go on: the bytes it would be charged do not fit, or no lane freed in time. */
export type Why = "budget" | "lane";

export interface Refusal {
  readonly why: Why;
  /** What the request would have been charged. */
  readonly costBytes: number;
  /** What the others were charged, and the most all may be charged now. */
  readonly chargedBytes: number;
  readonly limitBytes: number;
}

/** One request's place in the gate, from admit() to leave(). */
export class Ticket {
  /** Charged now. */
  cost = 0;
  /** Charged as a small request (under BIG_BODY_BYTES). */
  small = true;
  /** Holds a lane (a big request decoding). */
  laned = false;
  /** Left the gate: leave() again changes nothing. */
  left = false;
}

export interface GateOptions {
  /** INGEST_INFLIGHT_MAX_BYTES. */
  budgetBytes: number;
  /** What the requests may hold together now beside everything else (memory/budget.ts); default: no bound. */
  room?: () => number;
  /** Big requests decoding at once: the decode threads. */
  lanes?: number;
  /** How long a big request waits for a lane before it is refused. */
  laneWaitMs?: number;
  /** The share only small requests may use; default SMALL_RESERVE_BYTES (at most a quarter of the limit either way). */
  smallReserveBytes?: number;
  clock?: Clock;
}

/** Waiting for a lane: how it is told, and what stops its timer. */
interface Waiter {
  ticket: Ticket;
  resolve(refusal: Refusal | undefined): void;
  cancel(): void;
}

export class Gate {
  private used = 0;
  /** Of `used`, what big requests are charged. */
  private usedBig = 0;
  private requests = 0;
  private laned = 0;
  private readonly waiting: Waiter[] = [];
  private readonly budgetBytes: number;
  private readonly room: () => number;
  private readonly lanes: number;
  private readonly laneWaitMs: number;
  private readonly smallReserveBytes: number;
  private readonly clock: Clock;

  constructor(options: GateOptions) {
    this.budgetBytes = options.budgetBytes;
    this.room = options.room ?? (() => Infinity);
    this.lanes = Math.max(1, options.lanes ?? 1);
    this.laneWaitMs = options.laneWaitMs ?? LANE_WAIT_MS;
    this.smallReserveBytes = options.smallReserveBytes ?? SMALL_RESERVE_BYTES;
    this.clock = options.clock ?? realClock;
  }

  /**
   * What a request of `bytes` (decompressed, or as sent until that is known) is charged: its size
   * times what decoding it costs, sliced or whole (the caller knows: ingest/prepare.ts).
   */
  cost(bytes: number, shape: Shape): number {
    return bytes * (shape === "sliced" ? SLICED_COST_FACTOR : shape === "packed" ? PACKED_COST_FACTOR : COST_FACTOR);
  }

  /** A request comes in: its ticket (leave() it whatever happens next), or why not. */
  admit(bytes: number, shape: Shape): Ticket | Refusal {
    const cost = this.cost(bytes, shape);
    const small = bytes < BIG_BODY_BYTES;
    const refusal = this.judge(cost, small, this.used, this.usedBig);
    if (refusal) return refusal;
    const ticket = new Ticket();
    this.charge(ticket, cost, small);
    this.requests++;
    return ticket;
  }

  /**
   * The request's size is known better now (decompressed, or its shape): its charge becomes what
   * that costs, or, when a bigger one does not fit beside the others, it is refused (and still
   * holds its old charge until it leaves).
   */
  recharge(ticket: Ticket, bytes: number, shape: Shape): Refusal | undefined {
    const cost = this.cost(bytes, shape);
    const small = bytes < BIG_BODY_BYTES;
    const others = this.used - ticket.cost;
    const othersBig = this.usedBig - (ticket.small ? 0 : ticket.cost);
    // Alone in the gate, it is the one an empty gate admits; a charge that does not grow always fits.
    const refusal = this.requests > 1 && cost > ticket.cost ? this.judge(cost, small, others, othersBig) : undefined;
    if (refusal) return refusal;
    this.charge(ticket, cost, small);
    return undefined;
  }

  /**
   * A big request, before it is decoded: a lane now if one is free, else its turn among those
   * waiting, or after laneWaitMs a refusal.
   */
  lane(ticket: Ticket): Promise<Refusal | undefined> {
    if (this.laned < this.lanes) {
      this.laned++;
      ticket.laned = true;
      return Promise.resolve(undefined);
    }
    return new Promise((resolve) => {
      const waiter: Waiter = { ticket, resolve, cancel: () => {} };
      waiter.cancel = this.clock.after(this.laneWaitMs, () => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        resolve({ why: "lane", costBytes: ticket.cost, chargedBytes: this.used - ticket.cost, limitBytes: this.limit() });
      });
      this.waiting.push(waiter);
    });
  }

  /** The request is buffered or refused: its charge and its lane (to the first waiting) are free. */
  leave(ticket: Ticket): void {
    if (ticket.left) return;
    ticket.left = true;
    this.charge(ticket, 0, ticket.small);
    this.requests--;
    if (!ticket.laned) return;
    ticket.laned = false;
    const next = this.waiting.shift();
    if (next === undefined) {
      this.laned--;
      return;
    }
    next.cancel();
    next.ticket.laned = true;
    next.resolve(undefined);
  }

  /** Bytes charged to requests in the gate. */
  get bytes(): number {
    return this.used;
  }

  /** Requests in the gate (charged, waiting or decoding). */
  get size(): number {
    return this.requests;
  }

  /** Big requests waiting for a lane. */
  get waitingForLane(): number {
    return this.waiting.length;
  }

  /** The most the requests may be charged together now. */
  limit(): number {
    return Math.min(this.budgetBytes, this.room());
  }

  /** The ticket's charge becomes `cost`, as a small or a big request. */
  private charge(ticket: Ticket, cost: number, small: boolean): void {
    this.used += cost - ticket.cost;
    this.usedBig += (small ? 0 : cost) - (ticket.small ? 0 : ticket.cost);
    ticket.cost = cost;
    ticket.small = small;
  }

  /**
   * A big request fits within the limit less the small requests' share; a small one within the
   * whole limit, big requests counted at most up to their share (one admitted alone past it, by
   * the empty gate's exemption, does not shut small ones out).
   */
  private judge(cost: number, small: boolean, charged: number, chargedBig: number): Refusal | undefined {
    if (this.requests === 0) return undefined; // an empty gate admits one
    const whole = this.limit();
    const bigLimit = whole - Math.min(this.smallReserveBytes, Math.max(0, whole) / 4);
    const counted = small ? charged - chargedBig + Math.min(chargedBig, Math.max(0, bigLimit)) : charged;
    const limit = small ? whole : bigLimit;
    return counted + cost <= limit ? undefined : { why: "budget", costBytes: cost, chargedBytes: charged, limitBytes: limit };
  }
}
