// Every number that says what ingestion costs in memory and when a collector runs: one place, the
// why of each in a line; what each was measured with is in docs/memory.md ("Where the numbers come
// from"). Pure data, no imports, so each layer may read it (test/unit/layers.test.ts puts this
// file at the bottom): the ring and the codec's walk below memory/, the gate, the admission and
// the decode threads above it.

const MiB = 1024 * 1024;

/**
 * A body from this size (decompressed, or as sent until that is known) is big: decoded on a
 * decode thread (below it the hop costs more than it saves), in slices when its shape allows,
 * in one of the gate's lanes, and charged against the big requests' share.
 */
export const BIG_BODY_BYTES = MiB;
/**
 * Bodies from this size are walked (codec/bounds.ts) before a single object is built: smaller
 * ones decode to ~60 MB of objects at worst, and the walk would add 30–90% to their decode time.
 * Not above BIG_BODY_BYTES: a big MessagePack array is sliced at the walk's cuts.
 */
export const WALK_FROM_BYTES = BIG_BODY_BYTES;
/** A slice holds at least this many bytes of a big body: its objects are a slice's, not the body's. */
export const SLICE_BYTES = 256 * 1024;

/** Peak memory of a request decoded whole over its decompressed size: the worst shape's 3×, with a margin. */
export const COST_FACTOR = 4;
/** A request decoded in slices: its body and its rows; one slice's objects are the process reserve's. */
export const SLICED_COST_FACTOR = 2;
/** A big MessagePack body decoded whole: its objects outweigh its bytes more than JSON's do. */
export const PACKED_COST_FACTOR = 8;
/** The gate's share only small requests may use (at most a quarter): big uploads cannot turn them all away. */
export const SMALL_RESERVE_BYTES = 32 * MiB;
/** A big request's wait for a lane: the few bodies per lane the budget allows (~1 s per 100 MiB), short beside a client's timeout. */
export const LANE_WAIT_MS = 5_000;

/** A byte of COPY rows in the ring keeps 1.16× itself resident (chunks freed in FIFO order). */
export const RING_COST_FACTOR = 1.2;
/** The bytes of rows a ring may hold for its memory to stay within `bufferMaxBytes` (BUFFER_MAX_BYTES). */
export function ringMaxBytes(bufferMaxBytes: number): number {
  return Math.floor(bufferMaxBytes / RING_COST_FACTOR);
}

/** What the process may use beside a full buffer: the aim is peak RSS ≤ BUFFER_MAX_BYTES + this. */
export const HEADROOM_BYTES = 200 * MiB;
/**
 * What the process holds beside the ring and the requests, kept out of the requests' room: idle
 * ~75 MiB, the decode threads' heaps, one slice's objects per lane, the flush thread's heap,
 * garbage between two collections. All of the headroom: 150 MiB let big bodies peak higher.
 */
export const PROCESS_RESERVE_BYTES = HEADROOM_BYTES;
/** Memory other work holds (a seal's chunk) takes at most this share of BUFFER_MAX_BYTES: a small buffer still leaves requests room. */
export const HELD_SHARE = 0.25;

/** The main thread's collector is paced every this many bytes of bodies and rows handled. */
export const PACE_BYTES = 8 * MiB;
/** RSS less the ring's free slabs past BUFFER_MAX_BYTES + this: full collections. Half the headroom; the other half is the next PACE_BYTES' garbage. */
export const GC_FULL_ABOVE_BUFFER_BYTES = HEADROOM_BYTES / 2;
/** The whole RSS past BUFFER_MAX_BYTES + this: full collections may come three times as often. */
export const GC_PRESSED_ABOVE_BUFFER_BYTES = (HEADROOM_BYTES * 3) / 4;
/** A full collection waits this many times its last duration after it: ≤ 10% of the wall clock (25–110 ms each). */
export const GC_FULL_SPACING = 9;
/** Past the second mark: ≤ 25%, as garbage in the free slabs' shadow climbs. */
export const GC_PRESSED_SPACING = 3;

/** A decode thread runs an eden collection after each this many bytes of slices: each slice leaves its objects. */
export const SLICE_GC_BYTES = MiB;
/** A decode thread collects its heap once idle this long: the job is off the stack, the next does not wait behind it. */
export const THREAD_IDLE_GC_MS = 20;
/** A worker thread (decode or flush) collects its heap fully every this many bytes when it is never idle. */
export const THREAD_GC_EVERY_BYTES = 32 * MiB;
