// The official Better Stack Node client, pointed at logpond, is the drop-in test: gzip-compressed
// MessagePack batches, its own dt format, its own retries.
import { Logtail } from "@logtail/node";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await lp.stop();
});

test("@logtail/node sends 1,000 logs; all 1,000 are stored with their fields", async () => {
  const source = await lp.createSource({ platform: "javascript" });
  const logtail = new Logtail(source.token, { endpoint: lp.ingestUrl, batchSize: 250, batchInterval: 50, throwExceptions: true });
  const sent = Array.from({ length: 1000 }, (_, i) => i);
  await Promise.all(sent.map((i) => logtail.info(`message ${i}`, { seq: i, user: { id: `u${i % 7}` }, tags: ["a", "b"] })));
  await logtail.flush();

  const rows = await lp.stored(source.id);
  expect(rows).toHaveLength(1000);
  const bySeq = new Map(rows.map((row) => [row.raw.seq as number, row]));
  for (const i of sent) {
    const row = bySeq.get(i)!;
    expect(row.raw).toMatchObject({ message: `message ${i}`, level: "info", seq: i, user: { id: `u${i % 7}` }, tags: ["a", "b"] });
    // The client stamps dt itself; the event time column carries it.
    expect(row.dt.getTime()).toBe(Date.parse(row.raw.dt));
  }
});
