// The query language: the parser's errors and positions, and every operator compiled to SQL and
// run in the real PostgreSQL against the JavaScript matcher the live stream uses, on random events
// and random queries (fast-check, seeded: QUERY_SEED replays, QUERY_RUNS sizes the run), over a
// plain jsonb column and over the same events sealed into blocks, read through their Bloom filters.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import postgres from "postgres";
import { compileMatcher, jsonbText, parseExact } from "../../src/query/match";
import { parseQuery, QueryError, type Node } from "../../src/query/parse";
import { tiers } from "../../src/query/read";
import { countBlocks, lineMatcher, lowerAscii, tallyBlocks } from "../../src/query/scan";
import { compileQuery } from "../../src/query/sql";
import { buildBlocks, type MovedRow } from "../../src/store/blocks";
import { writeBlocks } from "../../src/store/blocks-sql";

// 100 random cases take 3–35 s on an idle 2-core box and stay inside the timeout under load;
// RELIABILITY=full (or QUERY_RUNS) runs more.
const RUNS = Number(process.env.QUERY_RUNS ?? (process.env.RELIABILITY === "full" ? 300 : 100));
const SEED = Number(process.env.QUERY_SEED ?? Math.floor(Math.random() * 2 ** 31));

const sql = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
/** A source id no test creates: this file's blocks. */
const BLOCK_SOURCE = -4_242;
/**
 * Event n's id in this file's blocks: far above any id a logpond of another file takes, since a
 * block group's filter row is keyed by its first block's id alone (log_filters), and an insert of
 * an id another file's open transaction holds waits for that transaction.
 */
const ID_BASE = 2 ** 50;
beforeAll(async () => {
  await sql`create table if not exists query_language_events (n int primary key, raw jsonb not null)`;
});
afterAll(async () => {
  await sql`drop table if exists query_language_events`;
  await sql`delete from log_blocks where source_id = ${BLOCK_SOURCE}`;
  await sql.end({ timeout: 5 });
});

describe("parser", () => {
  const shape = (query: string) => JSON.parse(JSON.stringify(parseQuery(query) ?? null));
  test.each([
    ["", null],
    ["   ", null],
    ["error", { kind: "text", text: "error" }],
    ['"disk full"', { kind: "text", text: "disk full" }],
    [
      "a b",
      {
        kind: "and",
        nodes: [
          { kind: "text", text: "a" },
          { kind: "text", text: "b" },
        ],
      },
    ],
    [
      "a and b",
      {
        kind: "and",
        nodes: [
          { kind: "text", text: "a" },
          { kind: "text", text: "b" },
        ],
      },
    ],
    [
      "a OR b c",
      {
        kind: "or",
        nodes: [
          { kind: "text", text: "a" },
          {
            kind: "and",
            nodes: [
              { kind: "text", text: "b" },
              { kind: "text", text: "c" },
            ],
          },
        ],
      },
    ],
    ["not a", { kind: "not", node: { kind: "text", text: "a" } }],
    [
      "(a or b) c",
      {
        kind: "and",
        nodes: [
          {
            kind: "or",
            nodes: [
              { kind: "text", text: "a" },
              { kind: "text", text: "b" },
            ],
          },
          { kind: "text", text: "c" },
        ],
      },
    ],
    ["http.status>=500", { kind: "field", path: ["http", "status"], op: ">=", value: "500", number: 500 }],
    ['msg:"a b"', { kind: "field", path: ["msg"], op: ":", value: "a b" }],
    ["level!:debug", { kind: "not", node: { kind: "level", level: "debug" } }],
    ["level=error", { kind: "level", level: "error" }],
    ["lvl!:debug", { kind: "field", path: ["lvl"], op: "!:", value: "debug" }],
    ["lvl=error", { kind: "field", path: ["lvl"], op: "=", value: "error" }],
    ["code!=-1.5", { kind: "field", path: ["code"], op: "!=", value: "-1.5", number: -1.5 }],
    [
      "x<3 y<=4 z>5",
      {
        kind: "and",
        nodes: [
          { kind: "field", path: ["x"], op: "<", value: "3", number: 3 },
          { kind: "field", path: ["y"], op: "<=", value: "4", number: 4 },
          { kind: "field", path: ["z"], op: ">", value: "5", number: 5 },
        ],
      },
    ],
    ['"say \\"hi\\""', { kind: "text", text: 'say "hi"' }],
    ["level = error", { kind: "level", level: "error" }],
    ["lvl = error", { kind: "field", path: ["lvl"], op: "=", value: "error" }],
    [
      "http.status >= 500 a",
      {
        kind: "and",
        nodes: [
          { kind: "field", path: ["http", "status"], op: ">=", value: "500", number: 500 },
          { kind: "text", text: "a" },
        ],
      },
    ],
  ])("%p parses", (query, expected) => {
    expect(shape(query)).toEqual(expected);
  });

  test.each([
    ["(a", 3, "opened at position 1 is not closed"],
    ["a)", 2, "unexpected ')'"],
    ['"open', 1, "not closed"],
    ["status>=abc", 9, "needs a number"],
    ["status>", 8, "value is missing"],
    [":error", 1, "field name is missing before ':'"],
    ["a >= ", 6, "value is missing"],
    ["a AND", 6, "term is missing"],
    ["OR a", 1, "needs a term"],
    ["NOT", 4, "term is missing"],
    ["a..b:c", 1, "empty part"],
    ['msg:a"b', 6, "quote inside a value"],
    ["()", 2, "unexpected ')'"],
  ])("%p → error at position %p", (query, position, message) => {
    let error: unknown;
    try {
      parseQuery(query);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(QueryError);
    expect((error as QueryError).position).toBe(position);
    expect((error as QueryError).message).toContain(message);
    expect((error as QueryError).message).toContain(`position ${position}`);
  });

  test("deep nesting is refused, not a stack overflow", () => {
    expect(() => parseQuery("(".repeat(5000) + "a" + ")".repeat(5000))).toThrow(QueryError);
    expect(() => parseQuery("NOT ".repeat(5000) + "a")).toThrow(QueryError);
  });
});

// Random events over a few keys, so queries hit often; values include LIKE's and JSON's own
// characters, upper and lower case, non-ASCII letters, numbers in exponent notation, nesting.
// `id` and `dt` are the event's own fields in a query (the row's are logpond's): both paths read them so.
const KEYS = ["level", "msg", "n", "http", "tags", "ok", "Level", "id", "dt"];
/** Keys of events: also one a path cannot name (its key order is by UTF-8 bytes in jsonb). */
const EVENT_KEYS = [...KEYS, "é"];
const text = fc.oneof(
  fc.constantFrom(
    "error",
    "ERROR",
    "Warn",
    "disk full",
    "a%b",
    "a_b",
    'say "hi"',
    "back\\slash",
    "tab\there",
    "Éclair",
    "éclair",
    "😀",
    "500",
    "1.5",
    "true",
    "",
    // Level names the one table folds (query/levels.ts), in the cases shippers send them.
    "err",
    "WARNING",
    "Fatal",
    "notice",
    "info",
    "ERROR2",
  ),
  // Long enough for the blocks' gram filters (6 characters): whole ids, parts of them, phrases.
  fc.constantFrom(
    "req-7F3a9c2e41",
    "7f3a9c2e",
    "3a9c2e41x",
    "connection refused",
    "Connection",
    "timeout=30s",
    "(paren)thesis",
    'quote"inside',
    "123456789.125",
  ),
  fc.string({ maxLength: 6, unit: fc.constantFrom("a", "B", "%", "_", "\\", '"', " ", "é", "1", ":") }),
);
const number = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 1.5, 500, 404, 0.1, 1e21, 1.5e-7, 123456789.125, -2.5e25, 30, 50),
  fc.integer({ min: -1000, max: 1000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }),
);
/** Numbers a double would round (past 2^53, more than 15 significant digits): JSON text kept exact. */
const BIG = ["12345678901234567890", "9007199254740993", "9007199254740992", "-9007199254740993", "0.12345678901234567891"];
const exactNumber = fc.constantFrom(...BIG).map((text) => (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON(text));
const scalar = fc.oneof(text, number, exactNumber, fc.boolean(), fc.constant(null));
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  any: fc.oneof({ depthSize: "small", withCrossShrink: true }, scalar, scalar, tie("object"), tie("array")),
  object: fc.dictionary(fc.constantFrom(...EVENT_KEYS, "status", "a"), tie("any"), { maxKeys: 3 }),
  array: fc.array(tie("any"), { maxLength: 3 }),
})).any;
const event = fc.dictionary(fc.constantFrom(...EVENT_KEYS), value, { maxKeys: 6 });

const path = fc.array(fc.constantFrom(...KEYS, "status", "a", "0", "1", "-1"), { minLength: 1, maxLength: 3 });
const literal = fc.oneof(
  text,
  fc.constantFrom("500", "404", "0", "-1", "1.5", "0.1", "true", "false", "null", ...BIG, "12345678901234567891"),
  number.map((n) => String(n)),
);
/** Patterns of the regex subset, many over the events' own characters and JSON text. */
const pattern = fc.oneof(
  fc.constantFrom(
    "err",
    "^E",
    "[0-9]+",
    "(?i)error",
    "a.b",
    "\\d{3}",
    "é",
    "😀",
    "^$",
    "^.{1,3}$",
    "r$",
    "\\\\",
    '"',
    "%",
    "_",
    "\\s",
    "[^a-z]",
    "Warn|disk",
    "(?i)éCLAIR",
    "^[0-9.]+$",
    "^(true|false)$",
    "\\{",
    ": ",
    '^\\{"',
    '"level": "[A-Z]',
    "\\}$",
    "(?i)^[a-z ]+$",
    "^-?[0-9]+(\\.[0-9]+)?$",
    "req-[0-9A-Fa-f]{10}",
    "connection refused",
    // Literal runs that JSON escapes in the event's text: the block index must not need them there.
    "tab\\there",
    'y "h',
    "k\\\\s",
  ),
  fc
    .array(fc.constantFrom("a", "B", "é", "1", ".", "\\d", "[a-c]", "[^ ]", "r", "e", "(?:a|1)", "\\s", "^", "$", "%"), { minLength: 1, maxLength: 4 })
    .chain((parts) => fc.constantFrom("", "+", "*", "?").map((q) => parts.join("") + q))
    .filter((p) => !/^[*+?]|\^[*+?]|\$[*+?]/.test(p) && !/\)[*?]$/.test(p)),
);
const levelValue = fc.constantFrom("error", "ERROR", "err", "Warn", "warning", "INFO", "50", "30", "fatal", "trace", "debug");
const safeValue = fc.string({ minLength: 1, maxLength: 4, unit: fc.constantFrom("a", "B", "e", "r", "1", "5", "é", "%", "_", ".") });
const leaf: fc.Arbitrary<Node> = fc.oneof(
  text.map((t): Node => ({ kind: "text", text: t })),
  fc
    .tuple(path, fc.constantFrom(":", "!:", "=", "!=") as fc.Arbitrary<":" | "!:" | "=" | "!=">, literal)
    .map(([p, op, v]): Node => ({ kind: "field", path: p, op, value: v, number: undefined })),
  fc
    .tuple(
      path,
      fc.constantFrom(">", ">=", "<", "<=") as fc.Arbitrary<">" | ">=" | "<" | "<=">,
      fc.oneof(fc.constantFrom("500", "0", "-1", "1.5", "0.1", ...BIG, "12345678901234567891"), fc.integer({ min: -1000, max: 1000 }).map(String)),
    )
    .map(([p, op, v]): Node => ({ kind: "field", path: p, op, value: v, number: undefined })),
  fc.tuple(path, safeValue).map(([p, v]): Node => ({ kind: "prefix", path: p, value: v })),
  path.map((p): Node => ({ kind: "exists", path: p })),
  fc.tuple(fc.constantFrom(":", "="), levelValue).map(([op, v]): Node => ({ kind: "field", path: ["level"], op: op as ":", value: v, number: undefined })),
  fc.tuple(fc.option(path, { nil: undefined }), pattern).map(([p, re]): Node => ({ kind: "regex", path: p, pattern: re })),
);
const tree: fc.Arbitrary<Node> = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: "small" }, leaf, leaf, tie("not"), tie("and"), tie("or")),
  not: tie("node").map((node): Node => ({ kind: "not", node: node as Node })),
  and: fc.array(tie("node"), { minLength: 2, maxLength: 3 }).map((nodes): Node => ({ kind: "and", nodes: nodes as Node[] })),
  or: fc.array(tie("node"), { minLength: 2, maxLength: 3 }).map((nodes): Node => ({ kind: "or", nodes: nodes as Node[] })),
})).node as fc.Arbitrary<Node>;

/** The tree written as a user would type it (values quoted whenever they need it), every form of each operator in turn. */
function render(node: Node, variant = 0): string {
  const quote = (s: string) => (/^[A-Za-z0-9]+$/.test(s) && !/^(and|or|not)$/i.test(s) ? s : `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`);
  // A value starting with an operator's character or a quote other than " is quoted (query/tokens.ts refuses it bare).
  const value = (s: string) => (/^[^\s()"*/~[{<>]+$/.test(s) && !/^[=:!'`]/.test(s) ? s : `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`);
  const name = (path: string[]) => path.join(".");
  switch (node.kind) {
    case "text":
      return quote(node.text);
    case "field":
      // A comparison also as `field:>=n`.
      if (variant % 2 === 1 && /^[<>]/.test(node.op)) return `${name(node.path)}:${node.op}${node.value}`;
      return `${name(node.path)}${node.op}${value(node.value)}`;
    case "prefix":
      return `${name(node.path)}:${node.value}*`;
    case "exists":
      return `${name(node.path)}:*`;
    case "level":
      return `level:${node.level}`;
    case "regex": {
      const quoted = `"${node.pattern.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
      if (node.path === undefined) return `/${node.pattern}/`;
      return variant % 2 === 1 && !node.pattern.includes("/") ? `${name(node.path)}:/${node.pattern}/` : `${name(node.path)}=~${quoted}`;
    }
    case "not":
      // `-x`, `NOT x`, and `field!~re` for a negated pattern on a field.
      if (node.node.kind === "regex" && node.node.path !== undefined && variant % 3 === 2) {
        const inner = render(node.node, 0);
        return inner.replace("=~", "!~");
      }
      return variant % 2 === 0 ? `NOT (${render(node.node, variant + 1)})` : `-(${render(node.node, variant + 1)})`;
    default:
      return `(${node.nodes.map((child, k) => render(child, variant + k)).join(node.kind === "and" ? " AND " : " OR ")})`;
  }
}

/**
 * Each query gives the same events in PostgreSQL (over a plain jsonb column), in the live
 * matcher, and read back from the same events sealed into blocks as the query API reads them.
 */
async function agree(events: Record<string, unknown>[], queries: string[]): Promise<void> {
  await sql`truncate query_language_events`;
  await sql`insert into query_language_events ${sql(events.map((raw, n) => ({ n, raw: sql.json(raw as postgres.JSONValue) })))}`;
  const stored = await sql<{ n: number; text: string }[]>`select n, raw::text as text from query_language_events order by n`;
  // The matcher sees events as the live stream parses them (tail/rows.ts): big numbers exact.
  for (const row of stored) expect(jsonbText(parseExact(JSON.stringify(events[row.n])))).toBe(row.text);
  // The same events sealed as the sealer seals them (blocks of up to 4, with their Bloom filters),
  // event n with id ID_BASE + n.
  await sql`delete from log_blocks where source_id = ${BLOCK_SOURCE}`;
  await sql`delete from log_filters where source_id = ${BLOCK_SOURCE}`;
  const moved = await sql<MovedRow[]>`
    select (n + ${ID_BASE}::bigint)::text as id, ${String(BLOCK_SOURCE)} as source_id,
      to_char((now() + make_interval(secs => n / 1000000.0)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt,
      raw::text as line, '' as shape, null as level
    from query_language_events`;
  await writeBlocks(sql as never, buildBlocks(moved, 4));
  const blocks = await sql<{ min_us: string; min_id: string; source_id: string; payload: Buffer }[]>`
    select (extract(epoch from min_dt) * 1000000)::bigint::text as min_us, min_id::text, source_id::text, payload from log_blocks where source_id = ${BLOCK_SOURCE}`;
  expect(blocks.every((block) => block.payload !== null)).toBe(true);
  for (const query of queries) {
    const node = parseQuery(query)!;
    const condition = compileQuery(node, 1);
    const rows = await sql.unsafe<{ n: number }[]>(`select n from query_language_events where ${condition.text} order by n`, condition.params as never[]);
    const match = compileMatcher(node);
    const expected = events.flatMap((e, n) => (match(parseExact(JSON.stringify(e)) as Record<string, unknown>) ? [n] : []));
    expect({ query, matched: rows.map((r) => r.n) }).toEqual({ query, matched: expected });
    // Read back from the blocks as the query API reads them: skipped by the Bloom filters and
    // needles the query implies (query/prefilter.ts), then the full condition over the line.
    const sealedCondition = compileQuery(node, 1, "line");
    const params = [...sealedCondition.params];
    const sealedTiers = tiers(params, `array[${BLOCK_SOURCE}]::bigint[]`, "'-infinity'::timestamptz", "'infinity'::timestamptz", node);
    const sealed = await sql.unsafe<{ n: number }[]>(
      `select (id - ${ID_BASE})::int as n from ${sealedTiers} where ${sealedCondition.text} order by id`,
      params as never[],
    );
    expect({ query, tier: "blocks", matched: sealed.map((r) => r.n) }).toEqual({ query, tier: "blocks", matched: expected });
    // The scan threads' test of a line (query/scan.ts) on each event's jsonb text, and their count
    // over the blocks' payloads, as a histogram with a query uses them.
    const lines = lineMatcher(node);
    const scanned = stored.flatMap((row) => {
      const text = Buffer.from(row.text, "utf8");
      lines.reset();
      return lines.test(text, lowerAscii(text), 0, text.length) ? [row.n] : [];
    });
    expect({ query, tier: "scan threads", matched: scanned }).toEqual({ query, tier: "scan threads", matched: expected });
    const batch = {
      payloads: blocks.map((block) => block.payload),
      minUs: blocks.map((block) => block.min_us),
      minIds: blocks.map((block) => block.min_id),
      sources: blocks.map((block) => block.source_id),
    };
    const counted = countBlocks({
      ...batch,
      fromUs: "-62135596800000000",
      toUs: "253402300799999999",
      toIncluded: true,
      bucketSeconds: 86_400,
      query: node,
    }).counts.reduce((sum, n) => sum + n, 0);
    expect({ query, tier: "scanned blocks", counted }).toEqual({ query, tier: "scanned blocks", counted: expected.length });
    // And an aggregation's tallies (query/aggregate.ts on the scan threads): every match once, by id.
    const tallied = tallyBlocks({
      ...batch,
      fromUs: "-62135596800000000",
      toUs: "253402300799999999",
      bucketSeconds: null,
      query: node,
      by: ["id"],
      distinct: undefined,
      field: undefined,
      facets: [],
    }).joint;
    const talliedIds = tallied.by[0]!.map((id) => Number(id) - ID_BASE).sort((a, b) => a - b);
    expect({ query, tier: "tallied blocks", matched: talliedIds, counts: new Set(tallied.counts) }).toEqual({
      query,
      tier: "tallied blocks",
      matched: expected,
      counts: new Set(expected.length ? [1] : []),
    });
  }
}

test(`SQL and the live matcher agree on random events and queries (seed ${SEED}, ${RUNS} runs; replay with QUERY_SEED)`, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(event, { minLength: 1, maxLength: 25 }), fc.array(tree, { minLength: 1, maxLength: 5 }), async (events, trees) => {
      await agree(
        events,
        trees.map((tree, k) => render(tree, k)),
      );
    }),
    { seed: SEED, numRuns: RUNS },
  );
}, 120_000);

test("SQL and the live matcher agree on each new form, on events chosen to tell them apart", async () => {
  const events = [
    { level: "error", msg: "timeout after 30s", http: { status: 502 } },
    { level: "ERR", msg: 'say "hi"\ttab' },
    { level: 50, msg: "Timeout" },
    { level: "ERROR2", severity_number: 18 },
    { level: "Warning", msg: "disk full", http: { status: 404 } },
    { level: "information", msg: null, tags: ["a", "b"] },
    { level: "errors", msg: "tab\there" },
    { msg: "errand", n: 12345678901 },
    { level: "60", http: { status: "500" } },
    { level: { nested: "error" }, msg: "😀 é" },
  ];
  await agree(events, [
    "level:error",
    "level=ERROR",
    "-level:error",
    "level!=err",
    "level:warn OR level:fatal",
    "level:err*",
    "level:*",
    "-msg:*",
    "msg:tim*",
    "msg:/^[Tt]ime/",
    "msg!:/out/",
    'msg=~"(?i)TIMEOUT"',
    'msg!~"^t"',
    'msg=~"tab\\there"',
    'msg=~"y \\"h"',
    "/errand/",
    '/"level": 50/',
    '/(?i)^\\{"level": "err/',
    "http.status:>=500",
    "http.status:<500",
    "-(http.status>=500) level:*",
    "err*",
    "tags.0:a*",
    "/😀 ./",
    'msg=~"[^a-z ]"',
  ]);
});
