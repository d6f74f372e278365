// GET /api/v2/query/context at random anchors over a source whose blocks overlap in time (two seals
// over the same days), whose events share dts (whole seconds, ordered by id), lie days apart, and
// came late (hot rows), beside another source's events at the same times: with and without the
// anchor's dt, the answer must be the rows PostgreSQL orders around it; a dt a microsecond off, or
// another source's event, is a 404.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rng } from "../../bench/corpus";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { blockLayout } from "../helpers/sealing";

/** Events of a fixed stretch of 2025: the longest retention keeps their time as sent (codec/reception.ts). */
const BASE = Date.parse("2025-10-10T00:00:00.000Z");
const DAY = 86_400_000;

let lp: TestLogpond;
let source: TestSource;
let other: TestSource;
let all: { n: number; id: string; dt: string }[];
let others: { n: number; id: string; dt: string }[];

async function ordered(target: TestSource): Promise<{ n: number; id: string; dt: string }[]> {
  return lp.sql<{ n: number; id: string; dt: string }[]>`
    select (raw->>'n')::int as n, id::text as id, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt
    from log_events e where source_id = ${Number(target.id)} order by e.dt, e.id`;
}

beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
  other = await lp.createSource({ logs_retention: 3652 });
  const random = rng(5);
  let n = 0;
  // Most events over two days at whole seconds of a few hours (many share a dt), some with
  // microseconds, a few days and weeks away.
  const time = () => {
    const r = random();
    if (r < 0.05) return new Date(BASE - 20 * DAY + Math.floor(random() * 3) * 7 * DAY).toISOString();
    const ms = BASE + Math.floor(random() * 2) * DAY + Math.floor(random() * 4) * 3_600_000 + Math.floor(random() * 600) * 1000;
    return r < 0.2 ? new Date(ms).toISOString().replace("Z", `${String(Math.floor(random() * 1000)).padStart(3, "0")}Z`) : new Date(ms).toISOString();
  };
  const send = async (target: TestSource, count: number) => {
    const events = Array.from({ length: count }, () => ({ dt: time(), n: n++ }));
    expect((await lp.ingest(target.token, JSON.stringify(events))).status).toBe(202);
  };
  for (let round = 0; round < 2; round++) {
    await send(source, 700);
    await send(other, 200);
    await lp.flusher.flush();
    await lp.sealer.sealNow();
  }
  await send(source, 60); // late, still hot
  await send(other, 20);
  await lp.flusher.flush();
  all = await ordered(source);
  others = await ordered(other);
});

afterAll(async () => {
  await lp?.stop();
});

async function contextOf(params: Record<string, string | number>) {
  const response = await lp.api(
    "GET",
    `/api/v2/query/context?${new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)] as [string, string]))}`,
  );
  return { status: response.status, body: (await response.json()) as any };
}

test("the tiers are as the test means them: overlapping blocks, shared dts, hot rows", async () => {
  const row = await blockLayout(lp.sql, Number(source.id));
  expect(row.blocks).toBeGreaterThanOrEqual(4);
  expect(row.overlapping).toBeGreaterThan(0);
  expect(row.hot).toBe(60);
  expect(all).toHaveLength(1460);
  expect(new Set(all.map((e) => e.dt)).size).toBeLessThan(1400);
});

test("at 80 random anchors, with and without dt, the rows PostgreSQL orders around it", async () => {
  const random = rng(13);
  for (let i = 0; i < 80; i++) {
    const k = i < 2 ? [0, all.length - 1][i]! : Math.floor(random() * all.length);
    const before = Math.floor(random() * 80);
    const after = Math.floor(random() * 80);
    const anchor = all[k]!;
    const want = all.slice(Math.max(0, k - before), k + after + 1).map((e) => e.n);
    for (const withDt of [false, true]) {
      const params = { source_id: source.id, id: anchor.id, before, after, ...(withDt ? { dt: anchor.dt } : {}) };
      const { status, body } = await contextOf(params);
      expect([params, status]).toEqual([params, 200]);
      expect([params, body.data.map((row: { n: number }) => row.n)]).toEqual([params, want]);
      expect([params, body.meta.anchor_index]).toEqual([params, Math.min(k, before)]);
    }
  }
});

test("a dt a microsecond off, or another source's event, is a 404", async () => {
  const random = rng(17);
  const shift = (dt: string, delta: number) => {
    const us = Date.parse(dt) * 1000 + Number(dt.slice(23, 26)) + delta;
    const ms = Math.floor(us / 1000);
    return `${new Date(ms).toISOString().slice(0, 23)}${String(us - ms * 1000).padStart(3, "0")}Z`;
  };
  for (let i = 0; i < 30; i++) {
    const anchor = all[Math.floor(random() * all.length)]!;
    for (const dt of [shift(anchor.dt, 1), shift(anchor.dt, -1)]) {
      const params = { source_id: source.id, id: anchor.id, dt };
      expect([params, (await contextOf(params)).status]).toEqual([params, 404]);
    }
    const stranger = others[Math.floor(random() * others.length)]!;
    for (const dt of [undefined, stranger.dt]) {
      const params = { source_id: source.id, id: stranger.id, ...(dt ? { dt } : {}) };
      expect([params, (await contextOf(params)).status]).toEqual([params, 404]);
    }
  }
});
