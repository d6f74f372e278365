// A seal reads a hot partition in its physical order, chunk by chunk (store/sealer.ts sealRows),
// and flushes writing at once interleave their batches, so that order is only roughly time order: a
// chunk holds events of a source-day older than the newest of the chunk before. Built chunk by
// chunk, the blocks at each chunk's edge overlap, the day is one overlapping chain, and merges
// (store/merge-plan.ts) rewrite all of it. Here: a source-day's events sent with their times
// shuffled locally (each up to a minute off its place), enough of them that the seal reads several
// chunks; after the seal no block of the day may overlap another, each event is in one block, and
// the first merge pass finds nothing to rewrite.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rng } from "../../bench/corpus";
import { type BlockInfo, planMerges } from "../../src/store/merge-plan";
import { BLOCK_EVENTS } from "../../src/store/sealer";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { blockLayout, tiers } from "../helpers/sealing";

/** One event every 100 ms from here, each moved by up to JITTER_MS either way. */
const BASE = Date.parse("2025-06-03T01:00:00.000Z");
const JITTER_MS = 60_000;
/** About 800 B of text per event: 48,000 of them are about 38 MB, several of the seal's chunks. */
const PAD = "y".repeat(700);
const TOTAL = 48_000;

let lp: TestLogpond;
let source: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
});

afterAll(async () => {
  await lp?.stop();
});

test("a seal of events slightly out of time order builds blocks of the day that do not overlap", async () => {
  const next = rng(32); // the same shuffle every run
  for (let from = 0; from < TOTAL; from += 4_000) {
    const events = [];
    for (let n = from; n < Math.min(TOTAL, from + 4_000); n++) {
      const dt = BASE + n * 100 + Math.round((next() * 2 - 1) * JITTER_MS);
      events.push({ dt: new Date(dt).toISOString(), n, pad: PAD });
    }
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  }
  await lp.flusher.flush();
  // The suite's database is shared: the pass seals other tests' closed generations too.
  const sealed = await lp.sealer.sealNow();
  expect(sealed.sealed).toBeGreaterThanOrEqual(TOTAL);

  const id = Number(source.id);
  const held = await tiers(lp.sql, id);
  expect(held).toMatchObject({ hot: 0, sealed: TOTAL, distinctIds: TOTAL, badBlocks: 0 });
  const layout = await blockLayout(lp.sql, id);
  expect(layout.blocks).toBeGreaterThan(TOTAL / BLOCK_EVENTS - 1);
  expect(layout.overlapping).toBe(0);

  const blocks = await lp.sql<BlockInfo[]>`
    select min_id::text as "minId", to_char(min_dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "minDt",
      to_char(max_dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "maxDt", n, filter_id::text as "filterId"
    from log_blocks where source_id = ${id} and generation is null`;
  const plan = planMerges(blocks, { blockEvents: BLOCK_EVENTS, maxEvents: 50_000, minBlocks: 2 });
  expect(plan.runs.map((run) => run.blocks.length)).toEqual([]);
}, 300_000);
