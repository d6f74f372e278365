// The in-memory buffer between acceptance and COPY: a FIFO ring of chunks (one accepted request's
// COPY tuples each, codec/tuples.ts), bounded by events and bytes. Taken chunks still count against the bounds until
// the flusher releases them after commit, so memory stays bounded while PostgreSQL is away.
// O(1) per push and per taken chunk. No I/O, no timers, nothing of HTTP or SQL.
// Appended rows are copied into slabs of shared memory (SharedArrayBuffer) that are reused once
// every chunk in them is released: the flush thread reads them without a copy, and a slab written
// again costs no page faults. Small requests' rows share one open chunk (the tail) instead of one
// chunk each; it is sealed when taken, when a chunk is placed behind it, or when it is full.
// A chunk's rows must not be read after it is released: its slab may be written again.
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { ringMaxBytes } from "../memory/costs";

/** Binary COPY tuples (codec/tuples.ts), off the JavaScript heap. */
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
  /** Set by the ring: the slab its rows lie in, given back when the last of its chunks is released. */
  slab?: Slab;
  /** Set by the ring: its rows are a buffer of the ring's own, freed when it is released. */
  owned?: boolean;
}

/** A block of shared memory appended rows are written into, front to back. */
export interface Slab {
  readonly bytes: Uint8Array;
  used: number;
  /** Chunks with rows in it (the open one included) not yet released. */
  live: number;
}

export interface RingLimits {
  maxEvents: number;
  maxBytes: number;
  /** An open chunk is sealed at this many events (the flusher's batch size); default: no cap. */
  chunkMaxEvents?: number;
}

/** The service's ring: BUFFER_MAX_EVENTS, BUFFER_MAX_BYTES at what rows cost, chunks of a batch at most. */
export function openRing(config: Config, metrics: Registry): Ring {
  const ring = new Ring({ maxEvents: config.bufferMaxEvents, maxBytes: ringMaxBytes(config.bufferMaxBytes), chunkMaxEvents: config.flushMaxEvents });
  metrics.gauge("logpond_buffer_events", "Events held in memory (waiting or being written).", () => ring.heldEvents);
  metrics.gauge("logpond_buffer_bytes", "Approximate bytes held in memory.", () => ring.heldBytes);
  return ring;
}

/**
 * One chunk per request cost single-event JSON a Buffer per request and the flusher a prefix pass,
 * a view and a COPY part per event (profile of json-1 under wrk -c64: Buffer.from 0.6 µs, the
 * flusher's per-chunk work 5-8% of the process); so rows up to this many bytes share the open
 * chunk. Bigger rows gain nothing from sharing: 100 events per chunk already amortise that work.
 */
const COALESCE_MAX_BYTES = 4 * 1024;
/**
 * Slabs: fresh memory costs ~11 µs a page on first touch, 50× memory written before
 * (docs/memory.md), and a buffer per chunk would pay it for every row (1000-event @logtail/node
 * bodies: the ring's copy 14% of the main thread's samples, the flush thread's copy as much again). Rows over SLAB_OWN_FROM_BYTES get a
 * buffer of their own. Free slabs are kept for reuse; each SHED_EVERY_MS, the free ones not needed
 * in that time are let go, down to SLABS_KEPT.
 */
const SLAB_BYTES = 4 * 1024 * 1024;
/** Copies of a taken chunk in a buffer of its own while it is written (chargedBytes). */
const FLUSH_COPIES = 2;
const SLAB_OWN_FROM_BYTES = 1024 * 1024;
const SLABS_KEPT = 8;
const SHED_EVERY_MS = 60_000;
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
  /** Taken, not yet released, in buffers of their own: the flush thread holds copies of these. */
  private takenOwnBytes = 0;

  /** The tail chunk while small rows are appended to it; its rows start at openAt in the slab. */
  private open: Open | undefined;
  private openAt = 0;
  /** The slab rows are appended to; free ones wait in `spare`. */
  private slab: Slab | undefined;
  private readonly spare: Slab[] = [];
  /** The fewest free slabs since the last shed: that many were not needed. */
  private spareLow = Infinity;
  private lastShed = 0;
  /** Slabs not spare (the current one and those still holding chunks), and the held rows in them. */
  private slabsOut = 0;
  private slabRowBytes = 0;

  constructor(private readonly limits: RingLimits) {}

  /** The most bytes of rows it holds (a request whose rows are more can never fit: 413). */
  get maxBytes(): number {
    return this.limits.maxBytes;
  }

  /**
   * What the limit bounds: the rows held, and the copies of them being written. A taken chunk in a
   * slab is read by the flush thread where it lies; one in a buffer of its own is copied to it, and
   * postgres.js copies it again into a CopyData message (store/flush-thread.ts, store/copy.ts): 16
   * MB bodies (bench/rss.ts json-big) had two such chunks in flight, 64 MiB beside the ring.
   */
  get chargedBytes(): number {
    return this.heldBytes + FLUSH_COPIES * this.takenOwnBytes;
  }

  /** Whether a chunk of this size fits now. */
  fits(events: number, bytes: number): boolean {
    return this.heldEvents + events <= this.limits.maxEvents && this.chargedBytes + bytes <= this.limits.maxBytes;
  }

  /**
   * Whether rows of about `bytes` (a request's size, before it is decoded) would fit now. A size
   * past what the ring ever holds passes: the encoder's count decides (413 if it never fits).
   */
  roomFor(bytes: number): boolean {
    return this.heldEvents < this.limits.maxEvents && (bytes > this.limits.maxBytes || this.chargedBytes + bytes <= this.limits.maxBytes);
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
   * One request's rows, all or nothing, copied into a slab (the caller may reuse its buffer): small
   * ones into the open chunk (one sequence number per call, as push), others into a chunk of their
   * own. False means "full, try later".
   */
  append(rows: Rows, events: number): boolean {
    const bytes = rows.length;
    if (!this.fits(events, bytes)) return false;
    if (bytes > SLAB_OWN_FROM_BYTES) {
      // allocUnsafe: every byte is written here (a zeroed array cost as much again in page faults).
      const own = Buffer.allocUnsafe(bytes);
      own.set(rows);
      return this.push({ rows: own, events, bytes, seq: 0, owned: true });
    }
    let slab = this.slab;
    if (slab === undefined || bytes > SLAB_BYTES - slab.used) slab = this.nextSlab();
    const at = slab.used;
    slab.bytes.set(rows, at);
    slab.used += bytes;
    this.slabRowBytes += bytes;
    if (bytes > COALESCE_MAX_BYTES) {
      this.seal(); // FIFO: nothing may be added to a chunk that has one behind it
      slab.live++;
      this.place({ rows: slab.bytes.subarray(at, at + bytes), events, bytes, seq: 0, slab });
      this.count(events, bytes);
      return true;
    }
    let open = this.open;
    if (open === undefined) {
      open = this.open = { rows: EMPTY, events: 0, bytes: 0, seq: 0, slab };
      this.openAt = at;
      slab.live++;
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

  /**
   * As append, for rows the caller gives up (a decode thread's, at the start of a buffer of their
   * own): big ones are kept as they are instead of copied into a buffer of the ring's, which held
   * a big body's rows twice for a moment (another 16 MiB for a 16 MB body).
   */
  adopt(rows: Rows, events: number): boolean {
    if (rows.length <= SLAB_OWN_FROM_BYTES || rows.byteOffset !== 0 || !(rows.buffer instanceof ArrayBuffer)) return this.append(rows, events);
    return this.push({ rows, events, bytes: rows.length, seq: 0, owned: true });
  }

  /** A slab with room: the open chunk is sealed first (its rows end in the current slab). */
  private nextSlab(): Slab {
    this.seal();
    const full = this.slab;
    this.slab = this.spare.pop() ?? { bytes: new Uint8Array(new SharedArrayBuffer(SLAB_BYTES)), used: 0, live: 0 };
    this.slabsOut++;
    if (this.spare.length < this.spareLow) this.spareLow = this.spare.length;
    if (full && full.live === 0) this.recycle(full);
    return this.slab;
  }

  private recycle(slab: Slab): void {
    slab.used = 0;
    this.slabsOut--;
    this.spare.push(slab);
  }

  /** Memory in free slabs, not counted in heldBytes. */
  get spareBytes(): number {
    return this.spare.length * SLAB_BYTES;
  }

  /**
   * What the ring holds in memory: whole slabs (spare ones, and those in use with the space a row
   * that did not fit left at their end), and the rows in buffers of their own.
   */
  get memoryBytes(): number {
    return (this.slabsOut + this.spare.length) * SLAB_BYTES + this.chargedBytes - this.slabRowBytes;
  }

  /** Called now and then (the flusher's timer): lets go of the free slabs not needed since the last call that shed. */
  shed(now: number): void {
    if (now - this.lastShed < SHED_EVERY_MS) return;
    this.lastShed = now;
    this.spare.length -= Math.max(0, Math.min(this.spareLow, this.spare.length) - SLABS_KEPT);
    this.spareLow = this.spare.length;
  }

  /** A chunk in a slab is let go; the current slab, once empty, is written from its start again. */
  private unref(chunk: Chunk): void {
    const slab = chunk.slab!;
    this.slabRowBytes -= chunk.bytes;
    if (--slab.live > 0) return;
    if (slab === this.slab) slab.used = 0;
    else this.recycle(slab);
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

  /** The open chunk gets its rows: the part of the slab written since it was opened. */
  private seal(): void {
    const open = this.open;
    if (open === undefined) return;
    open.rows = open.slab!.bytes.subarray(this.openAt, this.openAt + open.bytes);
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
      if (!chunk.slab) this.takenOwnBytes += chunk.bytes;
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
    this.letGo(chunk);
    return true;
  }

  /** Taken chunks are stored (or given up): their space is free again. */
  release(chunks: readonly Chunk[]): void {
    for (const chunk of chunks) {
      this.heldEvents -= chunk.events;
      this.heldBytes -= chunk.bytes;
      if (chunk.taken && !chunk.slab) this.takenOwnBytes -= chunk.bytes;
      this.letGo(chunk);
    }
  }

  /**
   * A released chunk's memory: its slab's share, or its own buffer freed now rather than when the
   * collector finds it (a big body's rows were garbage the main thread's quick collections left
   * to full ones, 16 MiB each for json-big's bodies).
   */
  private letGo(chunk: Chunk): void {
    if (chunk.slab) this.unref(chunk);
    else if (chunk.owned && chunk.rows.byteOffset === 0) (chunk.rows.buffer as ArrayBuffer).transfer(0);
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
