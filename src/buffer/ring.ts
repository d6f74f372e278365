// The in-memory buffer between acceptance and COPY: a FIFO ring of chunks (one accepted request's
// COPY rows each), bounded by events and bytes. Taken chunks still count against the bounds until
// the flusher releases them after commit, so memory stays bounded while PostgreSQL is away.
// O(1) per push and per taken chunk. No I/O, no timers, nothing of HTTP or SQL.

/** COPY text lines, each ending in "\n": UTF-8 bytes off the JavaScript heap (a string in tests). */
export type Rows = Uint8Array | string;

export interface Chunk {
  readonly rows: Rows;
  readonly events: number;
  /** Memory it holds: the byte length of `rows`. */
  readonly bytes: number;
  /** Ordinal given at push; the flusher reports progress by it. */
  seq: number;
  /** Durable mode: called once the flush holding this chunk committed, or (with an error) dropped it. */
  readonly settle?: (error?: Error) => void;
  /** Durable mode: its request stopped waiting; the chunk must not be stored from now on. */
  abandoned?: boolean;
  /** Set by the ring: taken by the flusher (no longer removable from here). */
  taken?: boolean;
}

export interface RingLimits {
  maxEvents: number;
  maxBytes: number;
}

export class Ring {
  private slots: (Chunk | undefined)[] = new Array(1024);
  private head = 0;
  private length = 0;
  private nextSeq = 1;
  /** Waiting to be taken. */
  pendingEvents = 0;
  pendingBytes = 0;
  /** Waiting, or taken and not yet released. */
  heldEvents = 0;
  heldBytes = 0;

  constructor(private readonly limits: RingLimits) {}

  /** Whether a chunk of this size fits now. */
  fits(events: number, bytes: number): boolean {
    return this.heldEvents + events <= this.limits.maxEvents && this.heldBytes + bytes <= this.limits.maxBytes;
  }

  /** Appends a chunk if it fits; false means "full, try later". */
  push(chunk: Chunk): boolean {
    if (!this.fits(chunk.events, chunk.bytes)) return false;
    if (this.length === this.slots.length) this.grow();
    chunk.seq = this.nextSeq++;
    this.slots[(this.head + this.length) % this.slots.length] = chunk;
    this.length++;
    this.pendingEvents += chunk.events;
    this.pendingBytes += chunk.bytes;
    this.heldEvents += chunk.events;
    this.heldBytes += chunk.bytes;
    return true;
  }

  /** Takes the oldest chunks, at least one and no more than `maxEvents` events unless one chunk alone is bigger. */
  take(maxEvents: number): Chunk[] {
    const taken: Chunk[] = [];
    let events = 0;
    while (this.length > 0) {
      const chunk = this.slots[this.head]!;
      if (!chunk.abandoned && taken.length > 0 && events + chunk.events > maxEvents) break;
      this.slots[this.head] = undefined;
      this.head = (this.head + 1) % this.slots.length;
      this.length--;
      if (chunk.abandoned) continue; // already uncounted by abandon()
      this.pendingEvents -= chunk.events;
      this.pendingBytes -= chunk.bytes;
      chunk.taken = true;
      events += chunk.events;
      taken.push(chunk);
    }
    return taken;
  }

  /**
   * Durable mode, a request gave up: its chunk, if not taken yet, stops counting at once and is
   * skipped by take(); true then. A taken chunk is the flusher's to drop (false).
   */
  abandon(chunk: Chunk): boolean {
    chunk.abandoned = true;
    if (chunk.taken) return false;
    this.pendingEvents -= chunk.events;
    this.pendingBytes -= chunk.bytes;
    this.heldEvents -= chunk.events;
    this.heldBytes -= chunk.bytes;
    return true;
  }

  /** Taken chunks are stored (or given up): their space is free again. */
  release(chunks: readonly Chunk[]): void {
    for (const chunk of chunks) {
      this.heldEvents -= chunk.events;
      this.heldBytes -= chunk.bytes;
    }
  }

  /** Sequence number of the oldest chunk not yet taken (the next one to be pushed when empty). */
  get oldestPendingSeq(): number {
    for (let i = 0; i < this.length; i++) {
      const chunk = this.slots[(this.head + i) % this.slots.length]!;
      if (!chunk.abandoned) return chunk.seq;
    }
    return this.nextSeq;
  }

  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  private grow(): void {
    const bigger: (Chunk | undefined)[] = new Array(this.slots.length * 2);
    for (let i = 0; i < this.length; i++) bigger[i] = this.slots[(this.head + i) % this.slots.length];
    this.slots = bigger;
    this.head = 0;
  }
}
