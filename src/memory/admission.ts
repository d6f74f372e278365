// One request's admission (ingest/accept.ts makes one per request): every charge, recharge, wait
// for a decode lane, pacing of the collector and early free of the ingest path, in the order the
// request meets them. It answers from counts (the gate's charges and lanes, gate.ts; the ring's
// room), never from the heap, and says no as a value: 503 `overloaded` (the gate) or `buffer_full`
// (the ring). The steps, each called at most once and in this order, then release() whatever
// happened: announced (Content-Length) → received (the body as sent) → inflating (a gzip trailer's
// size) → inflated → decoding (the body as the codec reads it) → charged (its size and shape) →
// lane (big bodies) → encoded (its rows). The numbers: costs.ts; why each step sits where it
// does, with its measurements: docs/memory.md, "One request's admission".
import type { Ring } from "../buffer/ring";
import type { Format } from "../codec/format";
import { AppError } from "../errors";
import { freeNow } from "./buffers";
import { BIG_BODY_BYTES } from "./costs";
import { type Gate, type Shape, Ticket } from "./gate";
import type { GcPacer } from "./gcpace";

/** What every request's admission answers by: one of each per process (memory/budget.ts). */
export interface AdmissionDeps {
  ring: Ring;
  gate: Gate;
  gcPacer: GcPacer;
}

/** A body of this size (decompressed, or as sent until known) is decoded on a decode thread, in a lane. */
export function isBig(bytes: number): boolean {
  return bytes >= BIG_BODY_BYTES;
}

export class Admission {
  private ticket: Ticket | undefined;
  /** The body's size as the codec reads it, once known (decoding()). */
  private bytes = 0;

  constructor(private readonly deps: AdmissionDeps) {}

  /**
   * Before the body is read, by its Content-Length (`sliced`: whether a body this size may decode
   * in slices): a body costs memory from its first byte. Refused, it still arrives, into memory Bun
   * frees with its Request: the collector is paced by it too.
   */
  announced(bytes: number, format: Format | undefined, sliced: boolean): AppError | undefined {
    const admitted = this.deps.gate.admit(bytes, shapeOf(sliced, format, bytes));
    if (admitted instanceof Ticket) {
      this.ticket = admitted;
      return undefined;
    }
    this.deps.gcPacer.handled(bytes);
    return overloaded();
  }

  /** The body as sent is read: compressed, it is garbage once inflated (or refused). */
  received(bytes: number, compressed: boolean): void {
    if (compressed) this.deps.gcPacer.handled(bytes);
  }

  /**
   * A gzip trailer states what the body inflates to: a full ring refuses it before inflating, and
   * so does the gate when that does not fit. A wrong size only moves the refusal to after inflating
   * (or refuses the liar's own request).
   */
  inflating(bytes: number, rawBytes: number, format: Format | undefined, sliced: boolean): AppError | undefined {
    if (!this.deps.ring.roomFor(bytes)) return bufferFull();
    if (this.ticket === undefined || bytes <= rawBytes) return undefined;
    return this.deps.gate.recharge(this.ticket, bytes, shapeOf(sliced, format, bytes)) ? overloaded() : undefined;
  }

  /** Inflated: a big body's bytes as sent are read no more. */
  inflated(raw: Uint8Array, body: Uint8Array): void {
    if (body !== raw && isBig(body.length)) freeNow(raw);
  }

  /**
   * The body as the codec reads it: its garbage paced, and refused before it is decoded, not after,
   * when the ring has no room for it.
   */
  decoding(bytes: number): AppError | undefined {
    this.bytes = bytes;
    this.deps.gcPacer.handled(bytes);
    return this.deps.ring.roomFor(bytes) ? undefined : bufferFull();
  }

  /** Charged by its size and the shape it decodes in (`sliced`): admitted now if it was not yet, else recharged. */
  charged(format: Format, sliced: boolean): AppError | undefined {
    const shape = shapeOf(sliced, format, this.bytes);
    if (this.ticket !== undefined) return this.deps.gate.recharge(this.ticket, this.bytes, shape) ? overloaded() : undefined;
    const admitted = this.deps.gate.admit(this.bytes, shape);
    if (!(admitted instanceof Ticket)) return overloaded();
    this.ticket = admitted;
    return undefined;
  }

  /** Whether the body is big: decoded on a decode thread once it holds a lane. */
  get big(): boolean {
    return isBig(this.bytes);
  }

  /**
   * A big body decodes in one of the gate's lanes, waiting its turn for a bounded time. Meanwhile
   * the ring may have filled or the client given up: its events would be stored with no one told
   * (a client that retries sends them twice), and the decoding wasted.
   */
  async lane(signal: AbortSignal): Promise<AppError | undefined> {
    if (this.ticket === undefined || (await this.deps.gate.lane(this.ticket))) return overloaded();
    if (signal.aborted) return overloaded();
    return this.deps.ring.roomFor(this.bytes) ? undefined : bufferFull();
  }

  /** The rows are made: their garbage too (compact bodies, MessagePack records, make far more than their size). */
  encoded(rowBytes: number): void {
    this.deps.gcPacer.handled(rowBytes);
  }

  /** Buffered or refused: the charge and the lane are free. Again changes nothing. */
  release(): void {
    if (this.ticket === undefined) return;
    this.deps.gate.leave(this.ticket);
    this.ticket = undefined;
  }
}

/** How the gate charges a body: in slices, whole, or big, whole and MessagePack (denser than its objects). */
function shapeOf(sliced: boolean, format: Format | undefined, bytes: number): Shape {
  return sliced ? "sliced" : format === "msgpack" && isBig(bytes) ? "packed" : "whole";
}

export function overloaded(): AppError {
  return new AppError(
    "overloaded",
    "Too many large requests are being decoded at once (INGEST_INFLIGHT_MAX_BYTES, or what the buffer, and for a big request the process's memory, leave of BUFFER_MAX_BYTES + 200 MiB); retry after the time in Retry-After",
  );
}

export function bufferFull(): AppError {
  return new AppError("buffer_full", "Ingestion buffer is full (BUFFER_MAX_EVENTS / BUFFER_MAX_BYTES); retry after a moment");
}
