// The memory path with several seal threads (store/seal-pool.ts route, store/staging.ts): each
// (source, UTC day) is built by one thread, so a generation's blocks of a source-day arriving in
// time order do not overlap in time, whichever batches brought them; every event is stored once.
// And the builders' byte bound (SEAL_BUILDERS_MAX_BYTES): many sources past it are cut early
// into more, smaller blocks, every event kept.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { blockLayout, tiers } from "../helpers/sealing";

let db: ScratchDatabase;
beforeAll(async () => {
  db = await createScratchDatabase("seal_route");
  await runMigrations(db.url);
});
afterAll(async () => {
  await db.drop();
});

/** Yesterday (UTC), 02:00: every event of a test falls in that one day. */
const DAY_START = (Math.floor(Date.now() / 86_400_000) - 1) * 86_400_000 + 2 * 3_600_000;

/** `count` events of `source` from `from` on, a second apart, as one NDJSON request. */
async function ingest(lp: TestLogpond, source: TestSource, from: number, count: number, pad = ""): Promise<void> {
  const lines: string[] = [];
  for (let i = 0; i < count; i++) lines.push(JSON.stringify({ dt: new Date(from + i * 1_000).toISOString(), message: `event ${i} of ${source.id}${pad}`, i }));
  const response = await lp.ingest(source.token, lines.join("\n"), { "content-type": "application/x-ndjson" });
  expect(response.status).toBe(202);
}

async function events(sourceId: string): Promise<number> {
  return Number((await db.sql<{ n: string }[]>`select count(*)::text as n from log_events where source_id = ${Number(sourceId)}`)[0]!.n);
}

test("with 3 seal threads, a source-day's events brought by many batches (each with several sources) make blocks that do not overlap in time; each event stored once", async () => {
  // No merge: what is checked is what the seal made.
  const lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000", SEAL_FROM: "memory", SEAL_WORKERS: "3", MERGE_INTERVAL_MS: "0" });
  try {
    const sources = await Promise.all([1, 2, 3, 4, 5].map(() => lp.createSource()));
    const rounds = 12;
    const perRound = 150;
    for (let round = 0; round < rounds; round++) {
      // One round's requests of every source land in one batch (or a few): each batch is split over the threads.
      await Promise.all(sources.map((source) => ingest(lp, source, DAY_START + round * perRound * 1_000, perRound)));
      await lp.flusher.flush();
    }
    const stats = await lp.sealer.sealNow();
    const total = sources.length * rounds * perRound;
    expect(stats.fromMemory).toBe(total); // nothing read back: every part of every batch was built
    expect(lp.sealer.pool.threads.size).toBeGreaterThan(1);
    for (const source of sources) {
      const layout = await blockLayout(db.sql as never, Number(source.id));
      const counts = await tiers(db.sql as never, Number(source.id));
      expect({ ...layout, sealed: counts.sealed, distinct: counts.distinctIds, bad: counts.badBlocks, events: await events(source.id) }).toEqual({
        blocks: 2, // 1,800 events: a block of 1,000 cut as they came, the rest at the seal
        overlapping: 0,
        hot: 0,
        sealed: rounds * perRound,
        distinct: rounds * perRound,
        bad: 0,
        events: rounds * perRound,
      });
    }
    expect(Number((await db.sql<{ n: string }[]>`select count(*)::text as n from log_blocks where generation is not null`)[0]!.n)).toBe(0);
  } finally {
    await lp.stop();
  }
}, 120_000);

test("past SEAL_BUILDERS_MAX_BYTES the biggest builders are cut early: many sources make more, smaller blocks, every event kept", async () => {
  const lp = await startTestLogpond({
    DATABASE_URL: db.url,
    SEAL_INTERVAL_MS: "600000",
    SEAL_FROM: "memory",
    SEAL_WORKERS: "2",
    MERGE_INTERVAL_MS: "0",
    SEAL_BUILDERS_MAX_BYTES: String(64 * 1024),
  });
  try {
    const sources = await Promise.all(Array.from({ length: 40 }, () => lp.createSource()));
    const perSource = 120;
    // ~200 characters an event: 40 × 120 of them hold ~2.9 MB of the builders' measure, 45 × the bound.
    const pad = " ".repeat(150);
    for (let round = 0; round < 4; round++) {
      await Promise.all(sources.map((source) => ingest(lp, source, DAY_START + round * 30_000, perSource / 4, pad)));
      await lp.flusher.flush();
    }
    const stats = await lp.sealer.sealNow();
    expect(stats.fromMemory).toBe(sources.length * perSource);
    const [blocks] = await db.sql<{ blocks: number; biggest: number; sources: number }[]>`
      select count(*)::int as blocks, max(n)::int as biggest, count(distinct source_id)::int as sources from log_blocks
      where source_id = any(${sources.map((source) => Number(source.id))}::bigint[]) and generation is null`;
    // Unbounded, each source-day would be one block of 120 events.
    expect(blocks!.sources).toBe(sources.length);
    expect(blocks!.blocks).toBeGreaterThan(2 * sources.length);
    expect(blocks!.biggest).toBeLessThan(perSource);
    for (const source of sources) {
      const counts = await tiers(db.sql as never, Number(source.id));
      expect([counts.hot, counts.sealed, counts.distinctIds, counts.badBlocks]).toEqual([0, perSource, perSource, 0]);
    }
  } finally {
    await lp.stop();
  }
}, 120_000);
