// A long slice of a search is read as two halves at once (query/read.ts). Whichever half settles
// first, and however it settles, the read ends with one answer and no rejection goes unhandled: one
// that did ended the whole process (bun exits on an unhandled rejection). The order is not left to
// timing: the seam runs the farther half as a failure and holds the nearer one until that failure
// has happened and the event loop has turned (when an unhandled rejection is reported), then runs
// the nearer half's real statement against PostgreSQL.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { AppError } from "../../src/errors";
import { queryTimeout, readEvents, type ReadSeams } from "../../src/query/read";
import { micros, readRequest } from "../../src/query/request";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let lp: TestLogpond;
let source: TestSource;
/** The window's end; the first split slice (newest first) is (T − 2170 s − 3 h, T − 2170 s]. */
const T = Date.now() - 60_000;
const iso = (ms: number) => micros(new Date(ms).toISOString());
/** Inside the nearer half of the first split slice. */
const NEARER_AT = T - 2_170_000 - 30 * 60_000;

beforeAll(async () => {
  // Rows: hot chunks would bound the first slice to the five events' own times (query/read.ts,
  // logpond_newest_holding), and these reads would never be split.
  lp = await startTestLogpond({ HOT_TIER: "rows" });
  source = await lp.createSource();
  const events = Array.from({ length: 5 }, (_, i) => ({ n: i, dt: new Date(NEARER_AT - i * 1000).toISOString() }));
  expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  expect(await lp.stored(source.id)).toHaveLength(5);
});
afterAll(async () => {
  await lp.stop();
});

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The farther half fails with `failure` at once; the nearer half waits for that, two turns of the loop, then reads. */
function fartherFailsFirst(failure: () => Error): { seams: ReadSeams; halves: number[] } {
  let failed!: () => void;
  const farther = new Promise<void>((resolve) => (failed = resolve));
  const halves: number[] = [];
  const seams: ReadSeams = {
    async half(which, run) {
      halves.push(which);
      if (which === 1) {
        failed();
        throw failure();
      }
      await farther;
      await turn();
      await turn();
      return run();
    },
  };
  return { seams, halves };
}

/** Runs `read` with a listener on unhandled rejections; returns its outcome and what was reported. */
async function watching<T>(read: () => Promise<T>): Promise<{ outcome: T | Error; unhandled: unknown[] }> {
  const unhandled: unknown[] = [];
  const listener = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", listener);
  try {
    const outcome = await read().catch((error: Error) => error);
    await turn();
    await turn();
    return { outcome, unhandled };
  } finally {
    process.off("unhandledRejection", listener);
  }
}

const request = (batch: number) => readRequest(new URL(`http://x/?source_ids=${source.id}&from=${iso(T - 86_400_000)}&to=${iso(T)}&batch=${batch}`));

test("the farther half times out while the nearer still reads, and the page needs it: the read ends in the 503, nothing unhandled", async () => {
  const { seams, halves } = fartherFailsFirst(() => queryTimeout(5000));
  const { outcome, unhandled } = await watching(() => readEvents(lp.store.sql, request(100), 5000, seams));
  expect(halves).toEqual([1, 0]);
  expect(unhandled).toEqual([]);
  expect(outcome).toBeInstanceOf(AppError);
  expect((outcome as AppError).reason).toBe("query_timeout");
});

test("the farther half fails (not a timeout) first, and the nearer half fills the page: the page is answered, nothing unhandled", async () => {
  const { seams, halves } = fartherFailsFirst(() => new Error("connection lost"));
  const { outcome, unhandled } = await watching(() => readEvents(lp.store.sql, request(3), 5000, seams));
  expect(halves).toEqual([1, 0]);
  expect(unhandled).toEqual([]);
  if (outcome instanceof Error) throw outcome;
  expect(outcome.rows.map((row) => JSON.parse(row).n)).toEqual([0, 1, 2]);
  expect(outcome.next).toBeDefined();
});

test("the farther half fails (not a timeout) first, and the page needs it: its error is the read's, nothing unhandled", async () => {
  const { seams } = fartherFailsFirst(() => new Error("connection lost"));
  const { outcome, unhandled } = await watching(() => readEvents(lp.store.sql, request(100), 5000, seams));
  expect(unhandled).toEqual([]);
  expect((outcome as Error).message).toBe("connection lost");
});

test("without a seam the same read finds the five events (the halves' boundaries lose none)", async () => {
  const page = await readEvents(lp.store.sql, request(100), 5000);
  expect(page.rows.map((row) => JSON.parse(row).n)).toEqual([0, 1, 2, 3, 4]);
  expect(page.next).toBeUndefined();
});
