// `id` and `dt` in a query are the event's own fields, as sent (a request id, the shipper's time
// text), never the row's `id` and `dt` that logpond writes over them in the answer: the same in
// both tiers (hot rows and sealed blocks) and in the live stream's matcher (docs/reading.md,
// "Query language"). The row's id is found with context, its time with from/to.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SseReader } from "../helpers/sse";
import { tiers } from "../helpers/sealing";
import { waitFor } from "../helpers/wait";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const iso = (s: number) => new Date(BASE + s * 1000).toISOString();
const WINDOW = `from=${iso(0)}&to=${iso(60)}`;

let lp: TestLogpond;
let source: TestSource;
// Half sealed into blocks, half hot: each kind of event in both tiers.
const sent = [
  { dt: iso(1), id: "req-7", message: "own id" },
  { timestamp: iso(2), message: "time as timestamp" },
  { dt: iso(3), message: "nested id", nested: { id: "n1" } },
  { dt: iso(4), id: 42, message: "numeric id" },
];

beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
  const post = async (events: unknown[]) => expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  await post(sent);
  await lp.flusher.flush();
  // A pass may find the open generation busy (another file's reader on the shared database): seal until they are in blocks.
  await waitFor(
    "the first four events in blocks",
    async () => {
      await lp.sealer.sealNow();
      return (await tiers(lp.sql, Number(source.id))).sealed === 4;
    },
    { intervalMs: 200, timeoutMs: 60_000 },
  );
  await post(sent.map((e) => ({ ...e, message: `${e.message} (hot)` })));
  await lp.flusher.flush();
  expect(await tiers(lp.sql, Number(source.id))).toMatchObject({ hot: 4, sealed: 4 });
});
afterAll(async () => {
  await lp?.stop();
});

const search = async (query: string) => {
  const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&${WINDOW}&order=oldest_first&query=${encodeURIComponent(query)}`);
  expect(response.status).toBe(200);
  return ((await response.json()) as any).data as { id: string; message: string }[];
};
const both = (...messages: string[]) => [...messages, ...messages.map((m) => `${m} (hot)`)].sort();

test.each([
  ["id:req-7", ["own id"]],
  ["id=req-7", ["own id"]],
  ["id=42", ["numeric id"]],
  ["id:*", ["own id", "numeric id"]],
  ["-id:*", ["time as timestamp", "nested id"]],
  ["nested.id:n1", ["nested id"]],
  ["dt:*", ["own id", "nested id", "numeric id"]],
  ["dt:2025-11-20T10:00:01", ["own id"]],
  ["timestamp:*", ["time as timestamp"]],
])("%s finds the events whose own field matches, in both tiers", async (query, messages) => {
  expect((await search(query)).map((row) => row.message).sort()).toEqual(both(...messages));
});

test("the row's id (logpond's) is not a field of the event: id=<row id> finds nothing", async () => {
  const all = await search("timestamp:*");
  expect(all).toHaveLength(2);
  for (const row of all) expect(await search(`id=${row.id}`)).toEqual([]);
});

test("the live stream's matcher reads id and dt as search does", async () => {
  const response = await lp.api("GET", `/api/v2/query/live-tail/stream?source_ids=${source.id}&query=${encodeURIComponent("id:req-7 OR -dt:*")}`);
  expect(response.status).toBe(200);
  const stream = new SseReader(response);
  try {
    const live = sent.map((e) => ({ ...e, message: `${e.message} (live)` }));
    expect((await lp.ingest(source.token, JSON.stringify(live))).status).toBe(202);
    await lp.flusher.flush();
    // A marker after them, matched by its missing dt: once it is here, the others were decided.
    expect((await lp.ingest(source.token, JSON.stringify([{ message: "marker" }]))).status).toBe(202);
    await lp.flusher.flush();
    await stream.until(() => stream.rows().some((row) => row.message === "marker"), 20_000, "the marker");
    expect(stream.rows().map((row) => row.message)).toEqual(["own id (live)", "time as timestamp (live)", "marker"]);
    // The row shows logpond's id in place of the event's own.
    expect(stream.rows()[0].id).toMatch(/^[0-9]+$/);
  } finally {
    await stream.close();
  }
});
