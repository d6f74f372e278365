// query/scan-pool.ts ScanPool.spread: how many batches of blocks a read hands the scan threads at
// once. Two calls per thread at most, and no more payload bytes held than the pool's bound, all
// reads together, except that a read with no call running always makes one (so two reads never
// wait on each other); every call made is answered before spread settles, and a failure is thrown
// once they all have. The calls here are stand-ins answered by the test: no thread is started.
import { expect, test } from "bun:test";
import { ScanPool } from "../../src/query/scan-pool";

type Batch = { payload: Uint8Array }[];

/** A batch of `count` blocks of `bytes` payload bytes each. */
const batch = (count: number, bytes: number): Batch => Array.from({ length: count }, () => ({ payload: new Uint8Array(bytes) }));

async function* cursor(batches: Batch[]): AsyncGenerator<Batch> {
  for (const b of batches) yield b;
}

/** Calls answered only when the test says so; how many were open at most, and their bytes. */
function heldCalls() {
  const open: { bytes: number; answer: () => void }[] = [];
  const most = { calls: 0, bytes: 0 };
  const call = (b: Batch) =>
    new Promise<number>((resolve) => {
      const bytes = b.reduce((sum, block) => sum + block.payload.byteLength, 0);
      const entry = { bytes, answer: () => resolve(bytes) };
      open.push(entry);
      most.calls = Math.max(most.calls, open.length);
      most.bytes = Math.max(
        most.bytes,
        open.reduce((sum, e) => sum + e.bytes, 0),
      );
    });
  /** Answers the oldest open call. */
  const answerOne = () => open.shift()?.answer();
  return { open, most, call, answerOne };
}

/** Answers one open call every tick until `done` settles. */
async function answerUntil(done: Promise<unknown>, answerOne: () => void): Promise<void> {
  let settled = false;
  void done.finally(() => {
    settled = true;
  });
  while (!settled) {
    await Bun.sleep(1);
    answerOne();
  }
}

/** One read of `batches` through `pool`, its calls answered one a tick: what it took, and how many calls and bytes were open at most. */
async function spreadAll(pool: ScanPool, batches: Batch[]) {
  const calls = heldCalls();
  const taken: number[] = [];
  const done = pool.spread(
    cursor(batches),
    calls.call,
    (n) => taken.push(n),
    () => {},
  );
  await answerUntil(done, calls.answerOne);
  await done;
  return { taken, most: calls.most };
}

test("two calls per thread at most when the batches are small", async () => {
  const { taken, most } = await spreadAll(
    new ScanPool(3, 1 << 20),
    Array.from({ length: 20 }, () => batch(8, 100)),
  );
  expect(taken).toHaveLength(20);
  expect(most.calls).toBe(6);
});

test("no more payload bytes held than the bound while a call runs", async () => {
  // 3,000 bytes a batch: three fit under 10,000, the fourth waits, though eight calls could run.
  const { taken, most } = await spreadAll(
    new ScanPool(4, 10_000),
    Array.from({ length: 12 }, () => batch(3, 1_000)),
  );
  expect(taken).toEqual(Array(12).fill(3_000));
  expect(most.calls).toBe(4);
  expect(most.bytes).toBeLessThanOrEqual(12_000);
});

test("a batch bigger than the bound still goes, one at a time, and two reads do not wait on each other", async () => {
  const pool = new ScanPool(2, 1_000);
  const calls = heldCalls();
  const taken: number[] = [];
  const one = pool.spread(
    cursor([batch(2, 5_000), batch(2, 5_000)]),
    calls.call,
    (n) => taken.push(n),
    () => {},
  );
  const two = pool.spread(
    cursor([batch(1, 7_000), batch(1, 7_000)]),
    calls.call,
    (n) => taken.push(n),
    () => {},
  );
  const both = Promise.all([one, two]);
  // Each read has its first call out before any is answered: neither waits for the other's.
  await Bun.sleep(5);
  expect(calls.open.map((c) => c.bytes).sort()).toEqual([10_000, 7_000].sort());
  await answerUntil(both, calls.answerOne);
  await both;
  expect(taken.sort()).toEqual([10_000, 10_000, 7_000, 7_000].sort());
  expect(calls.most.calls).toBe(2);
});

test("a failed call is thrown once every call made has answered, and its bytes are given back", async () => {
  const pool = new ScanPool(2, 10_000);
  let answered = 0;
  const call = async (b: Batch) => {
    await Bun.sleep(2);
    answered++;
    if (b[0]!.payload.byteLength === 13) throw new Error("a scan thread failed: broken block");
    return b.length;
  };
  const batches = [batch(1, 100), batch(1, 13), batch(1, 100), batch(1, 100)];
  await expect(
    pool.spread(
      cursor(batches),
      call,
      () => {},
      () => {},
    ),
  ).rejects.toThrow("broken block");
  // Nothing is held after it: a read whose batches sum to nearly the bound runs them side by side.
  const calls = heldCalls();
  const done = pool.spread(
    cursor([batch(1, 4_000), batch(1, 4_000)]),
    calls.call,
    () => {},
    () => {},
  );
  await Bun.sleep(5);
  expect(calls.open).toHaveLength(2);
  await answerUntil(done, calls.answerOne);
  await done;
  expect(answered).toBeGreaterThanOrEqual(2);
});
