// A page without a query opens its v4 blocks in logpond (query/read.ts readDecoded,
// store/block-lines.ts), not in PostgreSQL: each part is compared with what PostgreSQL gives for
// the same bytes — a block's events with logpond_block_events, a row's text with
// `(line::jsonb || jsonb_build_object(…))::text` — and whole walks of pages, newest and oldest
// first, with random windows and batch sizes, with the order of log_events over overlapping
// blocks, v3 blocks, staged blocks and hot rows.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Block, buildBlocks, type MovedRow } from "../../src/store/blocks";
import { writeBlocks } from "../../src/store/blocks-sql";
import { blockLines } from "../../src/store/block-lines";
import { runMigrations } from "../../src/store/db";
import { pageRow, readEvents } from "../../src/query/read";
import type { ReadRequest } from "../../src/query/request";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";

const DT = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const SOURCE = 920_001;
const OTHER = 920_002;
const DAY = "2025-06-14";

let db: ScratchDatabase;
beforeAll(async () => {
  db = await createScratchDatabase("decoded_pages");
  await runMigrations(db.url);
});
afterAll(async () => {
  await db?.drop();
});

/** A seeded generator (mulberry32): the same cases every run. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ["dt", "id", "source_id", "a", "message", "level", "ž", "b c", '"q"', "x\\y", "é", "zz", "n"];
const STRINGS = ["", "plain", "line\nbreak", 'tab\tand "quotes"', "žluťoučký ✓", "\u0001", "😀", "back\\slash", "</script>"];
const NUMBERS = ["0", "-0", "1.50", "1e3", "-2.5E-3", "123456789012345678901234567890", "0.000001", "3"];

function value(next: () => number, depth: number): string {
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)]!;
  const r = next();
  if (depth < 2 && r < 0.15) return object(next, depth + 1);
  if (depth < 2 && r < 0.25) return `[${Array.from({ length: Math.floor(next() * 3) }, () => value(next, depth + 1)).join(",")}]`;
  if (r < 0.55) return JSON.stringify(pick(STRINGS));
  if (r < 0.85) return pick(NUMBERS);
  return pick(["true", "false", "null"]);
}

function object(next: () => number, depth: number): string {
  const count = Math.floor(next() * 6);
  const members = Array.from({ length: count }, () => `${JSON.stringify(KEYS[Math.floor(next() * KEYS.length)])}: ${value(next, depth)}`);
  return `{${members.join(",")}}`;
}

test("a row's text is PostgreSQL's: the event's own dt, source_id and id replaced, keys in jsonb's order, non-objects in an array", async () => {
  const next = rng(7);
  const sent = Array.from({ length: 400 }, (_, k) => (k % 10 === 0 ? value(next, 2) : k % 17 === 0 ? "{}" : object(next, 0)));
  sent.push("[]", '[1, {"a": 2}]', '"text"', "12", "null", "{}");
  const cases = sent.map((text, k) => ({
    text,
    dt: `${DAY}T10:00:${String(k % 60).padStart(2, "0")}.00000${k % 10}Z`,
    source: String(9 + k),
    id: String(10_000_000_000 + k),
  }));
  const expected = await db.sql<{ line: string; row: string }[]>`
    select c.text::jsonb::text as line,
      (c.text::jsonb || jsonb_build_object('dt', c.dt, 'source_id', c.source, 'id', c.id))::text as row
    from jsonb_to_recordset(${db.sql.json(cases as never)}) as c(text text, dt text, source text, id text)`;
  const ours = expected.map((row, k) => pageRow(row.line, cases[k]!.dt, cases[k]!.source, cases[k]!.id));
  expect(ours).toEqual(expected.map((row) => row.row));
});

/** Rows as the sealer reads them: jsonb's text, random times of `day` (out of id order). */
function moved(next: () => number, sourceId: number, ids: number[], day: string, span: [number, number]): MovedRow[] {
  return ids.map((id) => {
    const micros = Math.floor(span[0] + next() * (span[1] - span[0]));
    const dt = `${day}T${new Date(Math.floor(micros / 1000)).toISOString().slice(11, 23)}${String(micros % 1000).padStart(3, "0")}Z`;
    const level = id % 3 === 0 ? "error" : "info";
    return {
      id: String(id),
      source_id: String(sourceId),
      dt,
      line: `{"k": ${id}, "level": "${level}", "message": "event ${id}"}`,
      shape: "k,level,message",
      level,
    };
  });
}

let everything: { id: string; dt: string }[] = [];

test("a block's events decoded in logpond are logpond_block_events' in PostgreSQL, ids, times (every year) and lines", async () => {
  const next = rng(11);
  const items: ReturnType<typeof buildBlocks> = [];
  let id = 1_000;
  const ids = (count: number) => Array.from({ length: count }, () => (id += 1 + Math.floor(next() * 3)));
  // Overlapping groups of one day (each buildBlocks call cuts its own even blocks), a few events
  // at the day's first and last microsecond, another source, and the years' ends.
  for (const [count, span] of [
    [2_500, [0, 86_400_000_000]],
    [1_300, [36_000_000_000, 40_000_000_000]],
    [700, [38_000_000_000, 38_500_000_000]],
    [5, [0, 1]],
    [5, [86_399_999_999, 86_400_000_000]],
  ] as const) {
    items.push(...buildBlocks(moved(next, SOURCE, ids(count), DAY, [span[0], span[1]]), 1_000));
  }
  items.push(...buildBlocks(moved(next, OTHER, ids(900), DAY, [0, 86_400_000_000]), 1_000));
  items.push(...buildBlocks(moved(next, OTHER, ids(20), "0001-01-01", [0, 86_400_000_000]), 1_000));
  items.push(...buildBlocks(moved(next, OTHER, ids(20), "9999-12-31", [0, 86_400_000_000]), 1_000));
  await writeBlocks(db.sql as never, items);
  expect(items.filter((item): item is Block => item.kind === "block").length).toBeGreaterThan(8);

  const stored = await db.sql.unsafe<{ min_id: string; min_dt: string; payload: Uint8Array }[]>(
    `select min_id::text as min_id, ${DT("min_dt")} as min_dt, payload from log_blocks where payload is not null order by min_id`,
  );
  const inPostgres = await db.sql.unsafe<{ block: string; id: string; dt: string; line: string }[]>(
    `select b.min_id::text as block, e.id::text as id, ${DT("e.dt")} as dt, e.line from log_blocks b
     cross join lateral logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e where b.payload is not null order by b.min_id, e.id`,
  );
  const ours = stored.flatMap((block) => blockLines(block.payload, block.min_id, block.min_dt).map((event) => ({ block: block.min_id, ...event })));
  const byBlockAndId = (a: { block: string; id: string }, b: { block: string; id: string }) => Number(a.block) - Number(b.block) || Number(a.id) - Number(b.id);
  expect(ours.sort(byBlockAndId)).toEqual([...inPostgres]);
  expect(ours.length).toBe(2_500 + 1_300 + 700 + 10 + 900 + 40);
});

test("pages without a query, newest and oldest first, walked with random windows and batches: every event of log_events once, in (dt, id) order", async () => {
  const next = rng(23);
  // Beside the blocks above: hot rows of the same day (some at the same times as sealed events),
  // a v3 block, and a staged copy of one block (read by nobody until its generation is sealed).
  const hot = moved(
    next,
    SOURCE,
    Array.from({ length: 300 }, (_, k) => 900_000 + k),
    DAY,
    [0, 86_400_000_000],
  );
  const [sameTime] = await db.sql<
    { dt: string }[]
  >`select ${db.sql.unsafe(DT("min_dt"))} as dt from log_blocks where source_id = ${SOURCE} order by min_id limit 1`;
  hot[0]!.dt = sameTime!.dt;
  hot[1]!.dt = sameTime!.dt;
  for (const row of hot)
    await db.sql`insert into log_hot (id, source_id, dt, raw) values (${row.id}, ${SOURCE}, ${row.dt}::text::timestamptz, ${row.line}::text::jsonb)`;
  const v3 = moved(
    next,
    SOURCE,
    Array.from({ length: 60 }, (_, k) => 950_000 + k),
    DAY,
    [43_000_000_000, 45_000_000_000],
  ).sort((a, b) => (a.dt < b.dt ? -1 : 1));
  await db.sql`insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, ids, dts, body, hist_minutes, hist_levels, hist_counts)
    values (${SOURCE}, ${v3[0]!.dt}::text::timestamptz, ${v3.at(-1)!.dt}::text::timestamptz, 950000, 950059, ${v3.length},
      ${`{${v3.map((row) => row.id).join(",")}}`}::text::bigint[], ${`{${v3.map((row) => row.dt).join(",")}}`}::text::timestamptz[], ${v3.map((row) => row.line).join("\n")},
      ${`{${[...new Set(v3.map((row) => Math.floor(Date.parse(row.dt) / 60_000)))].join(",")}}`}::text::bigint[], '{}', '{}')`;
  await db.sql`insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, payload, hist_minutes, hist_levels, hist_counts, generation)
    select source_id, min_dt, max_dt, min_id + 5000000, max_id + 5000000, n, payload, hist_minutes, hist_levels, hist_counts, 777
    from log_blocks where source_id = ${SOURCE} and payload is not null order by min_id limit 1`;

  everything = await db.sql.unsafe<{ id: string; dt: string }[]>(
    `select id::text as id, ${DT("dt")} as dt from log_events where source_id = ${SOURCE} order by dt, id`,
  );
  expect(everything.length).toBe(2_500 + 1_300 + 700 + 10 + 300 + 60);

  for (let walk = 0; walk < 24; walk++) {
    const newest = walk % 2 === 0;
    // A window of the day (or all of it), cut at a random microsecond.
    const at = (fraction: number) =>
      new Date(Date.parse(`${DAY}T00:00:00Z`) + Math.floor(fraction * 86_400_000)).toISOString().replace(
        "Z",
        `${Math.floor(next() * 1000)
          .toString()
          .padStart(3, "0")}Z`,
      );
    const [a, b] = walk < 4 ? [0, 1.0000001] : [next(), next()].sort();
    const from = walk < 4 ? `${DAY}T00:00:00.000000Z` : at(a!);
    const to = walk < 4 ? `${DAY}T23:59:59.999999Z` : at(b!);
    const expected = everything.filter((row) => row.dt >= from && row.dt <= to).map((row) => row.id);
    // Small batches over windows of a few hundred events; at most ~100 pages a walk.
    const batch = Math.max([1, 7, 100, 999, 1000][walk % 5]!, Math.ceil(expected.length / 100));
    if (newest) expected.reverse();
    const seen: string[] = [];
    let after: ReadRequest["after"];
    for (let pages = 0; pages < 20_000; pages++) {
      const request: ReadRequest = {
        sourceIds: [SOURCE],
        given: new URLSearchParams(),
        query: undefined,
        batch,
        order: newest ? "newest_first" : "oldest_first",
        from,
        to,
        after,
        binding: "",
      };
      const page = await readEvents(db.sql as never, request, 60_000);
      const rows = page.rows.map((row) => JSON.parse(row) as { id: string; dt: string; source_id: string });
      expect(rows.filter((row) => row.source_id !== String(SOURCE)).slice(0, 3)).toEqual([]);
      seen.push(...rows.map((row) => row.id));
      if (!page.next) break;
      after = page.next;
    }
    expect({ walk, from, to, batch, seen }).toEqual({ walk, from, to, batch, seen: expected });
  }
}, 240_000);
