// The flush streams on their own thread (store/flush-thread.ts): what crosses to it and back.
// Rows in the ring's shared slabs are read in place; any other rows are copied, never taken from
// the caller (a transferred buffer would be emptied under the ring); refusals come back with their
// kind and SQLSTATE; dead letters and the exactly-once probe work across the hop.
import { afterAll, expect, test } from "bun:test";
import postgres from "postgres";
import { Ring } from "../../src/buffer/ring";
import { WriteError } from "../../src/store/copy";
import { openFlushStreams } from "../../src/store/flush-thread";
import { fromText, setIds, tuplesOf } from "../../src/codec/tuples";

const url = process.env.LOGPOND_TEST_DATABASE_URL!;
const admin = postgres(url, { max: 2, onnotice: () => {} });
const [stream, other] = openFlushStreams(url, 5_000, 2);
afterAll(async () => {
  await Promise.all([stream!.close(), other!.close()]);
  await admin.end({ timeout: 5 });
});

const sourceId = () => 920_000_000 + Math.floor(Math.random() * 1_000_000);
const lines = (source: number, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => `${source}\t2026-11-22T00:00:00Z\t{"i": ${from + i}}\n`).join("");

test("shared slab rows and plain rows are stored; the caller's buffers are left as they were", async () => {
  const source = sourceId();
  const ring = new Ring({ maxEvents: 1000, maxBytes: 1 << 20 });
  ring.append(fromText(lines(source, 0, 3), false), 3);
  ring.append(fromText(lines(source, 3, 2), false), 2);
  const [slabChunk] = ring.take(1000);
  expect(slabChunk!.rows.buffer).toBeInstanceOf(SharedArrayBuffer);
  const plain = fromText(lines(source, 5, 4), false); // a Buffer: copied across, not transferred
  const firstId = await stream!.reserveIds(9);
  setIds(slabChunk!.rows, 5, firstId);
  setIds(plain, 4, firstId + 5);
  const before = Buffer.from(plain);
  const commit = await stream!.write(crypto.randomUUID(), [slabChunk!.rows, plain], { firstId, lastId: firstId + 8 });
  expect(commit.seq).toEqual(expect.any(Number));
  expect(plain.byteLength).toBe(before.byteLength);
  expect(Buffer.from(plain).equals(before)).toBe(true);
  const stored = await admin`select id, raw from log_events where source_id = ${source} order by id`;
  expect(stored.map((row) => [Number(row.id) - firstId, row.raw.i])).toEqual(Array.from({ length: 9 }, (_, i) => [i, i]));
  await admin`delete from log_hot where source_id = ${source}`;
  await admin`delete from log_chunks where source_id = ${source}`;
});

test("a refusal comes back as a WriteError of kind data with its SQLSTATE; its dead letter is stored", async () => {
  const source = sourceId();
  // Text that is not JSON: jsonb refuses it (22P02), as it would any row it cannot hold.
  const refusedRows = fromText(`${source}\t2026-11-22T00:00:00Z\t{"n": \n`, false);
  const refused = await stream!.write(crypto.randomUUID(), [refusedRows]).catch((error) => error);
  expect(refused).toBeInstanceOf(WriteError);
  expect([(refused as WriteError).kind, (refused as WriteError).sqlstate]).toEqual(["data", "22P02"]);
  const tuples = fromText(`${source}\t2026-11-22T00:00:00Z\t{"n": 1}\n`, false);
  const letter = crypto.randomUUID();
  const [tuple] = tuplesOf(tuples);
  await other!.deadLetter(letter, tuple!, new WriteError("data", "refused for the test", "23514"));
  const [dead] = await admin`select raw, sqlstate, error from dead_letters where source_id = ${source}`;
  expect([JSON.parse(dead!.raw), dead!.sqlstate, dead!.error]).toEqual([{ n: 1 }, "23514", "refused for the test"]);
  expect(await other!.committed(letter)).toEqual({ seq: null });
  expect(await other!.committed(crypto.randomUUID())).toBe(false);
  await admin`delete from dead_letters where source_id = ${source}`;
});
