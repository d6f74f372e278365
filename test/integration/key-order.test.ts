// An event's keys come back in the order they were sent (src/store/key-orders.ts): from the query
// API, context and the live tail's catch-up, while the rows are hot and once sealed; PostgreSQL's
// own text (log_events.raw) keeps jsonb's order; a retention sweep forgets the orders of events
// past every source's retention.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sweep } from "../../src/retention/sweep";
import { showInSentOrder } from "../../src/store/key-orders";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { tiers } from "../helpers/sealing";
import { SseReader } from "../helpers/sse";

const LIVE = "/api/v2/query/live-tail";
const STREAM = "/api/v2/query/live-tail/stream";
const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const at = (n: number) => new Date(BASE + n * 1000).toISOString();

/** Each event's keys as sent (JSON.parse keeps the text's order for keys that are not integers). */
const SENT = [
  { message: "first", level: "info", dt: at(0), n: 0 },
  { n: 1, dt: at(1), level: "info", message: "second" },
  { zeta: 1, alpha: { ccc: 1, bb: 2, a: [{ y: 1, x: 2 }] }, n: 2, dt: at(2) },
  { dt: at(3), n: 3 },
];

/** Keys of every object, depth first, as the text lists them. */
function keyPaths(value: unknown, path = ""): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => keyPaths(item, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([key, child]) => [`${path}.${key}`, ...keyPaths(child, `${path}.${key}`)]);
}

/** A row as shown, without logpond's own fields (dt stays where the event had it). */
const own = (row: Record<string, unknown>) => keyPaths(row).filter((path) => path !== ".id" && path !== ".source_id");

let lp: TestLogpond;
let source: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
  expect((await lp.ingest(source.token, JSON.stringify(SENT.slice(0, 3)))).status).toBe(202);
  // NDJSON too: each line is its own event.
  expect((await lp.ingest(source.token, `${JSON.stringify(SENT[3])}\n`, { "content-type": "application/x-ndjson" })).status).toBe(202);
  await lp.flusher.flush();
});
afterAll(async () => {
  await lp.stop();
});

async function shown(): Promise<Record<string, unknown>[]> {
  const response = await lp.api("GET", `${LIVE}?source_ids=${source.id}&from=${at(-10)}&to=${at(10)}&order=oldest_first`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: Record<string, unknown>[] }).data;
}

test("the query API shows every event's keys as sent, at every depth, hot and sealed", async () => {
  const expected = SENT.map((event) => keyPaths(event));
  expect((await shown()).map(own)).toEqual(expected);
  // The stored text is jsonb's: the order lives beside it, not in it.
  const [stored] = await lp.sql<{ raw: string }[]>`select raw::text as raw from log_events where source_id = ${Number(source.id)} and (raw->>'n')::int = 0`;
  expect(Object.keys(JSON.parse(stored!.raw))).toEqual(["n", "dt", "level", "message"]);
  expect(Object.keys((await shown())[0]!)).toEqual(["message", "level", "dt", "n", "id", "source_id"]);

  await lp.sealer.sealNow();
  expect(await tiers(lp.sql, Number(source.id))).toMatchObject({ hot: 0, sealed: 4 });
  expect((await shown()).map(own)).toEqual(expected);
});

test("context shows its rows' keys as sent", async () => {
  const rows = await shown();
  const response = await lp.api("GET", `/api/v2/query/context?source_id=${source.id}&id=${rows[1]!.id}&before=5&after=5`);
  expect(response.status).toBe(200);
  const body = (await response.json()) as { data: Record<string, unknown>[] };
  expect(body.data.map(own)).toEqual(SENT.map((event) => keyPaths(event)));
});

test("the live tail's catch-up, read back from PostgreSQL, shows keys as sent", async () => {
  const other = await lp.createSource({ logs_retention: 3652 });
  const first = new SseReader(await lp.api("GET", `${STREAM}?source_ids=${other.id}`));
  await first.until(() => first.position !== undefined, 20_000, "the live start's id");
  await first.close();
  const events = [
    { message: "while away", level: "warn", n: 10 },
    { n: 11, b: { z: 1, a: 2 } },
  ];
  expect((await lp.ingest(other.token, JSON.stringify(events))).status).toBe(202);
  await lp.flusher.flush();
  const second = new SseReader(await lp.api("GET", `${STREAM}?source_ids=${other.id}`, undefined, { "last-event-id": first.position! }));
  try {
    await second.until(() => second.rows().length >= 2, 20_000, "the rows sent while away");
    expect(second.rows().map((row) => keyPaths(row).filter((path) => ![".id", ".source_id", ".dt"].includes(path)))).toEqual(
      events.map((event) => keyPaths(event)),
    );
  } finally {
    await second.close();
  }
});

test("a sweep forgets the orders committed before every source's retention (and a week) ended, and only those", async () => {
  const first = (await lp.sql<{ first: string }[]>`select min(first_id)::text as first from log_key_orders`)[0]!.first;
  await lp.sql`insert into log_key_orders (first_id, last_id, orders, slots, committed_at) values
    (-20, -11, '[["b","a"]]', '\\x01', '1990-01-01'), (-10, -1, '[["b","a"]]', '\\x01', now())`;
  const days = (await lp.sql<{ days: number }[]>`select max(logs_retention) as days from sources`)[0]!.days;
  expect(days).toBeGreaterThanOrEqual(3652);
  await lp.retention.idle();
  await sweep(lp.sql, new AbortController().signal, () => {});
  const left = await lp.sql<{ first_id: string }[]>`select first_id::text from log_key_orders where first_id < 0 order by first_id`;
  expect(left.map((row) => row.first_id)).toEqual(["-10"]);
  await lp.sql`delete from log_key_orders where first_id < 0`;
  expect(await lp.sql`select 1 from log_key_orders where first_id = ${first}`).toHaveLength(1);
});

test("a write with more than 255 orders takes two bytes a slot; an id past a row's last is left as stored", async () => {
  const orders = Array.from({ length: 257 }, (_, k) => (k === 0 ? ["b", "a"] : k === 255 ? ["c", "b", "a"] : [`k${k}`]));
  const slots = Buffer.from([0, 1, 1, 0, 0, 0]); // -1000: order 1, -999: order 256, -998: none
  await lp.sql`insert into log_key_orders (first_id, last_id, orders, slots) values (-1000, -998, ${JSON.stringify(orders)}::text::jsonb, ${slots})`;
  try {
    const rows = [
      { id: "-1000", raw: '{"a": 1, "b": 2}' },
      { id: "-999", raw: '{"a": 1, "b": 2, "c": 3}' },
      { id: "-998", raw: '{"a": 1, "b": 2}' },
      { id: "-997", raw: '{"a": 1, "b": 2}' },
    ];
    await showInSentOrder(lp.sql, rows, "raw");
    expect(rows.map((row) => row.raw)).toEqual(['{"b": 2, "a": 1}', '{"c": 3, "b": 2, "a": 1}', '{"a": 1, "b": 2}', '{"a": 1, "b": 2}']);
  } finally {
    await lp.sql`delete from log_key_orders where first_id = -1000`;
  }
});
