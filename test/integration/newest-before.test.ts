// An empty page's "older data" (query/read.ts newestBefore): without a query it is found from the
// blocks' rows, opening only the blocks that span `from`. Here blocks overlap (two seals, each over
// the same days), span `from` at random, sit beside hot rows that came late and another source's
// events; at 200 random times the answer must be the newest dt before it that PostgreSQL holds.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { parseQuery } from "../../src/query/parse";
import { newestBefore } from "../../src/query/read";
import type { ReadRequest } from "../../src/query/request";
import { rng } from "../../bench/corpus";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { blockLayout } from "../helpers/sealing";

/** Events of a fixed stretch of 2025: the longest retention keeps their time as sent (codec/reception.ts). */
const BASE = Date.parse("2025-09-01T00:00:00.000Z");
const SPAN_MS = 3 * 86_400_000;

let lp: TestLogpond;
let source: TestSource;
let other: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
  other = await lp.createSource({ logs_retention: 3652 });
  const random = rng(7);
  const send = async (target: TestSource, count: number) => {
    const events = Array.from({ length: count }, (_, n) => ({ dt: new Date(BASE + Math.floor(random() * SPAN_MS)).toISOString(), n }));
    expect((await lp.ingest(target.token, JSON.stringify(events))).status).toBe(202);
  };
  // Two seals over the same three days: their blocks overlap in time.
  for (const round of [0, 1]) {
    await send(source, 1_500);
    await send(other, 300 + round);
    await lp.flusher.flush();
    await lp.sealer.sealNow();
  }
  await send(source, 40); // late events, still hot
  await lp.flusher.flush();
});

afterAll(async () => {
  await lp?.stop();
});

test("the tiers are as the test means them: overlapping blocks and hot rows", async () => {
  const row = await blockLayout(lp.sql, Number(source.id));
  expect(row.blocks).toBeGreaterThanOrEqual(6);
  expect(row.overlapping).toBeGreaterThan(0);
  expect(row.hot).toBe(40);
});

test("without a query, the newest dt before `from` is what log_events holds, at 200 random times", async () => {
  const random = rng(11);
  const request = (sourceIds: number[], from: string): ReadRequest => ({
    sourceIds,
    given: new URLSearchParams(),
    query: undefined,
    batch: 100,
    order: "newest_first",
    from,
    to: new Date(BASE + SPAN_MS + 86_400_000).toISOString(),
    after: undefined,
    binding: "",
  });
  for (let i = 0; i < 200; i++) {
    // From before the first event to after the last; a third of them at an event's own time.
    let from = new Date(BASE - 3_600_000 + Math.floor(random() * (SPAN_MS + 7_200_000))).toISOString().replace("Z", "000Z");
    if (i % 3 === 0) {
      const [row] = await lp.sql<{ dt: string }[]>`
        select to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt from log_events
        where source_id = ${Number(source.id)} order by dt offset ${Math.floor(random() * 3_000)} limit 1`;
      from = row!.dt;
    }
    const sources = i % 2 === 0 ? [Number(source.id)] : [Number(source.id), Number(other.id)];
    const [expected] = await lp.sql.unsafe<{ dt: string | null }[]>(
      `select to_char(max(dt) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt from log_events where source_id = any($1::bigint[]) and dt < $2::text::timestamptz`,
      [sources, from] as never[],
    );
    expect([from, sources, await newestBefore(lp.sql, request(sources, from), 60_000)]).toEqual([from, sources, expected!.dt]);
  }
});

test("with and without a query, a `from` in the first month of year 0001: nothing older, not an error", async () => {
  for (const query of [undefined, parseQuery("n:1")]) {
    for (const from of ["0001-01-01T00:30:00.000000Z", "0001-01-20T00:00:00.000000Z"]) {
      const request: ReadRequest = {
        sourceIds: [Number(source.id)],
        given: new URLSearchParams(),
        query,
        batch: 100,
        order: "newest_first",
        from,
        to: "0001-02-01T00:00:00.000000Z",
        after: undefined,
        binding: "",
      };
      expect([from, query === undefined, await newestBefore(lp.sql, request, 60_000)]).toEqual([from, query === undefined, null]);
    }
  }
});
