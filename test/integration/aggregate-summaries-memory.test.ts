// Aggregations counted from block summaries (store/summary.ts) over blocks of the sealer's memory
// path (SEAL_FROM=memory: lines from codec/jsonb-text.ts, blocks that overlap in time), the same
// blocks after a merge (store/merge.ts), and blocks without a summary (sealed before drizzle/0012)
// among them: every answer must be the one reading every event gives (max_events far past the
// window's count turns summaries off). Also the histogram by a field's aggregation (`missing`),
// and top-N ties.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readAggregate, type AggregateRequest } from "../../src/query/aggregate";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { aggregator, countedBySummaries } from "../helpers/summaries";

let db: ScratchDatabase;
let lp: TestLogpond;
let source: TestSource;

/** A past day (merges take days before today), 10:00 UTC on. */
const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const WHOLE = { from: "2025-11-20T00:00:00.000000Z", to: "2025-11-20T23:59:59.999999Z" };
const CUT = { from: new Date(BASE + 700_000).toISOString(), to: new Date(BASE + 2_100_000).toISOString() };

function event(n: number): Record<string, unknown> {
  const e: Record<string, unknown> = { dt: new Date(BASE + n * 1000).toISOString(), n };
  // Four values of equal count in each block: the top-N's ties decide the order.
  e.tie = `t${n % 4}`;
  if (n % 5 !== 0) e.level = ["info", "INFO", "warn", "Warning", "error", "", "3", 30][n % 8];
  e.http = { status: [200, 404, 500, 200, "200", true, null][n % 7], method: n % 2 ? "GET" : "POST" };
  if (n % 3 === 0) e.tags = ["a", "b"];
  if (n % 11 === 0) e.region = null;
  else e.region = `r${n % 3}`;
  if (n % 13 === 0) e.big = 1.5;
  else e.big = n % 2;
  return e;
}

beforeAll(async () => {
  db = await createScratchDatabase("aggsum");
  await runMigrations(db.url);
  lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", SEAL_FROM: "memory", SEAL_WORKERS: "2", MERGE_INTERVAL_MS: "0" });
  source = await lp.createSource({ logs_retention: 3652 });
  // Six seals of two requests whose events interleave in time: blocks that overlap.
  const per = 200;
  for (let g = 0; g < 6; g++) {
    for (const r of [0, 1]) {
      const events = Array.from({ length: per }, (_, i) => event(g * 2 * per + 2 * i + r));
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
      await lp.flusher.flush();
    }
    await lp.sealer.sealNow();
  }
  // Hot rows too.
  expect((await lp.ingest(source.token, JSON.stringify(Array.from({ length: 100 }, (_, i) => event(2_400 + i))))).status).toBe(202);
  await lp.flusher.flush();
});

afterAll(async () => {
  await lp?.stop();
  await db?.drop();
});

const aggregate = (params: Record<string, string>) => aggregator(lp, source.id)(params);
const counted = (path: string) => countedBySummaries(db.sql, source.id, [path], WHOLE.from, WHOLE.to);

const REQUESTS: Record<string, string>[] = [
  { by: "tie", top: "2" },
  { by: "tie", top: "3", buckets: "10" },
  { by: "level", top: "3" },
  { by: "level", top: "100", buckets: "60" },
  { by: "http.status", top: "2" },
  { by: "http.method" },
  { by: "region", top: "1", buckets: "5" },
  { by: "big" },
  { by: "tags.0" },
  { facets: "tie,level,http.status,region,big,missing", top: "2" },
  { facets: "level", buckets: "24" },
  { by: "region", facets: "tie,http.method", top: "2", buckets: "3" },
];

async function compareAll(): Promise<void> {
  for (const window of [WHOLE, CUT])
    for (const request of REQUESTS) {
      const params = { ...window, ...request };
      const summed = await aggregate(params);
      const read = await aggregate({ ...params, max_events: "100000000" });
      expect({ params, answer: summed }).toEqual({ params, answer: read });
    }
  // The histogram by a field (query/histogram-by.ts) asks for `missing` per bucket.
  for (const window of [WHOLE, CUT])
    for (const by of ["region", "level", "tie"]) {
      const request: AggregateRequest = {
        sourceIds: [Number(source.id)],
        malformed: [],
        query: undefined,
        ...window,
        by: [by],
        facets: [],
        distinct: undefined,
        field: undefined,
        top: 3,
        buckets: 12,
        maxEvents: undefined,
        missing: true,
      };
      const summed = await readAggregate(db.sql as never, request, 60_000);
      const read = await readAggregate(db.sql as never, { ...request, maxEvents: 100_000_000 }, 60_000);
      expect({ by, window, answer: summed }).toEqual({ by, window, answer: read });
    }
}

test("memory-path blocks (overlapping in time): the same answers as reading every event", async () => {
  expect(await counted("tie")).toBeGreaterThan(0); // the summaries do count here
  await compareAll();
}, 300_000);

test("after a merge, and with blocks without a summary among them: the same answers", async () => {
  await lp.merger.mergeNow();
  expect(await counted("tie")).toBeGreaterThan(0);
  await compareAll();
  // Blocks sealed before drizzle/0012 carry none: every other one.
  await db.sql`update log_blocks set fields = null where source_id = ${Number(source.id)} and min_id % 2 = 0`;
  await compareAll();
}, 300_000);
