// A block's field summary (store/summary.ts) against PostgreSQL itself: for random events written
// as JSON text (numbers PostgreSQL prints otherwise than a double, 200.0 and 99.999…; arrays;
// nesting; keys with dots; many values; many paths), every path the summary vouches for must have
// exactly the counts `raw #>> path` gives, value text for value text, the rest null. The lines are
// jsonb's text, as a block holds them.
import { afterAll, beforeAll, expect, test } from "bun:test";
import postgres from "postgres";
import { rng } from "../../bench/corpus";
import { DEPTH_MAX, type FieldSummary, PATHS_MAX, SummaryBuilder, VALUES_MAX } from "../../src/store/summary";

let sql: postgres.Sql;
beforeAll(() => {
  sql = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
});
afterAll(async () => {
  await sql.end({ timeout: 5 });
});

const SCALARS = [
  "200",
  "200.0",
  "404.000",
  "99.99999999999999999999",
  "100",
  "1e2",
  "-0",
  "1.5",
  "123456789012",
  '"200"',
  '"x"',
  '""',
  "true",
  "false",
  "null",
  '"ü ✓"',
  '"a\\"b\\n"',
  `"${"L".repeat(70)}"`,
];
const KEYS = ["a", "b", "0", "c.d", "__proto__", "level", "x-y", "k k", "@t"];

function value(r: () => number, depth: number): string {
  const roll = r();
  if (depth < 6 && roll < 0.25) return object(r, depth + 1);
  if (roll < 0.32) return `[${value(r, depth + 1)}, ${value(r, depth + 1)}]`;
  return SCALARS[Math.floor(r() * SCALARS.length)]!;
}

function object(r: () => number, depth: number): string {
  const count = 1 + Math.floor(r() * 3);
  return `{${Array.from({ length: count }, () => `"${KEYS[Math.floor(r() * KEYS.length)]}": ${value(r, depth)}`).join(", ")}}`;
}

/** Whether the summary vouches for `path` (drizzle/0012's rule, store/sql/functions.sql's logpond_block_counted). */
function knows(summary: FieldSummary, path: string): boolean {
  const parts = path.split(".");
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join("."));
  if (prefixes.some((prefix) => summary.a.includes(prefix))) return false;
  if (summary.o.includes(path)) return false;
  return path in summary.c || !summary.x;
}

/** The paths worth asking about: every key chain up to one level past DEPTH_MAX, and a few never sent. */
function pathsOf(lines: string[]): string[] {
  const paths = new Set(["missing", "a.missing", "a.0", "a.0.b"]);
  const walk = (value: unknown, prefix: string, depth: number) => {
    if (depth > DEPTH_MAX + 1 || value === null || typeof value !== "object") return;
    for (const key of Object.keys(value)) {
      const path = prefix ? `${prefix}.${key}` : key;
      paths.add(path);
      walk((value as Record<string, unknown>)[key], path, depth + 1);
    }
  };
  for (const line of lines) walk(JSON.parse(line), "", 1);
  return [...paths].filter((path) => /^[A-Za-z0-9_@$-]+(\.[A-Za-z0-9_@$-]+)*$/.test(path));
}

async function check(texts: string[]): Promise<{ known: number; asked: number }> {
  const lines = (await sql<{ line: string }[]>`select t::jsonb::text as line from unnest(${texts}::text[]) t`).map((row) => row.line);
  const builder = new SummaryBuilder();
  for (const line of lines) builder.add(line);
  const summary = builder.finish();
  const paths = pathsOf(lines);
  let known = 0;
  for (const path of paths) {
    if (!knows(summary, path)) continue;
    known++;
    const rows = await sql<{ v: string; n: string }[]>`
      select l::jsonb #>> ${path.split(".")}::text[] as v, count(*)::text as n
      from unnest(${lines}::text[]) l group by 1 having l::jsonb #>> ${path.split(".")}::text[] is not null`.catch(
      () =>
        sql<{ v: string; n: string }[]>`
        select v, count(*)::text as n from (select l::jsonb #>> ${path.split(".")}::text[] as v from unnest(${lines}::text[]) l) s where v is not null group by 1`,
    );
    const expected = Object.fromEntries(rows.map((row) => [row.v, Number(row.n)]));
    expect({ path, counts: summary.c[path] ?? {} }).toEqual({ path, counts: expected });
  }
  return { known, asked: paths.length };
}

test("every path a summary vouches for has PostgreSQL's counts, over random events", async () => {
  const r = rng(11);
  let known = 0;
  for (let round = 0; round < 30; round++) {
    const texts = Array.from({ length: 20 + Math.floor(r() * 60) }, () => object(r, 1));
    known += (await check(texts)).known;
  }
  expect(known).toBeGreaterThan(100); // the check is about something
});

test("numbers whose text is not a double's make their path unknown, integers are counted", async () => {
  for (const odd of ["200.0", "404.000", "99.99999999999999999999", "1.5", "123456789012"]) {
    const builder = new SummaryBuilder();
    for (const line of [`{"s": 200, "t": 1}`, `{"s": ${odd}}`, `{"t": 2}`])
      builder.add((await sql<{ l: string }[]>`select ${line}::text::jsonb::text as l`)[0]!.l);
    const summary = builder.finish();
    expect({ odd, opaque: summary.o.includes("s"), t: summary.c.t }).toEqual({ odd, opaque: true, t: { "1": 1, "2": 1 } });
  }
});

test("past VALUES_MAX values a path is opaque; past PATHS_MAX paths the summary says so", async () => {
  const many = new SummaryBuilder();
  for (let i = 0; i <= VALUES_MAX; i++) many.add(`{"v": "v${i}", "w": "same"}`);
  expect(many.finish()).toEqual({ c: { w: { same: VALUES_MAX + 1 } }, o: ["v"], a: [] });

  const wide = new SummaryBuilder();
  wide.add(`{${Array.from({ length: PATHS_MAX + 5 }, (_, i) => `"k${i}": 1`).join(", ")}}`);
  const summary = wide.finish();
  expect(summary.x).toBe(true);
  expect(Object.keys(summary.c).length).toBe(PATHS_MAX);
  expect(knows(summary, `k${PATHS_MAX + 1}`)).toBe(false);
  expect(knows(summary, "k0")).toBe(true);
  expect(await check([`{${Array.from({ length: PATHS_MAX + 5 }, (_, i) => `"k${i}": ${i % 3}`).join(", ")}}`, `{"k1": 5}`])).toMatchObject({
    known: PATHS_MAX,
  });
});

test("a negative number too small for a double (-1e-400: JSON.parse gives -0) is not counted as 0", async () => {
  // PostgreSQL prints it in full ("-0.000…1"); a double reads it as -0, whose String() is "0".
  for (const odd of ["-1e-400", "-1e-330", `-0.${"0".repeat(330)}1`]) {
    const texts = [`{"s": ${odd}}`, `{"s": 0}`, `{"s": -0}`];
    expect(await check(texts)).toMatchObject({ known: expect.any(Number) });
  }
});
