// The search index's grams and Bloom filters (codec/grams.ts) and what a query needs from a block
// (query/prefilter.ts): no gram of a block's text is ever missing from its filter (a missing one
// would hide a match), absent terms are mostly rejected, and needles are necessary conditions.
import { describe, expect, test } from "bun:test";
import { asciiLower, bloom, GRAM, termGrams } from "../../src/codec/grams";
import { parseQuery } from "../../src/query/parse";
import { prefilter } from "../../src/query/prefilter";

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
}
const has = (filter: Uint8Array, grams: number[]) =>
  grams.every((g) => ((filter[(g % (filter.length * 8)) >>> 3]! >> ((g % (filter.length * 8)) & 7)) & 1) === 1);

describe("Bloom filter of a block", () => {
  const next = random(42);
  const hex = (n: number) => Array.from({ length: n }, () => "0123456789abcdef"[Math.floor(next() * 16)]).join("");
  const lines = Array.from({ length: 1_000 }, (_, i) =>
    JSON.stringify({ level: i % 7 === 0 ? "ERROR" : "info", message: `GET /users/${hex(8)} took ${i} ms`, trace_id: hex(32), note: 'ünïcödé (x) "q"' }),
  );
  const filter = bloom(lines)!;

  test("holds every gram of every substring of the lines that a term can be", () => {
    for (const line of lines.slice(0, 200)) {
      for (const piece of asciiLower(line).split(/[\s()"]+/)) {
        for (let start = 0; start + GRAM <= piece.length; start += 3) {
          const term = piece.slice(start, start + GRAM + Math.floor(next() * 10));
          expect(has(filter, termGrams(term))).toBe(true);
        }
      }
    }
  });

  test("rejects most terms it does not hold: 10-character ids pass about 2^-5 of the time", () => {
    let passed = 0;
    for (let i = 0; i < 1_000; i++) if (has(filter, termGrams(hex(10)))) passed++;
    expect(passed).toBeLessThan(150);
  });

  test("folds KELVIN SIGN and I WITH DOT ABOVE to k and i, as a database of another ctype may", () => {
    const folded = bloom(['{"msg": "\u212Aelvin \u0130nside"}'])!;
    expect(has(folded, termGrams("kelvin"))).toBe(true);
    expect(has(folded, termGrams("inside"))).toBe(true);
  });

  test("is about 1.44 bits per distinct gram, and none for text without a gram", () => {
    expect(filter.length).toBeLessThan(lines.join("").length / 4);
    expect(bloom(['{"a": 1}'])).toBeUndefined();
  });
});

describe("what a query needs from a block", () => {
  const needs = (query: string) => prefilter(parseQuery(query)).needles.sort();
  test.each([
    ["ERROR", ["error"]],
    ['"Disk Full"', ["disk full"]],
    ['level=error msg:"Time Out"', ["error", "time out"]],
    ["a OR b", []],
    ["NOT a", []],
    ["level!=error", []],
    ["status>=500", []],
    ["status=500", ["500"]],
    ["ms=1.50", []], // not canonical: 1.5 is printed 1.5, which does not contain 1.50
    ["ms=1.5", ["1.5"]],
    ["n=-0", []], // equals 0, printed 0
    ["éclair", []],
    ['msg:"say \\"hi\\""', []], // escaped in a string field, not in an object field's text
    ['"say \\"hi\\""', ['say \\"hi\\"']],
  ])("%p needs %p", (query, expected) => {
    expect(needs(query)).toEqual(expected as string[]);
  });

  test("a needle without a letter is a LIKE pattern, one with a letter an ILIKE one; LIKE's own characters are escaped", () => {
    const patterns = (query: string) => {
      const { likes, ilikes } = prefilter(parseQuery(query));
      return { likes, ilikes };
    };
    expect(patterns("status=500 ERROR")).toEqual({ likes: ["%500%"], ilikes: ["%error%"] });
    expect(patterns('"50%_off" "100%"')).toEqual({ likes: ["%100\\%%"], ilikes: ["%50\\%\\_off%"] });
    expect(patterns("a OR b")).toEqual({ likes: [], ilikes: [] });
  });

  test("grams come from the needles' pieces of at least GRAM characters", () => {
    expect(prefilter(parseQuery("abc")).grams).toEqual([]);
    expect(prefilter(parseQuery("abcdefgh")).grams.length).toBe(3);
    expect(prefilter(parseQuery('"abcdef ghijkl"')).grams.length).toBe(2);
  });
});
