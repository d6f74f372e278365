// Reads stay exactly-once while rows move from the hot tier into blocks under them (docs/storage-v3.md):
// the live tail's resume (Last-Event-ID) when the rows after the resume point, or the point itself,
// were sealed while the client was away, and a client that disconnects and resumes again and again
// while ingestion and the sealer run; the query API's keyset cursor walked newest_first and
// oldest_first while the sealer closes and seals a generation every 100 ms under concurrent ingest.
// Real HTTP, a database of the file's own; waits are on conditions (their deadlines only end a wait
// that would hang), and each test makes sure moves did happen while it read.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { tiers } from "../helpers/sealing";
import { SseReader } from "../helpers/sse";
import { waitFor } from "../helpers/wait";

const STREAM = "/api/v2/query/live-tail/stream";
let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("sealing_reads");
  await runMigrations(db.url);
  lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "100", TAIL_HEARTBEAT_MS: "200" });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

/** Until the sealer has finished a pass that moved rows, after this call. */
async function sealerMoves(): Promise<void> {
  const moved = lp.sealer.totals.moved;
  await waitFor("the sealer to move rows", () => lp.sealer.totals.moved > moved);
}

async function send(source: TestSource, events: unknown[]): Promise<void> {
  const response = await lp.ingest(source.token, JSON.stringify(events));
  expect(response.status).toBe(202);
}

describe("live tail: resume while rows move between tiers", () => {
  const numbered = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ n: from + i }));
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
  const sorted = (ns: number[]) => [...ns].sort((a, b) => a - b);

  async function open(sourceId: string, lastEventId?: string): Promise<SseReader> {
    const response = await lp.api("GET", `${STREAM}?source_ids=${sourceId}`, undefined, lastEventId === undefined ? {} : { "last-event-id": lastEventId });
    expect(response.status).toBe(200);
    return new SseReader(response);
  }
  const messages = (stream: SseReader) => stream.events.filter((e) => e.event === "message");
  /** Stream ids (seq-id) strictly increasing. */
  function expectIncreasing(ids: string[]): void {
    const key = (id: string) => id.split("-").map(BigInt) as [bigint, bigint];
    for (let i = 1; i < ids.length; i++) {
      const [s0, i0] = key(ids[i - 1]!),
        [s1, i1] = key(ids[i]!);
      if (!(s1 > s0 || (s1 === s0 && i1 > i0))) throw new Error(`event ${ids[i]} came after ${ids[i - 1]}`);
    }
  }
  /** Sends `n` as the last row and reads until it arrives: any row sent twice before it is in the stream by then. */
  async function through(stream: SseReader, source: TestSource, n: number): Promise<void> {
    await send(source, numbered(n, 1));
    await stream.until(() => stream.rows().some((row) => row.n === n), 20_000, `row ${n}`);
  }

  test("the rows after the resume point (and the point) were sealed while the client was away: each later row once, in order", async () => {
    const source = await lp.createSource();
    const first = await open(source.id);
    for (let i = 0; i < 6; i++) await send(source, numbered(i * 50, 50));
    await first.until(() => first.rows().length >= 300, 20_000, "the first 300 rows");
    const cut = messages(first)[149]!;
    await first.close();
    const before = first
      .rows()
      .slice(0, 150)
      .map((row) => row.n);

    for (let i = 6; i < 12; i++) await send(source, numbered(i * 50, 50)); // while away
    await lp.flusher.flush();
    await lp.sealer.sealNow();
    // Every row of the source is in blocks now: the resume point, what the client saw after it, and what it never saw.
    expect(await tiers(db.sql, Number(source.id))).toMatchObject({ hot: 0, sealed: 600, distinctIds: 600, badBlocks: 0 });

    const resumed = await open(source.id, cut.id);
    try {
      for (let i = 12; i < 14; i++) await send(source, numbered(i * 50, 50)); // live, while it catches up
      await through(resumed, source, 700);
      // Stream order is commit order (two flush streams may commit out of n's order): the rows up to
      // the cut and the rows after it together are every row, once.
      expect(sorted([...before, ...resumed.rows().map((row) => row.n)])).toEqual(range(0, 701));
      expectIncreasing([cut.id!, ...messages(resumed).map((e) => e.id!)]);
      expect(resumed.dropped()).toBe(0);
    } finally {
      await resumed.close();
    }
  }, 60_000);

  test("a resume point inside a sealed block, later rows in both tiers: the rest once, in order", async () => {
    const source = await lp.createSource();
    for (let i = 0; i < 10; i++) await send(source, numbered(i * 50, 50));
    await lp.flusher.flush();
    await lp.sealer.sealNow();
    expect(await tiers(db.sql, Number(source.id))).toMatchObject({ hot: 0, sealed: 500 });

    // A replay from the start reads every row back from blocks, with the positions a client keeps.
    const replay = await open(source.id, "0-0");
    await replay.until(() => replay.rows().length >= 500, 20_000, "the replay from blocks");
    expect(sorted(replay.rows().map((row) => row.n))).toEqual(range(0, 500));
    expectIncreasing(messages(replay).map((e) => e.id!));
    const cut = messages(replay)[224]!;
    await replay.close();
    const before = replay
      .rows()
      .slice(0, 225)
      .map((row) => row.n);

    for (let i = 10; i < 14; i++) await send(source, numbered(i * 50, 50)); // hot, until the sealer takes them
    await lp.flusher.flush();
    const resumed = await open(source.id, cut.id);
    try {
      await through(resumed, source, 700);
      expect(sorted([...before, ...resumed.rows().map((row) => row.n)])).toEqual(range(0, 701));
      expectIncreasing([cut.id!, ...messages(resumed).map((e) => e.id!)]);
    } finally {
      await resumed.close();
    }
  }, 60_000);

  test("disconnecting and resuming again and again while ingestion and the sealer run: every row once, in order", async () => {
    const source = await lp.createSource();
    let sent = 0;
    const sendRows = async (count: number) => {
      for (let i = 0; i < count; i += 50) await send(source, numbered(sent + i, Math.min(50, count - i)));
      sent += count;
      await lp.flusher.flush();
    };
    const seen: number[] = [];
    const ids: string[] = [];
    // While away: rows that are all sealed before the client comes back, then rows that are hot
    // (unless the 100 ms timer takes them first). 1,800 rows make a catch-up of more than one page.
    const away: [sealed: number, hot: number][] = [
      [150, 150],
      [150, 150],
      [1_800, 300],
      [150, 150],
      [150, 150],
    ];
    let stream = await open(source.id); // live: opened before the first row is sent
    for (const [sealed, hot] of away) {
      // Connected: what was missed comes back, 100 more rows arrive live, and the client leaves mid-way.
      const pending = sent - seen.length;
      await sendRows(100);
      try {
        await stream.until(() => stream.rows().length >= pending + 50, 20_000, `${pending + 50} rows`);
      } finally {
        await stream.close();
      }
      seen.push(...stream.rows().map((row) => row.n));
      ids.push(...messages(stream).map((e) => e.id!));
      expect(stream.dropped()).toBe(0);

      await sendRows(sealed);
      await waitFor("every row of the source in blocks", async () => (await tiers(db.sql, Number(source.id))).hot === 0);
      await sendRows(hot);
      stream = await open(source.id, stream.position);
    }
    try {
      await through(stream, source, sent);
      seen.push(...stream.rows().map((row) => row.n));
      ids.push(...messages(stream).map((e) => e.id!));
    } finally {
      await stream.close();
    }
    expect(sorted(seen)).toEqual(range(0, sent + 1));
    expectIncreasing(ids);
  }, 60_000);
});

describe("query API: a keyset cursor walk while the sealer runs every 100 ms under concurrent ingest", () => {
  /** A small seeded generator (Math.imul: a plain product loses bits past 2^53). */
  function random(seed: number): () => number {
    let state = seed >>> 0;
    return () => {
      state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
      return state / 2 ** 32;
    };
  }

  interface Seen {
    id: string;
    dt: string;
    k: string;
  }

  for (const order of ["newest_first", "oldest_first"] as const) {
    test(`${order}: every row there before the walk, and every row committed ahead of the cursor, exactly once, in (dt, id) order`, async () => {
      const source = await lp.createSource();
      const next = random(order === "newest_first" ? 7 : 11);
      // 600 distinct seconds: many rows share a dt, so ties are broken by id, across the two tiers.
      const base = Math.floor(Date.now() / 1000) * 1000 - 60_000;
      const at = () => new Date(base - Math.floor(next() * 600) * 1000).toISOString();
      const from = new Date(base - 700_000).toISOString();
      const to = new Date(base + 1000).toISOString();
      for (let b = 0; b < 4; b++)
        await send(
          source,
          Array.from({ length: 500 }, (_, i) => ({ dt: at(), k: `p${b * 500 + i}`, pad: "x".repeat(Math.floor(next() * 200)) })),
        );
      await lp.flusher.flush();
      const blocksBefore = (await tiers(db.sql, Number(source.id))).blocks;

      // Concurrent ingest into the same window, each batch stamped once it is committed.
      const committedAt = new Map<string, number>();
      let walking = true;
      const ingesting = (async () => {
        for (let b = 0; walking; b++) {
          const batch = Array.from({ length: 10 }, (_, i) => ({ dt: at(), k: `c${b * 10 + i}` }));
          await send(source, batch);
          await lp.flusher.flush();
          const now = performance.now();
          for (const event of batch) committedAt.set(event.k, now);
        }
      })();

      const pages: { sentAt: number; rows: Seen[] }[] = [];
      let url = `/api/v2/query/live-tail?source_ids=${source.id}&batch=37&order=${order}&from=${from}&to=${to}`;
      try {
        for (;;) {
          // Every sixth page waits for the sealer to move rows again: moves interleave with the pages.
          if (pages.length % 6 === 5) await sealerMoves();
          const sentAt = performance.now();
          const response = await lp.api("GET", url);
          expect(response.status).toBe(200);
          const body = (await response.json()) as { data: Seen[]; pagination: { next: string | null } };
          pages.push({ sentAt, rows: body.data.map(({ id, dt, k }) => ({ id, dt, k })) });
          if (!body.pagination.next) break;
          const link = new URL(body.pagination.next);
          url = link.pathname + link.search;
        }
      } finally {
        walking = false;
        await ingesting;
      }
      await lp.flusher.flush();

      const seen = pages.flatMap((page) => page.rows);
      // Once each.
      expect(seen.length - new Set(seen.map((row) => row.id)).size).toBe(0);
      // In (dt, id) order.
      const after = (a: Seen, b: Seen) => a.dt > b.dt || (a.dt === b.dt && BigInt(a.id) > BigInt(b.id));
      const wrong = seen.findIndex((row, i) => i > 0 && !(order === "oldest_first" ? after(row, seen[i - 1]!) : after(seen[i - 1]!, row)));
      expect(wrong).toBe(-1);
      // Each row as stored (same id, dt, key), and every row that had to be seen was: those there
      // before the walk, and those committed before a page was asked for, beyond that page's cursor.
      const stored = await db.sql<Seen[]>`
        select id::text as id, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt, raw->>'k' as k
        from log_events where source_id = ${Number(source.id)}`;
      const byKey = new Map(stored.map((row) => [row.k, row]));
      expect(stored.length).toBe(byKey.size);
      expect(seen.filter((row) => JSON.stringify(byKey.get(row.k)) !== JSON.stringify(row))).toEqual([]);
      const seenKeys = new Set(seen.map((row) => row.k));
      const missed: string[] = [];
      for (const row of stored) {
        const committed = row.k.startsWith("p") ? -Infinity : committedAt.get(row.k);
        if (committed === undefined) continue;
        const p = pages.findIndex((page) => page.sentAt > committed);
        if (p < 0) continue; // committed after the last page was asked for
        const cursor = p === 0 ? undefined : pages[p - 1]!.rows.at(-1);
        const ahead = cursor === undefined || (order === "oldest_first" ? after(row, cursor) : after(cursor, row));
        if (ahead && !seenKeys.has(row.k)) missed.push(row.k);
      }
      expect(missed).toEqual([]);
      expect(seen.filter((row) => row.k.startsWith("p")).length).toBe(2_000);

      // The walk ran while rows of this source moved into blocks.
      const end = await tiers(db.sql, Number(source.id));
      console.log(
        `sealing-reads: ${order}: ${JSON.stringify({ pages: pages.length, seen: seen.length, concurrent: committedAt.size, blocksBefore, blocksAfter: end.blocks, hotAfter: end.hot })}`,
      );
      expect(pages.length).toBeGreaterThan(50);
      expect(end.blocks).toBeGreaterThan(blocksBefore);
      expect(end.hot + end.sealed).toBe(end.distinctIds);
    }, 60_000);
  }
});

describe("query API: long slices read as two halves at once, while the sealer runs", () => {
  for (const order of ["newest_first", "oldest_first"] as const) {
    test(`${order}: a rare match over 30 h walked 7 at a time, and every row 500 at a time: each once, in (dt, id) order`, async () => {
      const source = await lp.createSource();
      const base = Math.floor(Date.now() / 1000) * 1000 - 60_000;
      // 3,000 events 36 s apart (30 h), one in 50 tagged: a page of 7 tagged ones spans hours, so
      // it is read in slices of hours, as two halves each. Sent in three parts, seals after the first
      // two: blocks and hot rows both; the last part is moved (every 100 ms) while the walks run.
      const events = Array.from({ length: 3000 }, (_, i) => ({
        dt: new Date(base - i * 36_000).toISOString(),
        k: `e${i}`,
        ...(i % 50 === 7 ? { tag: "rare" } : {}),
      }));
      for (let part = 0; part < 3; part++) {
        await send(source, events.slice(part * 1000, (part + 1) * 1000));
        await lp.flusher.flush();
        if (part < 2) await sealerMoves();
      }
      const window = `from=${new Date(base - 31 * 3_600_000).toISOString()}&to=${new Date(base + 1000).toISOString()}`;
      const walk = async (query: string, batch: number) => {
        const seen: { id: string; dt: string; k: string }[] = [];
        let url = `/api/v2/query/live-tail?source_ids=${source.id}&batch=${batch}&order=${order}&${window}${query ? `&query=${encodeURIComponent(query)}` : ""}`;
        for (;;) {
          const response = await lp.api("GET", url);
          expect(response.status).toBe(200);
          const body = (await response.json()) as { data: { id: string; dt: string; k: string }[]; pagination: { next: string | null } };
          seen.push(...body.data);
          if (!body.pagination.next) return seen;
          const link = new URL(body.pagination.next);
          url = link.pathname + link.search;
        }
      };
      // dts are distinct: the order is the dts' order.
      const expected = (selected: typeof events) => (order === "newest_first" ? selected : [...selected].reverse()).map((event) => event.k);
      const rare = await walk("tag:rare", 7);
      expect(rare.map((row) => row.k)).toEqual(expected(events.filter((event) => event.tag === "rare")));
      const all = await walk("", 500);
      expect(all.map((row) => row.k)).toEqual(expected(events));
      expect(new Set(all.map((row) => row.id)).size).toBe(events.length);
      expect((await tiers(db.sql, Number(source.id))).sealed).toBeGreaterThan(0);
      // More searches at once than the pool has connections (8), each reading two halves at once:
      // every one answers (none holds a connection while it waits for a second one).
      const first = `/api/v2/query/live-tail?source_ids=${source.id}&batch=7&order=${order}&${window}&query=${encodeURIComponent("tag:rare")}`;
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => lp.api("GET", first).then(async (r) => [r.status, ((await r.json()) as any).data.length])),
      );
      expect(answers).toEqual(Array.from({ length: 12 }, () => [200, 7]));
    }, 60_000);
  }
});
