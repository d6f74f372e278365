// logpond_block_events_holding (src/store/sql/functions.sql): a search checks the needles on a
// block's whole opened text (its ids and times lines, then its events' lines) before splitting it.
// Checked against a scan (logpond_events_between, no index, no needles) with the query API's own
// condition (query/sql.ts on `line`, as query/read.ts, histogram.ts, histogram-by.ts and
// aggregate.ts apply it), on blocks logpond builds (store/blocks.ts): needles at a line's start
// and end, in different lines of one block (the text holds both, no line does), spanning a line
// break, case folded, LIKE's own characters and backslashes, regexes, numbers and fields; and on
// a v3 block (a text body, no payload).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { parseQuery } from "../../src/query/parse";
import { tiers } from "../../src/query/read";
import { compileQuery } from "../../src/query/sql";
import { type MovedRow, buildBlocks } from "../../src/store/blocks";
import { writeBlocks } from "../../src/store/blocks-sql";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";

let db: ScratchDatabase;
beforeAll(async () => {
  db = await createScratchDatabase("block_text_needles");
  await runMigrations(db.url);
});

afterAll(async () => {
  await db?.drop();
});

const SOURCE = 920_001;
const DAY = "2026-05-06";
/** Events as raw::text prints them; each block (of BLOCK events) gets some of them. */
const LINES = [
  `{"msg": "alpha start", "level": "info"}`,
  `{"msg": "omega end", "level": "warn"}`,
  `{"msg": "Percent 100% done_ok", "code": 42}`,
  `{"msg": "back\\\\slash and \\"quoted\\"", "n": 7.50}`,
  `{"path": "/api/v1/Users", "status": 500}`,
  `{"msg": "MiXeD CaSe Needle", "user": {"id": "u-17"}}`,
  `{"msg": "tail", "level": "error", "n": 3}`,
];
const BLOCK = 5;

function rows(): MovedRow[] {
  const out: MovedRow[] = [];
  for (let i = 0; i < 60; i++) {
    const line = LINES[(i * 3 + Math.floor(i / BLOCK)) % LINES.length]!;
    const raw = JSON.parse(line) as Record<string, unknown>;
    const micros = i * 1_000_003;
    const dt = `${DAY}T${new Date(micros / 1000).toISOString().slice(11, 23)}${String(micros % 1000).padStart(3, "0")}Z`;
    const level = typeof raw.level === "string" ? raw.level : null;
    out.push({ id: String(1_000 + i), source_id: String(SOURCE), dt, line, shape: Object.keys(raw).sort().join(","), level });
  }
  return out;
}

const QUERIES = [
  // One needle at a line's start (`{"msg`), one at its end (`}`-adjacent values).
  `/^\\{"msg/`,
  `info`,
  `/"warn"\\}$/`,
  // Two needles that lie in different lines of one block: the text holds both, no line does.
  `alpha omega`,
  `alpha AND tail`,
  // A needle across a line break: only the text could hold it.
  `/"info"\\}\\n\\{"msg/`,
  `/start.*end/`,
  // Case, LIKE's characters, backslashes and quotes.
  `needle`,
  `NEEDLE case`,
  `"100%"`,
  `done_ok`,
  `"back\\\\slash"`,
  `"\\"quoted\\""`,
  `/api\\/v1\\/Users/`,
  `/api\\/v1\\/users/`,
  `/Users/`,
  // Fields, numbers, levels, existence.
  `status=500`,
  `code=42`,
  `n=7.5`,
  `n=3`,
  `user.id:u-17`,
  `user.id:*`,
  `level:error`,
  `level:warn msg:omega`,
  `msg:alpha -level:warn`,
  `alpha OR omega`,
];

test("a search returns the lines a scan does, whatever lines of a block its needles are in", async () => {
  const moved = rows();
  const items = buildBlocks(moved, BLOCK);
  expect(items.filter((item) => item.kind === "filter").length).toBeGreaterThan(0);
  await writeBlocks(db.sql as never, items);
  // A v3 block beside them (body, ids, dts; no payload), of the same lines.
  const old = LINES.map((line, i) => ({ id: 5_000 + i, dt: `${DAY}T12:00:00.00000${i}Z`, line }));
  await db.sql`insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, ids, dts, body, hist_minutes, hist_levels, hist_counts)
    values (${SOURCE}, ${old[0]!.dt}::timestamptz, ${old.at(-1)!.dt}::timestamptz, ${old[0]!.id}, ${old.at(-1)!.id}, ${old.length},
      ${`{${old.map((row) => row.id).join(",")}}`}::text::bigint[], ${`{${old.map((row) => row.dt).join(",")}}`}::text::timestamptz[],
      ${old.map((row) => row.line).join("\n")}, '{}', '{}', '{}')`;
  const [counts] =
    await db.sql`select count(*) filter (where payload is not null and filter_id is not null)::int as v4, count(*) filter (where body is not null)::int as v3
    from log_blocks where source_id = ${SOURCE}`;
  expect(counts).toEqual({ v4: Math.ceil(moved.length / BLOCK), v3: 1 });

  const found: Record<string, number> = {};
  for (const text of QUERIES) {
    const node = parseQuery(text)!;
    const read = async (indexed: boolean) => {
      const params: unknown[] = [`${DAY}T00:00:00Z`, `${DAY}T23:59:59.999999Z`, [SOURCE]];
      const condition = compileQuery(node, params.length + 1, "line");
      params.push(...condition.params);
      const events = indexed
        ? tiers(params, "$3::bigint[]", "$1::text::timestamptz", "$2::text::timestamptz", node)
        : "logpond_events_between($3::bigint[], $1::text::timestamptz, $2::text::timestamptz)";
      const rows = await db.sql.unsafe<{ id: string }[]>(
        `select id::text as id from ${events} where dt >= $1::text::timestamptz and dt <= $2::text::timestamptz and source_id = any($3::bigint[]) and ${condition.text} order by id`,
        params as never[],
      );
      return { events: events.split("(")[0], ids: rows.map((row) => row.id) };
    };
    const scan = await read(false);
    const search = await read(true);
    expect({ text, ids: search.ids }).toEqual({ text, ids: scan.ids });
    if (text !== "alpha OR omega") expect({ text, events: search.events }).toEqual({ text, events: "logpond_events_matching" });
    found[text] = scan.ids.length;
  }
  // The queries whose needles only the whole text holds find nothing, the others something.
  expect(QUERIES.filter((text) => found[text] === 0).sort()).toEqual(
    [`/"info"\\}\\n\\{"msg/`, `/start.*end/`, `alpha AND tail`, `alpha omega`, `/api\\/v1\\/users/`].sort(),
  );
}, 120_000);
