// src/codec/jsonb-text.ts against the embedded PostgreSQL: the hand-picked table, the realistic
// corpus, and random JSON texts (fast-check, seeded: JSONB_SEED replays, JSONB_RUNS sizes the run)
// with random blanks, escapes of every kind, number spellings with exponents and long digit
// strings, non-ASCII and astral characters, duplicate keys and nesting. Each must give exactly
// what the sealer reads in SQL (store/sealer.ts): raw::text, the top-level keys, and
// nullif(lower(left(raw->>'level', 40)), ''). And a field's value as the query API counts it:
// left(raw #>> path, n) and whether it is a number, read from raw::text (jsonbTextAt).
import { afterAll, expect, test } from "bun:test";
import fc from "fast-check";
import postgres from "postgres";
import { realisticBatch } from "../../bench/corpus";
import { jsonbPath, jsonbText, type JsonbText, jsonbTextAt, levelOfJson } from "../../src/codec/jsonb-text";
import { JSONB_CASES } from "../fixtures/jsonb-text-cases";

const RUNS = Number(process.env.JSONB_RUNS ?? (process.env.RELIABILITY === "full" ? 3000 : 200));
const SEED = Number(process.env.JSONB_SEED ?? Math.floor(Math.random() * 2 ** 31));

const sql = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
afterAll(async () => {
  await sql.end({ timeout: 5 });
});

/** What PostgreSQL gives for each text, in one query (the texts travel as one JSON array of strings). */
async function fromPostgres(texts: string[]): Promise<JsonbText[]> {
  const rows = await sql<JsonbText[]>`
    select raw::text as line,
      case jsonb_typeof(raw) when 'object' then (select coalesce(string_agg(key, ','), '') from jsonb_object_keys(raw) key) else '' end as shape,
      nullif(lower(left(raw->>'level', 40)), '') as level
    from (select t::jsonb as raw, n from jsonb_array_elements_text(${JSON.stringify(texts)}::text::jsonb) with ordinality as u(t, n)) s
    order by n`;
  return rows.map(({ line, shape, level }) => ({ line, shape, level }));
}

async function agree(texts: string[]): Promise<void> {
  const expected = await fromPostgres(texts);
  for (let i = 0; i < texts.length; i++) {
    expect({ json: texts[i], ...jsonbText(texts[i]!) }).toEqual({ json: texts[i], ...expected[i]! });
    // And the flush's level (store/chunks.ts), from the bytes alone.
    const bytes = Buffer.from(texts[i]!);
    expect({ json: texts[i], level: levelOfJson(bytes, 0, bytes.length) }).toEqual({ json: texts[i], level: expected[i]!.level });
  }
}

test("the hand-picked table is what PostgreSQL gives", async () => {
  const expected = await fromPostgres(JSONB_CASES.map((c) => c.json));
  expect(expected).toEqual(JSONB_CASES.map((c) => ({ line: c.line, shape: c.shape ?? "", level: c.level ?? null })));
});

test("the realistic corpus, as JSON.stringify writes it", async () => {
  await agree(realisticBatch(400, 0).map((event) => JSON.stringify(event))); // event 7 is a large one (50–200 KB)
});

// ---- random JSON texts -------------------------------------------------------------------------

const blank = fc.constantFrom("", "", "", "", " ", "\n", "\t", "\r\n  ", "  ");

const hex4 = (code: number, upper: boolean) => {
  const digits = code.toString(16).padStart(4, "0");
  return `\\u${upper ? digits.toUpperCase() : digits}`;
};
const SHORT: Record<string, string> = { '"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** One character and how it is spelled in the JSON text: itself where JSON allows it, a short escape, or \u escapes (either hex case). */
const spelledChar = fc
  .tuple(
    fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom("a", "b", "z", "A", "E", "L", "R", "0", "9", " ", ",", ":", "{", "[", "-", "e", "l", "v") },
      { weight: 3, arbitrary: fc.constantFrom('"', "\\", "/", "\b", "\f", "\n", "\r", "\t", "\u0001", "\u000b", "\u001f", "\u007f") },
      {
        weight: 3,
        arbitrary: fc.constantFrom("é", "É", "ß", "İ", "ÿ", "Ā", "€", "\u2028", "\uE000", "\uFFFD", "\uFFFF", "注", "😀", "\u{10000}", "\u{10FFFF}"),
      },
      {
        weight: 1,
        arbitrary: fc
          .integer({ min: 1, max: 0x10ffff })
          .filter((c) => c < 0xd800 || c > 0xdfff)
          .map((c) => String.fromCodePoint(c)),
      },
    ),
    fc.integer({ min: 0, max: 5 }),
  )
  .map(([char, how]) => {
    const code = char.codePointAt(0)!;
    const mustEscape = code < 0x20 || char === '"' || char === "\\";
    if (how <= 2 && !mustEscape) return char;
    if (how <= 3 && SHORT[char] !== undefined) return SHORT[char]!;
    if (code > 0xffff) return hex4(char.charCodeAt(0), how === 4) + hex4(char.charCodeAt(1), how === 5);
    return hex4(code, how % 2 === 0);
  });

/** Short strings mostly; some past the length the code stops copying by a loop. */
const stringText = fc
  .oneof({ weight: 4, arbitrary: fc.array(spelledChar, { maxLength: 12 }) }, { weight: 1, arbitrary: fc.array(spelledChar, { minLength: 20, maxLength: 80 }) })
  .map((chars) => `"${chars.join("")}"`);

/** Keys from a small set (so duplicates and ties in length are common) or random, spelled either way. */
const keyText = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '"a"',
      '"b"',
      '"A"',
      '"aa"',
      '"level"',
      '"\\u006cevel"',
      '"Level"',
      '"é"',
      '"zz"',
      '"😀"',
      '"\\ud83d\\ude00"',
      '"\uE000"',
      '"\uFFFFa"',
      '""',
      '"msg"',
    ),
  },
  { weight: 2, arbitrary: stringText },
);

const digitsText = (min: number, max: number) => fc.string({ unit: fc.constantFrom("0", "1", "5", "9"), minLength: min, maxLength: max });
const numberText = fc
  .tuple(
    fc.constantFrom("", "", "-"),
    fc.oneof(
      fc.constant("0"),
      fc.tuple(fc.constantFrom("1", "4", "9"), digitsText(0, 45)).map(([a, b]) => a + b),
    ),
    fc.option(digitsText(1, 30), { nil: undefined }),
    fc.option(
      fc.tuple(
        fc.constantFrom("e", "E"),
        fc.constantFrom("", "+", "-"),
        fc.constantFrom("", "0", "00"),
        fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: 60 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 1000 }) }),
      ),
      { nil: undefined },
    ),
  )
  .map(([sign, whole, fraction, exponent]) => {
    let text = sign + whole;
    if (fraction !== undefined) text += `.${fraction}`;
    if (exponent !== undefined) text += exponent[0] + exponent[1] + exponent[2] + String(exponent[3]);
    return text;
  });

/** A level value: short words in either case, long ones (past 40 code points, astral included), or any value. */
const levelText = fc.oneof(
  fc.constantFrom(
    '"error"',
    '"ERROR"',
    '"Warn"',
    '"ÉRROR"',
    '""',
    "null",
    "true",
    "50",
    "5e1",
    '"\\u0045RR"',
    `"${"Ab".repeat(19)}😀😀yy"`,
    `"${"Ab".repeat(25)}"`,
  ),
  stringText,
);

const json = fc.letrec<{ value: string; object: string; array: string; member: string }>((tie) => ({
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, stringText, numberText, fc.constantFrom("true", "false", "null"), tie("object"), tie("array")),
  member: fc.oneof(
    { weight: 6, arbitrary: fc.tuple(keyText, blank, blank, tie("value")).map(([key, a, b, value]) => `${key}${a}:${b}${value}`) },
    { weight: 1, arbitrary: fc.tuple(blank, levelText).map(([a, value]) => `"level":${a}${value}`) },
  ),
  object: fc
    .tuple(
      fc.oneof(
        { weight: 9, arbitrary: fc.array(fc.tuple(blank, tie("member"), blank), { maxLength: 7 }) },
        // wide: more members than the code sorts by insertion
        {
          weight: 1,
          arbitrary: fc.array(
            fc.tuple(
              blank,
              fc.tuple(keyText, fc.oneof(stringText, numberText)).map(([k, v]) => `${k}:${v}`),
              blank,
            ),
            { minLength: 20, maxLength: 60 },
          ),
        },
      ),
      blank,
    )
    .map(([members, inner]) => (members.length === 0 ? `{${inner}}` : `{${members.map(([a, m, b]) => a + m + b).join(",")}}`)),
  array: fc
    .tuple(fc.array(fc.tuple(blank, tie("value"), blank), { maxLength: 5 }), blank)
    .map(([items, inner]) => (items.length === 0 ? `[${inner}]` : `[${items.map(([a, v, b]) => a + v + b).join(",")}]`)),
}));

/** Mostly objects at the top, as events are; sometimes any value. */
const topText = fc.tuple(blank, fc.oneof({ weight: 4, arbitrary: json.object }, { weight: 1, arbitrary: json.value }), blank).map(([a, t, b]) => a + t + b);

test(`random JSON texts give what PostgreSQL gives (seed ${SEED}, ${RUNS} runs of 20 texts; replay with JSONB_SEED)`, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(topText, { minLength: 1, maxLength: 20 }), async (texts) => {
      await agree(texts);
    }),
    { seed: SEED, numRuns: RUNS },
  );
}, 300_000);

/** Field paths: keys the random texts use (and some they do not), array indexes as strtoint reads them, up to three deep. */
const pathText = fc
  .array(
    fc.constantFrom(
      "a",
      "b",
      "A",
      "aa",
      "level",
      "Level",
      "msg",
      "zz",
      "x",
      "0",
      "1",
      "2",
      "-1",
      "-2",
      "007",
      "-0",
      "2147483647",
      "2147483648",
      "-2147483648",
      "1-",
    ),
    {
      minLength: 1,
      maxLength: 3,
    },
  )
  .map((segments) => segments.join("."));

test(`a field's value at a path is PostgreSQL's raw #>> path, cut as left() cuts (seed ${SEED}, ${RUNS} runs)`, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.tuple(topText, pathText, fc.constantFrom(3, 40, 200)), { minLength: 1, maxLength: 20 }), async (cases) => {
      const rows = await sql<{ line: string; value: string | null; number: boolean }[]>`
        select raw::text as line, left(raw #>> string_to_array(p, '.'), c) as value, coalesce(jsonb_typeof(raw #> string_to_array(p, '.')) = 'number', false) as number
        from (select (x->>0)::jsonb as raw, x->>1 as p, (x->>2)::int as c, n from jsonb_array_elements(${JSON.stringify(cases)}::text::jsonb) with ordinality as u(x, n)) s
        order by n`;
      cases.forEach(([json, path, chars], i) => {
        const { line, value, number } = rows[i]!;
        // The line among others, as a block's text holds it.
        const bytes = Buffer.from(`{"before": 1}\n${line}\n[2]`);
        const start = Buffer.byteLength('{"before": 1}\n');
        const found = jsonbTextAt(bytes, start, start + Buffer.byteLength(line), jsonbPath(path), chars);
        expect({ json, path, chars, ...found }).toEqual({ json, path, chars, text: value, number });
      });
    }),
    { seed: SEED, numRuns: RUNS },
  );
}, 300_000);

test("hand-picked values at paths: nested, indexed from either end, escaped, numbers as written, cut past astral characters", async () => {
  const cases: [string, string, number][] = [
    ['{"a": {"b": [1, {"c": "x"}]}}', "a.b.1.c", 200],
    ['{"a": {"b": [1, {"c": "x"}]}}', "a.b.-1.c", 200],
    ['{"a": {"b": [1, {"c": "x"}]}}', "a.b.-3", 200],
    ['{"a": {"b": [1, {"c": "x"}]}}', "a.b.001.c", 200],
    ['{"a": {"b": [1, {"c": "x"}]}}', "a", 200],
    ['{"a": {"b": [1, {"c": "x"}]}}', "a.b", 5],
    ['{"n": 1.50e3, "m": -0.0, "s": "q\\"uo\\u00e9te\\n"}', "n", 200],
    ['{"n": 1.50e3, "m": -0.0, "s": "q\\"uo\\u00e9te\\n"}', "m", 200],
    ['{"n": 1.50e3, "m": -0.0, "s": "q\\"uo\\u00e9te\\n"}', "s", 200],
    ['{"level": "😀😀😀x", "t": true, "z": null}', "level", 2],
    ['{"level": "😀😀😀x", "t": true, "z": null}', "t", 200],
    ['{"level": "😀😀😀x", "t": true, "z": null}', "z", 200],
    ['[{"a": 1}, 2]', "0.a", 200],
    ['"scalar"', "a", 200],
  ];
  const rows = await sql<{ line: string; value: string | null; number: boolean }[]>`
    select raw::text as line, left(raw #>> string_to_array(p, '.'), c) as value, coalesce(jsonb_typeof(raw #> string_to_array(p, '.')) = 'number', false) as number
    from (select (x->>0)::jsonb as raw, x->>1 as p, (x->>2)::int as c, n from jsonb_array_elements(${JSON.stringify(cases)}::text::jsonb) with ordinality as u(x, n)) s
    order by n`;
  expect(rows.filter((row) => row.value !== null).length).toBe(11);
  cases.forEach(([json, path, chars], i) => {
    const { line, value, number } = rows[i]!;
    const bytes = Buffer.from(line);
    expect({ json, path, ...jsonbTextAt(bytes, 0, bytes.length, jsonbPath(path), chars) }).toEqual({ json, path, text: value, number });
  });
});
