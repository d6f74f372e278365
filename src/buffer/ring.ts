// The in-memory buffer between acceptance and COPY: a FIFO ring of chunks (one accepted request's
// COPY tuples each, store/tuples.ts), bounded by events and bytes. Taken chunks still count against the bounds until
// the flusher releases them after commit, so memory stays bounded while PostgreSQL is away.
// O(1) per push and per taken chunk. No I/O, no timers, nothing of HTTP or SQL.
// Small requests' rows are appended into one open chunk (the tail) instead of one chunk each; it is
// sealed, as an exact-size copy, when taken, when a chunk is pushed behind it, or when it is full.

/** Binary COPY tuples (store/tuples.ts), off the JavaScript heap. */
export type Rows = Uint8Array;

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
  /** An open chunk is sealed at this many events (the flusher's batch size); default: no cap. */
  chunkMaxEvents?: number;
}

/**
 * One chunk per request cost single-event JSON a Buffer per request and the flusher a prefix pass,
 * a view and a COPY part per event (profile of json-1 under wrk -c64: Buffer.from 0.6 µs, the
 * flusher's per-chunk work 5-8% of the process); so rows up to this many bytes are copied into a
 * reused slab and become one chunk per slab-full or take. Bigger rows gain nothing from it: with
 * 64K here, json-100's 20 KB rows paid the seal's copy (470 of 12,004 samples) for per-chunk work
 * that 100 events per chunk already amortise.
 */
const COALESCE_MAX_BYTES = 4 * 1024;
const SLAB_BYTES = 1024 * 1024;
const EMPTY = new Uint8Array(0);

type Open = { -readonly [K in keyof Chunk]: Chunk[K] };

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

  /** The tail chunk while small rows are appended to it; its rows are slab[0, openBytes). */
  private open: Open | undefined;
  private slab: Buffer | undefined;

  constructor(private readonly limits: RingLimits) {}

  /** Whether a chunk of this size fits now. */
  fits(events: number, bytes: number): boolean {
    return this.heldEvents + events <= this.limits.maxEvents && this.heldBytes + bytes <= this.limits.maxBytes;
  }

  /**
   * Whether rows of about `bytes` (a request's size, before it is decoded) would fit now. A size
   * past what the ring ever holds passes: the encoder's count decides (413 if it never fits).
   */
  roomFor(bytes: number): boolean {
    return this.heldEvents < this.limits.maxEvents && (bytes > this.limits.maxBytes || this.heldBytes + bytes <= this.limits.maxBytes);
  }

  /** Appends a chunk if it fits; false means "full, try later". */
  push(chunk: Chunk): boolean {
    if (!this.fits(chunk.events, chunk.bytes)) return false;
    this.seal(); // FIFO: nothing may be added to a chunk that has one behind it
    this.place(chunk);
    this.count(chunk.events, chunk.bytes);
    return true;
  }

  /**
   * One request's rows, all or nothing, copied (the caller may reuse its buffer): small ones into
   * the open chunk (one sequence number per call, as push), others into a chunk of their own.
   * False means "full, try later".
   */
  append(rows: Rows, events: number): boolean {
    const bytes = rows.length;
    if (bytes > COALESCE_MAX_BYTES) {
      if (!this.fits(events, bytes)) return false;
      // allocUnsafe: every byte is written here (a zeroed array cost as much again in page faults).
      const own = Buffer.allocUnsafe(bytes);
      own.set(rows);
      return this.push({ rows: own, events, bytes, seq: 0 });
    }
    if (!this.fits(events, bytes)) return false;
    const slab = (this.slab ??= Buffer.allocUnsafe(SLAB_BYTES));
    let at = this.open ? this.open.bytes : 0;
    if (bytes > SLAB_BYTES - at) {
      this.seal();
      at = 0;
    }
    slab.set(rows, at);
    let open = this.open;
    if (open === undefined) {
      open = this.open = { rows: EMPTY, events: 0, bytes: 0, seq: 0 };
      this.place(open);
    } else {
      this.nextSeq++;
    }
    open.events += events;
    open.bytes += bytes;
    this.count(events, bytes);
    if (open.events >= (this.limits.chunkMaxEvents ?? Infinity)) this.seal();
    return true;
  }

  private place(chunk: Chunk): void {
    if (this.length === this.slots.length) this.grow();
    chunk.seq = this.nextSeq++;
    this.slots[(this.head + this.length) % this.slots.length] = chunk;
    this.length++;
  }

  private count(events: number, bytes: number): void {
    this.pendingEvents += events;
    this.pendingBytes += bytes;
    this.heldEvents += events;
    this.heldBytes += bytes;
  }

  /** The open chunk gets its rows as an exact-size copy (memory held = bytes counted); the slab is reused. */
  private seal(): void {
    const open = this.open;
    if (open === undefined) return;
    // allocUnsafe: every byte is written here (a zeroed array cost as much again in page faults).
    const rows = Buffer.allocUnsafe(open.bytes);
    this.slab!.copy(rows, 0, 0, open.bytes);
    open.rows = rows;
    this.open = undefined;
  }

  /** Takes the oldest chunks, at least one and no more than `maxEvents` events unless one chunk alone is bigger. */
  take(maxEvents: number): Chunk[] {
    const taken: Chunk[] = [];
    let events = 0;
    while (this.length > 0) {
      const chunk = this.slots[this.head]!;
      if (chunk === this.open) this.seal();
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
