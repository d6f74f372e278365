// A seal reads a hot partition chunk by chunk (store/sealer.ts sealRows), and flushes writing at
// once interleave their batches, so what it reads is only roughly in time order: a chunk holds
// events of a source-day older than the newest of the chunk before. Built chunk by chunk, the
// blocks at each chunk's edge overlap, the day is one overlapping chain, and merges
// (store/merge-plan.ts) rewrite all of it. Here: a source-day's events sent with their times
// shuffled locally (each up to a minute off its place), enough of them that the seal reads several
// chunks; after the seal no block of the day may overlap another, each event is in one block, and
// the first merge pass finds nothing to rewrite.
// Then a stretch's newer half committed before its older half, each twice what the carry holds:
// two flush streams reserve their ids in either order, so a batch of older events can follow a
// batch of newer ones in ids and on disk. Read in the table's order, the dense source's blocks
// overlapped (26 of 45 here; in `bench/scale.ts --events 4000000 --seal-interval-ms 10000`, 1,069
// of 4,213); the seal reads the chunk journal by time, and none may.
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
/** Events in each half of the second test's stretch. */
const PIECE = 24_000;

let lp: TestLogpond;
let source: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource({ logs_retention: 3652 });
});

afterAll(async () => {
  await lp?.stop();
});

/** Event n of a stretch: one every 100 ms from `base`, moved by up to `jitterMs` either way. */
const event = (base: number, n: number, jitterMs: number, next: () => number) => ({
  dt: new Date(base + n * 100 + Math.round((next() * 2 - 1) * jitterMs)).toISOString(),
  n,
  pad: PAD,
});

/** Seals everything (the suite's database is shared: the pass seals other tests' closed generations too). */
async function sealAll(atLeast: number): Promise<void> {
  await lp.flusher.flush();
  const sealed = await lp.sealer.sealNow();
  expect(sealed.sealed).toBeGreaterThanOrEqual(atLeast);
}

/** The source's blocks hold each of its `total` events once, none left hot, and no two overlap in time. */
async function expectSealedApart(id: number, total: number): Promise<void> {
  const held = await tiers(lp.sql, id);
  expect(held).toMatchObject({ hot: 0, sealed: total, distinctIds: total, badBlocks: 0 });
  const layout = await blockLayout(lp.sql, id);
  expect(layout.blocks).toBeGreaterThan(total / BLOCK_EVENTS - 1);
  expect(layout.overlapping).toBe(0);
}

/**
 * The time logpond_newest_holding gives (store/sql/functions.sql; the query API's newest page cuts
 * a slice there) is a true bound: at least that many of the sources' events lie at or after it.
 * With 1,000-event chunks and blocks it gives one for every step the page asks for up to the
 * stretch's size (it may give none only when the newest chunks or blocks are small). `tier`: where
 * the events are when it is asked (named in a failure).
 */
async function expectNewestHolding(tier: "hot" | "sealed", sourceIds: number[]): Promise<void> {
  for (const events of [101, 1_010, 10_100, 40_000, 101_000]) {
    const [row] = await lp.sql<{ dt: string | null; at_or_after: number }[]>`
      select h.dt::text as dt, (select count(*)::int from log_events e where e.source_id = any(${sourceIds}::bigint[]) and e.dt >= h.dt) as at_or_after
      from logpond_newest_holding(${sourceIds}::bigint[], 'infinity', ${events}) h`;
    if (events <= 40_000) expect({ tier, events, found: row!.dt !== null }).toEqual({ tier, events, found: true });
    else expect({ tier, events, dt: row!.dt }).toEqual({ tier, events, dt: null });
    if (row!.dt !== null) expect(row!.at_or_after).toBeGreaterThanOrEqual(events);
  }
}

test("a seal of events slightly out of time order builds blocks of the day that do not overlap", async () => {
  const next = rng(32); // the same shuffle every run
  for (let from = 0; from < TOTAL; from += 4_000) {
    const events = [];
    for (let n = from; n < Math.min(TOTAL, from + 4_000); n++) events.push(event(BASE, n, JITTER_MS, next));
    expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  }
  await sealAll(TOTAL);
  const id = Number(source.id);
  await expectSealedApart(id, TOTAL);

  const blocks = await lp.sql<BlockInfo[]>`
    select min_id::text as "minId", to_char(min_dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "minDt",
      to_char(max_dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "maxDt", n, filter_id::text as "filterId"
    from log_blocks where source_id = ${id} and generation is null`;
  const plan = planMerges(blocks, { blockEvents: BLOCK_EVENTS, maxEvents: 50_000, minBlocks: 2 });
  expect(plan.runs.map((run) => run.blocks.length)).toEqual([]);
}, 300_000);

test("a seal of a stretch whose older half was committed after its newer half builds blocks that do not overlap", async () => {
  // Three sources, as bench/scale.ts sends them: of every 100 events, 90, 9 and 1, a request per
  // source for each 1,000 of the stream; each event up to 4 minutes (2,400 events) off its place.
  const sources: TestSource[] = [];
  for (let i = 0; i < 3; i++) sources.push(await lp.createSource({ logs_retention: 3652 }));
  const next = rng(33);
  const base = Date.parse("2025-06-04T01:00:00.000Z");
  const sent = [0, 0, 0];
  const sendPiece = async (from: number, to: number) => {
    for (let start = from; start < to; start += 1_000) {
      const bodies: object[][] = [[], [], []];
      for (let n = start; n < Math.min(to, start + 1_000); n++) bodies[n % 100 < 90 ? 0 : n % 100 < 99 ? 1 : 2]!.push(event(base, n, 240_000, next));
      for (const [i, events] of bodies.entries()) {
        expect((await lp.ingest(sources[i]!.token, JSON.stringify(events))).status).toBe(202);
        sent[i]! += events.length;
      }
    }
  };
  // The newer half (about 17 MB of text, twice what the carry holds) first, then the older.
  await sendPiece(PIECE, 2 * PIECE);
  await sendPiece(0, PIECE);
  // A 202 is taken before the write (buffered mode): what follows reads the stored ids.
  await lp.flusher.flush();
  const [ids] = await lp.sql<{ newer: string; older: string }[]>`
    select max(id) filter (where (raw->>'n')::int >= ${PIECE})::text as newer, min(id) filter (where (raw->>'n')::int < ${PIECE})::text as older
    from log_events where source_id = ${sources[0]!.id}`;
  expect(BigInt(ids!.newer)).toBeLessThan(BigInt(ids!.older));
  const sourceIds = sources.map((s) => Number(s.id));
  await expectNewestHolding("hot", sourceIds);
  await sealAll(2 * PIECE);
  for (const [i, s] of sources.entries()) await expectSealedApart(Number(s.id), sent[i]!);
  await expectNewestHolding("sealed", sourceIds);
}, 300_000);
