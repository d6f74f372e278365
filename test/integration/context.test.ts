// GET /api/v2/query/context: a source's events around one event, in (dt, id) order, from hot rows
// and sealed blocks alike, compared with what PostgreSQL holds; exactly once while the sealer moves
// the rows under the reads; across a gap of days; the links to more on each side; every refusal;
// and read tokens (a source they may not see is absent).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CONTEXT_MAX } from "../../src/query/context";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { tiers } from "../helpers/sealing";
import { bearer, createReadToken } from "../helpers/tokens";
import { waitFor } from "../helpers/wait";

interface Answer {
  data: { id: string; dt: string; source_id: string; n: number }[];
  pagination: { before: string | null; after: string | null };
  meta: { anchor_id: string; anchor_index: number };
}

/** Events of a fixed stretch of 2025: the longest retention keeps their time as sent (codec/reception.ts). */
const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const at = (ms: number) => new Date(ms).toISOString();

async function contextOf(lp: TestLogpond, params: Record<string, string | number>, headers: Record<string, string> = {}) {
  const query = new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)] as [string, string]));
  const response = await lp.api("GET", `/api/v2/query/context?${query}`, undefined, headers);
  return { status: response.status, body: (await response.json()) as any };
}

/** The source's events as PostgreSQL orders them by (dt, id): n, id and dt text (µs). ORDER BY names the table's columns, not the text outputs. */
async function ordered(lp: TestLogpond, source: TestSource): Promise<{ n: number; id: string; dt: string }[]> {
  await lp.flusher.flush();
  return lp.sql<{ n: number; id: string; dt: string }[]>`
    select (raw->>'n')::int as n, id::text as id, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt
    from log_events e where source_id = ${Number(source.id)} order by e.dt, e.id`;
}

/** What context must answer around position `k` of `all`. */
function expected(all: { n: number; id: string }[], k: number, before: number, after: number) {
  return all.slice(Math.max(0, k - before), k + after + 1).map((e) => e.n);
}

describe("around hot rows and sealed blocks", () => {
  let lp: TestLogpond;
  let source: TestSource;
  let other: TestSource;
  let all: { n: number; id: string; dt: string }[];
  beforeAll(async () => {
    lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
    source = await lp.createSource({ logs_retention: 3652 });
    other = await lp.createSource({ logs_retention: 3652 });
    // n 0–299 one second apart, except n 100–104, which share one dt (ordered by id); sent newest
    // first in each request, so ids do not follow dt. The other source has events at the same times.
    const dtOf = (n: number) => at(BASE + (n >= 100 && n <= 104 ? 100 : n) * 1000);
    const send = async (target: TestSource, from: number, to: number) => {
      const events = [];
      for (let n = to - 1; n >= from; n--) events.push({ dt: dtOf(n), n, message: `event ${n}` });
      expect((await lp.ingest(target.token, JSON.stringify(events))).status).toBe(202);
    };
    await send(source, 0, 200);
    await send(other, 0, 300);
    await lp.flusher.flush();
    await lp.sealer.sealNow();
    await send(source, 200, 300);
    all = await ordered(lp, source);
  });
  afterAll(async () => {
    await lp.stop();
  });

  test("the tiers are as the test means them: 0–199 sealed, 200–299 hot", async () => {
    expect(all).toHaveLength(300);
    expect(await tiers(lp.sql, Number(source.id))).toMatchObject({ hot: 100, sealed: 200, distinctIds: 300, badBlocks: 0 });
  });

  test.each([
    ["inside the blocks", 50, 10, 10],
    ["among events that share a dt", 102, 3, 3],
    ["across the tiers' edge", 199, 20, 20],
    ["in the hot rows", 250, 5, 7],
    ["the first event", 0, 50, 3],
    ["the last event", 299, 4, 50],
    ["nothing on either side", 150, 0, 0],
    ["the whole source", 150, CONTEXT_MAX, CONTEXT_MAX],
  ])("%s: with and without dt, the rows PostgreSQL orders around it", async (_, n, before, after) => {
    const k = all.findIndex((e) => e.n === n);
    const anchor = all[k]!;
    for (const withDt of [false, true]) {
      const params = { source_id: source.id, id: anchor.id, before, after, ...(withDt ? { dt: anchor.dt } : {}) };
      const { status, body } = (await contextOf(lp, params)) as { status: number; body: Answer };
      expect(status).toBe(200);
      expect(body.data.map((row) => row.n)).toEqual(expected(all, k, before, after));
      expect(body.meta).toEqual({ anchor_id: anchor.id, anchor_index: Math.min(k, before) });
      expect(body.data[body.meta.anchor_index]!).toMatchObject({ id: anchor.id, dt: anchor.dt, source_id: source.id });
      expect(body.pagination.before === null).toBe(k - before <= 0);
      expect(body.pagination.after === null).toBe(k + after >= all.length - 1);
    }
  });

  test("before and after default to 50", async () => {
    const k = 120;
    const { body } = await contextOf(lp, { source_id: source.id, id: all[k]!.id });
    expect(body.data.map((row: { n: number }) => row.n)).toEqual(expected(all, k, 50, 50));
  });

  test("following pagination.before and .after reaches every event of the source once", async () => {
    const k = 180;
    const seen: number[] = [];
    let { body } = (await contextOf(lp, { source_id: source.id, id: all[k]!.id, before: 30, after: 30 })) as { body: Answer };
    seen.push(...body.data.map((row) => row.n));
    const follow = async (link: string | null, side: "before" | "after") => {
      while (link) {
        const page = (await (await lp.api("GET", new URL(link).pathname + new URL(link).search)).json()) as Answer;
        // Each page is the context of the edge row: that row again, and what lies beyond it.
        const rows = page.data.map((row) => row.n);
        if (side === "before") {
          expect(rows.at(-1)).toBe(seen[0]);
          seen.unshift(...rows.slice(0, -1));
        } else {
          expect(rows[0]).toBe(seen.at(-1));
          seen.push(...rows.slice(1));
        }
        link = page.pagination[side];
      }
    };
    const first = body;
    await follow(first.pagination.before, "before");
    await follow(first.pagination.after, "after");
    expect(seen).toEqual(all.map((e) => e.n));
  });

  test("refusals: 400 naming the parameter, 404 for an event this source does not have", async () => {
    const id = all[10]!.id;
    const cases: [Record<string, string | number>, number, RegExp][] = [
      [{ id }, 400, /source_id is required/],
      [{ source_id: source.id }, 400, /id is required/],
      [{ source_id: source.id, id: "abc" }, 400, /id must be an event id/],
      [{ source_id: source.id, id: "-5" }, 400, /id must be an event id/],
      [{ source_id: source.id, id: "99999999999999999999" }, 400, /id must be an event id/],
      [{ source_id: source.id, id, dt: "yesterday" }, 400, /dt must be the event's dt/],
      [{ source_id: source.id, id, before: CONTEXT_MAX + 1 }, 400, /before must be a whole number from 0 to 500/],
      [{ source_id: source.id, id, after: "-1" }, 400, /after must be a whole number/],
      [{ source_id: source.id, id, after: "ten" }, 400, /after must be a whole number/],
      [{ source_id: source.id, id: "9223372036854775807" }, 404, /Event 9223372036854775807 was not found in source/],
      [{ source_id: other.id, id }, 404, /was not found in source/],
      [{ source_id: source.id, id, dt: at(BASE + 11_000) }, 404, /at dt/],
      // Half a second before its own dt, nothing between: the block that spans it may hold the id,
      // and the first row at or after (dt, id) is the event itself, but at another dt.
      [{ source_id: source.id, id, dt: at(BASE + 9_500) }, 404, /at dt/],
      [{ source_id: source.id, id: all[250]!.id, dt: at(BASE + 249_500) }, 404, /at dt/],
      [{ source_id: "999999999", id }, 404, /Source 999999999 was not found/],
      [{ source_id: "twelve", id }, 404, /Source twelve was not found/],
    ];
    for (const [params, status, message] of cases) {
      const { status: seen, body } = await contextOf(lp, params);
      expect([params, seen]).toEqual([params, status]);
      expect(body.errors).toMatch(message);
    }
  });

  test("read tokens: any reads; one limited to other sources gets 404 as if the source were absent", async () => {
    const anchor = all[20]!;
    const read = await createReadToken(lp);
    const mine = await createReadToken(lp, [source.id]);
    const others = await createReadToken(lp, [other.id]);
    for (const token of [read, mine]) expect((await contextOf(lp, { source_id: source.id, id: anchor.id }, bearer(token.secret))).status).toBe(200);
    const refused = await contextOf(lp, { source_id: source.id, id: anchor.id }, bearer(others.secret));
    expect(refused).toEqual({ status: 404, body: { errors: `Source ${source.id} was not found` } });
  });
});

describe("while the sealer moves the rows being read", () => {
  let db: ScratchDatabase;
  let lp: TestLogpond;
  beforeAll(async () => {
    db = await createScratchDatabase("context_reads");
    await runMigrations(db.url);
    lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "100" });
  });
  afterAll(async () => {
    await lp.stop();
    await db.drop();
  });

  test("every answer is exactly the neighbours committed, none twice, none missing", async () => {
    const source = await lp.createSource({ logs_retention: 3652 });
    const moved = lp.sealer.totals.moved;
    const ids = new Map<number, string>();
    let sent = 0;
    for (let round = 0; round < 40; round++) {
      const events = Array.from({ length: 50 }, (_, i) => ({ dt: at(BASE + (sent + i) * 1000), n: sent + i }));
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
      sent += 50;
      await lp.flusher.flush();
      if (round % 10 === 5) {
        // A seal between reads, for certain: the rows just read move into blocks before the next reads.
        const before = lp.sealer.totals.moved;
        await waitFor("the sealer to move rows", () => lp.sealer.totals.moved > before);
      }
      if (ids.size < sent) {
        for (const row of await db.sql<{ n: number; id: string }[]>`
          select (raw->>'n')::int as n, id::text as id from log_events where source_id = ${Number(source.id)}`)
          ids.set(row.n, row.id);
      }
      // Anchors old and new: their neighbourhoods lie in blocks, in hot rows, or across both.
      for (const n of [Math.floor(sent / 2), sent - 25, sent - 1]) {
        const { status, body } = (await contextOf(lp, { source_id: source.id, id: ids.get(n)!, before: 60, after: 60 })) as { status: number; body: Answer };
        expect(status).toBe(200);
        const want = [];
        for (let m = Math.max(0, n - 60); m <= Math.min(sent - 1, n + 60); m++) want.push(m);
        expect(body.data.map((row) => row.n)).toEqual(want);
      }
    }
    expect(lp.sealer.totals.moved).toBeGreaterThan(moved);
    expect((await tiers(db.sql, Number(source.id))).badBlocks).toBe(0);
  }, 60_000);
});

describe("across a gap", () => {
  let lp: TestLogpond;
  beforeAll(async () => {
    lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  });
  afterAll(async () => {
    await lp.stop();
  });

  test("neighbours days and weeks away are found, sealed or hot", async () => {
    const source = await lp.createSource({ logs_retention: 3652 });
    const DAY = 86_400_000;
    // 10 events 40 days back, 10 a week back (sealed), 10 now-ish (hot), 10 three weeks later (hot).
    const groups = [-40 * DAY, -7 * DAY, 0, 21 * DAY];
    const send = async (group: number) => {
      const events = Array.from({ length: 10 }, (_, i) => ({ dt: at(BASE + groups[group]! + i * 1000), n: group * 10 + i }));
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
    };
    await send(0);
    await send(1);
    await lp.flusher.flush();
    await lp.sealer.sealNow();
    await send(2);
    await send(3);
    const all = await ordered(lp, source);
    expect(all.map((e) => e.n)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    for (const [n, before, after] of [
      [20, 15, 15],
      [10, 5, 25],
      [29, 30, 30],
      [0, 0, 39],
      [39, 39, 0],
    ] as const) {
      const { status, body } = await contextOf(lp, { source_id: source.id, id: all[n]!.id, before, after });
      expect(status).toBe(200);
      expect(body.data.map((row: { n: number }) => row.n)).toEqual(expected(all, n, before, after));
    }
  });
});
