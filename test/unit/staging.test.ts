// The memory path's bookkeeping (store/staging.ts) against a pool that records what it is handed:
// which batches go to which generation, when a generation's staged blocks cannot be trusted, and
// that a finished generation takes no more.
import { expect, test } from "bun:test";
import type { Finished, SealPool } from "../../src/store/seal-pool";
import { mergeRanges } from "../../src/store/sealer";
import { MAX_PENDING_BYTES, Staging, stagerGroup, type Stager } from "../../src/store/staging";

const GENERATION_IDS = 1_000;

/**
 * A pool whose threads answer when told: handed parts are kept per generation (their seqs, one per
 * part). `ways` threads; route() gives each thread a slice of `parts`' lengths (none: one part, all of it).
 */
function fakePool(parts?: number[]) {
  const handed = new Map<number, number[]>();
  const answers: { settle: () => void; fail: (error: Error) => void }[] = [];
  const pool = {
    heldBytes: 0,
    route(rows: readonly Uint8Array[]) {
      const bytes = rows.reduce((sum, part) => sum + part.byteLength, 0);
      return (parts ?? [bytes]).map((size) => new Uint8Array(size));
    },
    handOff(generation: number, seq: number, _index: number, rows: Uint8Array) {
      handed.set(generation, [...(handed.get(generation) ?? []), seq]);
      expect(rows.byteLength).toBeGreaterThan(0);
      return new Promise<void>((resolve, reject) => answers.push({ settle: resolve, fail: reject }));
    },
    async finish(generation: number): Promise<Finished> {
      const seqs = handed.get(generation) ?? [];
      handed.delete(generation);
      return { seqs, events: seqs.length, blocks: 1 };
    },
  };
  return { pool: pool as unknown as SealPool, handed, answers };
}

/** A Staging over `pool` whose holds are recorded: +bytes when held, -bytes when released. */
function holding(pool: ConstructorParameters<typeof Staging>[0]) {
  const held: number[] = [];
  const staging = new Staging(pool, GENERATION_IDS, (bytes) => {
    held.push(bytes);
    return () => held.push(-bytes);
  });
  return { staging, held };
}

const batch = (seq: number, firstId: number, bytes = 10) => ({ seq, firstId, rows: [new Uint8Array(bytes)] });

test("a batch goes to the generation its first id falls in, and only to one this process opened", async () => {
  const { pool, handed } = fakePool();
  const staging = new Staging(pool, GENERATION_IDS);
  staging.known([1, 1_001]); // found at the start: not opened here
  staging.committed(batch(1, 5));
  staging.committed(batch(2, 1_005));
  expect(handed.size).toBe(0);
  staging.opening(2_001);
  staging.committed(batch(3, 2_001));
  staging.committed(batch(4, 2_999));
  staging.committed(batch(5, 3_001)); // past its range: no generation known
  expect(handed.get(2_001)).toEqual([3, 4]);
  expect(handed.size).toBe(1);
  expect(await staging.finish(2_001)).toEqual({ seqs: [3, 4], events: 2, blocks: 1 });
  expect(await staging.finish(1_001)).toBe("opened before this process's memory path");
});

test("a finished generation takes no more batches; finish() answers the same when asked again", async () => {
  const { pool, handed } = fakePool();
  const staging = new Staging(pool, GENERATION_IDS);
  staging.opening(1);
  staging.committed(batch(1, 1));
  const first = await staging.finish(1);
  staging.committed(batch(2, 2)); // a straggler committed after the seal began
  expect(handed.get(1)).toBeUndefined();
  expect(await staging.finish(1)).toBe(first);
});

test("a thread that failed a batch makes the generation read back", async () => {
  const { pool, answers } = fakePool();
  const { staging, held } = holding(pool);
  staging.opening(1);
  staging.committed(batch(1, 1, 100));
  expect(staging.pendingBytes).toBe(100);
  answers[0]!.fail(new Error("thread died"));
  await Bun.sleep(0);
  expect(staging.pendingBytes).toBe(0);
  expect(held).toEqual([100, -100]);
  expect(await staging.finish(1)).toBe("a seal thread failed: thread died");
});

test("past MAX_PENDING_BYTES waiting for the threads a batch is not handed (the seal reads its rows back), nor any later one of its generation; the next generation's are again", async () => {
  const { pool, answers } = fakePool();
  const staging = new Staging(pool, GENERATION_IDS);
  staging.opening(1);
  staging.committed(batch(1, 1, MAX_PENDING_BYTES - 10));
  staging.committed(batch(2, 2, 20)); // would pass the bound
  expect(staging.pendingBytes).toBe(MAX_PENDING_BYTES - 10);
  expect(staging.totals.skipped).toBe(1);
  answers[0]!.settle();
  await Bun.sleep(0);
  staging.committed(batch(3, 3, 20)); // room again, but the generation's tail is read back whole
  expect(staging.totals.skipped).toBe(2);
  staging.opening(GENERATION_IDS + 1);
  staging.committed(batch(4, GENERATION_IDS + 1, 20));
  expect(await staging.finish(1)).toEqual({ seqs: [1], events: 1, blocks: 1 });
  expect(await staging.finish(GENERATION_IDS + 1)).toEqual({ seqs: [4], events: 1, blocks: 1 });
});

test("the threads covering fewer batches than were handed (one was replaced) makes the generation read back", async () => {
  const { pool, handed } = fakePool();
  const staging = new Staging(pool, GENERATION_IDS);
  staging.opening(1);
  staging.committed(batch(1, 1));
  staging.committed(batch(2, 2));
  handed.set(1, [2]); // the thread that had batch 1 died and its replacement never saw it
  expect(await staging.finish(1)).toBe("the seal threads built 1 of 2 parts of batches");
});

test("a batch split over three threads: each part held and handed on its own, covered once every part is built", async () => {
  const { pool, handed, answers } = fakePool([60, 0, 40]); // no tuple of it goes to the second thread
  const { staging, held } = holding(pool);
  staging.opening(1);
  staging.committed(batch(1, 1, 100));
  staging.committed(batch(2, 2, 100));
  expect(handed.get(1)).toEqual([1, 1, 2, 2]);
  expect(staging.pendingBytes).toBe(200);
  expect(held).toEqual([60, 40, 60, 40]);
  answers[1]!.settle();
  await Bun.sleep(0);
  expect(staging.pendingBytes).toBe(160);
  expect(held).toEqual([60, 40, 60, 40, -40]);
  for (const answer of answers) answer.settle();
  await Bun.sleep(0);
  expect(staging.pendingBytes).toBe(0);
  expect(await staging.finish(1)).toEqual({ seqs: [1, 2], events: 4, blocks: 1 });
});

test("what the threads' builders hold, as they last answered, is kept out of the requests' memory", async () => {
  const { pool, answers } = fakePool();
  const { staging, held } = holding(pool);
  staging.opening(1);
  staging.committed(batch(1, 1, 100));
  (pool as unknown as { heldBytes: number }).heldBytes = 700;
  answers[0]!.settle();
  await Bun.sleep(0);
  expect(held).toEqual([100, -100, 700]);
  (pool as unknown as { heldBytes: number }).heldBytes = 0; // the seal wrote the generation's last blocks
  await staging.finish(1);
  expect(held).toEqual([100, -100, 700, -700]);
});

test("a split batch one of whose parts was lost (its thread replaced) or failed makes the generation read back", async () => {
  const lost = fakePool([50, 50]);
  const staging = new Staging(lost.pool, GENERATION_IDS);
  staging.opening(1);
  staging.committed(batch(1, 1, 100));
  staging.committed(batch(2, 2, 100));
  lost.handed.set(1, [1, 2, 2]); // batch 1's second part died with its thread
  expect(await staging.finish(1)).toBe("the seal threads built 3 of 4 parts of batches");

  const failed = fakePool([50, 50]);
  const other = new Staging(failed.pool, GENERATION_IDS);
  other.opening(1);
  other.committed(batch(1, 1, 100));
  failed.answers[0]!.settle();
  failed.answers[1]!.fail(new Error("thread died"));
  await Bun.sleep(0);
  expect(other.pendingBytes).toBe(0);
  expect(await other.finish(1)).toBe("a seal thread failed: thread died");
});

test("the id ranges of batches read back are sorted and merged where they touch or overlap", () => {
  expect(mergeRanges({ first: [30, 1, 11, 50, 21], last: [40, 10, 20, 60, 25] })).toEqual({ first: [1, 30, 50], last: [25, 40, 60] });
  expect(mergeRanges({ first: [], last: [] })).toEqual({ first: [], last: [] });
  expect(mergeRanges({ first: [5, 1], last: [9, 7] })).toEqual({ first: [1], last: [9] });
});

test("a generation this process opened and handed nothing of has no staged block here: an empty answer, not a refusal", async () => {
  const { pool } = fakePool();
  const staging = new Staging(pool, GENERATION_IDS);
  staging.opening(1);
  expect(await staging.finish(1)).toEqual({ seqs: [], events: 0, blocks: 0 });
});

test("several processes' stagings as one: the batches of all, told of each opening before it commits, refused if any member refuses", async () => {
  const members = [fakePool(), fakePool()].map(({ pool, handed }) => ({ staging: new Staging(pool, GENERATION_IDS), handed }));
  let told = 0;
  // A member that answers its opening later (a worker over IPC): the group waits for it.
  const slow: Stager = {
    opening: (start) =>
      Bun.sleep(5)
        .then(() => members[1]!.staging.opening(start))
        .then(() => void told++),
    known: (starts) => members[1]!.staging.known(starts),
    finish: (generation) => members[1]!.staging.finish(generation),
  };
  const group = stagerGroup(() => [members[0]!.staging, slow]);
  await group.opening(1);
  expect(told).toBe(1);
  members[0]!.staging.committed(batch(1, 1));
  members[1]!.staging.committed(batch(2, 2));
  members[0]!.staging.committed(batch(3, 3));
  expect(await group.finish(1)).toEqual({ seqs: [1, 3, 2], events: 3, blocks: 2 });
  // A generation one member did not hear of (it started after the opening): nobody's blocks of it are trusted.
  members[0]!.staging.opening(GENERATION_IDS + 1);
  members[0]!.staging.committed(batch(4, GENERATION_IDS + 1));
  expect(await group.finish(GENERATION_IDS + 1)).toBe("opened before this process's memory path");
});
