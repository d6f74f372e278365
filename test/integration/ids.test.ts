// Event ids and commit order (docs/storage.md; the live tail in docs/api.md): ids unique across two flush streams and two
// logpond instances on one database, a request's events numbered in order, and the commit seq
// each batch takes right before COMMIT arriving (LISTEN logpond_batches) in strictly increasing
// order, matching flush_batches and what Flusher.subscribe reported. Real HTTP, real PostgreSQL.
import { afterAll, beforeAll, expect, test } from "bun:test";
import postgres from "postgres";
import type { CommittedBatch } from "../../src/buffer/flusher";
import { BATCHES_CHANNEL } from "../../src/store/copy";
import { idOf, sourceOf, tuplesOf } from "../../src/codec/tuples";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

const url = process.env.LOGPOND_TEST_DATABASE_URL!;
const admin = postgres(url, { max: 2, onnotice: () => {} });
let a: TestLogpond;
let b: TestLogpond;
beforeAll(async () => {
  // Two streams each and a small batch size, so many batches commit concurrently.
  a = await startTestLogpond({ FLUSH_STREAMS: "2", FLUSH_MAX_EVENTS: "50" });
  b = await startTestLogpond({ FLUSH_STREAMS: "2", FLUSH_MAX_EVENTS: "50" });
});
afterAll(async () => {
  await a.stop();
  await b.stop();
  await admin.end({ timeout: 5 });
});

test("ids are unique across two streams and two processes; seq follows commit order", async () => {
  const source = await a.createSource();
  const heard: number[] = [];
  const listening = await admin.listen(BATCHES_CHANNEL, (payload) => heard.push(Number(payload)));
  const published: CommittedBatch[] = [];
  const unsubscribe = [a, b].map((lp) => lp.flusher.subscribe((batch) => published.push(batch)));
  // Wait until instance b has heard of the source (LISTEN/NOTIFY between instances).
  await waitFor("b to take the new source's token", async () => (await b.ingest(source.token, "[]")).status, { until: (status) => status === 202 });

  const requests = 120;
  const answers = await Promise.all(
    Array.from({ length: requests }, (_, r) => (r % 2 === 0 ? a : b).ingest(source.token, JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ r, i }))))),
  );
  expect(answers.map((response) => response.status)).toEqual(Array(requests).fill(202));
  await Promise.all([a.flusher.flush(), b.flusher.flush()]);

  const rows = await a.stored(source.id);
  expect(rows).toHaveLength(requests * 20);
  expect(new Set(rows.map((row) => row.id)).size).toBe(rows.length);
  // Within a request, ids follow the order of its events and are consecutive.
  const byRequest = new Map<number, { id: number; i: number }[]>();
  for (const row of rows) byRequest.set(row.raw.r, [...(byRequest.get(row.raw.r) ?? []), { id: row.id, i: row.raw.i }]);
  for (const events of byRequest.values()) {
    expect(events.map((event) => event.i)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(events[19]!.id - events[0]!.id).toBe(19);
  }

  // Every stored row was announced once, by the batch whose id range holds it.
  const announced = published.flatMap((batch) =>
    batch.rows.flatMap(tuplesOf).map((tuple) => {
      const id = idOf(tuple);
      expect(id).toBeGreaterThanOrEqual(batch.firstId);
      expect(id).toBeLessThanOrEqual(batch.lastId);
      return { id, sourceId: sourceOf(tuple) };
    }),
  );
  const ours = announced
    .filter((row) => row.sourceId === Number(source.id))
    .map((row) => row.id)
    .sort((x, y) => x - y);
  expect(ours).toEqual(rows.map((row) => row.id).sort((x, y) => x - y));

  // NOTIFYs are delivered in commit order, so strictly increasing seqs mean seq = commit order.
  const seqs = published.map((batch) => batch.seq);
  await waitFor("every published batch's NOTIFY", () => seqs.filter((seq) => !heard.includes(seq)), { until: (missing) => missing.length === 0 });
  const ourHeard = heard.filter((seq) => seqs.includes(seq));
  expect(ourHeard).toHaveLength(seqs.length);
  for (let i = 1; i < heard.length; i++) expect(heard[i]!).toBeGreaterThan(heard[i - 1]!);
  const stamped = await admin`select seq, first_id, last_id from flush_batches where seq = any(${seqs})`;
  expect(stamped).toHaveLength(seqs.length);
  for (const row of stamped) {
    const batch = published.find((p) => p.seq === Number(row.seq))!;
    expect([Number(row.first_id), Number(row.last_id)]).toEqual([batch.firstId, batch.lastId]);
  }

  for (const stop of unsubscribe) stop();
  await listening.unlisten();
});
