// The query language's regular expressions (query/regex.ts): what the subset refuses and why, the
// pattern written out for PostgreSQL, the literal runs the block index may use, and the live
// stream's automaton (query/automaton.ts) against JavaScript's own RegExp running the same written
// pattern on random patterns and texts (seeded; PostgreSQL's side is in
// test/integration/query-language.test.ts). Also: the automaton stays linear on patterns that
// make a backtracking engine exponential.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { type CacheLimits, compileRegex } from "../../src/query/automaton";
import { parseRegex, postgresPattern, REGEX_MAX_CHARS, RegexSyntaxError, requiredLiterals } from "../../src/query/regex";

const written = (source: string) => postgresPattern(parseRegex(source));

test.each([
  ["abc", "abc"],
  ["a.b", "a.b"],
  ["a|b", "(?:a|b)"],
  ["(ab)+c", "(?:ab)+c"],
  ["(?:ab){2,3}", "(?:ab){2,3}"],
  ["a{2,}", "a{2,}"],
  ["\\d+\\.\\d", "[0-9]+\\.[0-9]"],
  ["\\w\\s\\D", "[0-9A-Z_a-z][\\t-\\r ][^0-9]"],
  ["[a-c\\]\\-^]", "[\\-\\]-\\^a-c]"],
  ["a\\tb[\\n\\r]", "a\\tb[\\n\\r]"],
  ["[^\\d_]", "[^0-9_]"],
  ['\\/\\"\\ ', '/" '],
  ["(?i)ab1", "[Aa][Bb]1"],
  ["(?i)[^x-z]", "[^X-Zx-z]"],
  ["a*?b", "a*b"],
  ["^\\{x\\}$", "^\\{x\\}$"],
  ["é+😀", "é+😀"],
])("%p is written for PostgreSQL as %p", (source, expected) => {
  expect(written(source)).toBe(expected);
});

test.each([
  ["", 0, "empty"],
  ["(?i)", 4, "empty"],
  ["a\\b", 1, "word boundaries"],
  ["(a)\\1", 3, "back-references"],
  ["\\x41", 0, "character codes"],
  ["\\p{L}", 0, "Unicode properties"],
  ["\\y", 0, "not accepted"],
  ["a(?=b)", 1, "look-around"],
  ["a(?i)b", 1, "only at the very start"],
  ["[[:alpha:]]", 1, "POSIX classes"],
  ["[]a]", 0, "empty class"],
  ["[z-a]", 1, "out of order"],
  ["[a-\\d]", 1, "ends in a class"],
  ["[\\D]", 1, "inside [ ]"],
  ["[ab", 0, "not closed"],
  ["(ab", 0, "not closed"],
  ["ab)", 2, "unexpected ')'"],
  ["()", 0, "empty group"],
  ["a|", 2, "empty alternative"],
  ["|a", 0, "empty alternative"],
  ["*a", 0, "nothing to repeat"],
  ["^*", 1, "nothing to repeat"],
  ["a**", 2, "two quantifiers"],
  ["a{2}{3}", 4, "two quantifiers"],
  ["(a*)*", 0, "can match nothing"],
  ["(a|b?)+", 0, "can match nothing"],
  ["a{300}", 1, "at most 255"],
  ["a{3,2}", 1, "larger number first"],
  ["a{0}", 1, "repeats nothing"],
  ["a{,2}", 1, "starts a count"],
  ["a}", 1, "unmatched"],
  ["a]", 1, "unmatched"],
  ["a\\", 1, "ends the pattern"],
  ["a\0b", 1, "NUL"],
  ["(abcdef){50}", 0, "more than 256"],
  ["(a|b)*a(a|b){255}", 0, "more than 256"],
  ["a".repeat(REGEX_MAX_CHARS + 1), REGEX_MAX_CHARS, `at most ${REGEX_MAX_CHARS}`],
])("%p is refused at index %p: %p", (source, index, problem) => {
  let error: unknown;
  try {
    parseRegex(source);
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RegexSyntaxError);
  expect((error as RegexSyntaxError).problem).toContain(problem);
  expect((error as RegexSyntaxError).index).toBe(index);
});

test.each([
  ["timeout", ["timeout"]],
  ["conn.*refused", ["conn", "refused"]],
  ["^GET /api/v[0-9]+/users", ["GET /api/v", "/users"]],
  ["ab+c", ["ab", "c"]],
  ["ab*c", ["a", "c"]],
  ["(?i)Disk Full", ["disk full"]],
  ["a(bc)d", ["abcd"]],
  ["a(b|c)d", ["a", "d"]],
  ["a|b", []],
])("%p needs the literal runs %p", (source, runs) => {
  expect(requiredLiterals(parseRegex(source))).toEqual(runs);
});

// Random patterns of the subset, over an alphabet the texts share (so they match often).
const ALPHABET = ["a", "b", "B", "é", "😀", "-", "]", " ", "\n", "1", ".", "{"];
const char = fc.constantFrom(...ALPHABET);
const escapeChar = (c: string) => ("\\^$.|?*+()[]{}-".includes(c) ? `\\${c}` : c);
const atom: fc.Arbitrary<string> = fc.oneof(
  char.map(escapeChar),
  fc.constantFrom(".", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "[Bb]", "[a-c]", "[^a]", "[\\]\\-]", "[é😀]", "[^\\s1]", "[0-9B]", "\\n"),
);
const pattern: fc.Arbitrary<string> = fc.letrec((tie) => ({
  seq: fc.array(tie("piece"), { minLength: 1, maxLength: 4 }).map((parts) => (parts as string[]).join("")),
  piece: fc.oneof(
    { depthSize: "small" },
    atom,
    atom,
    fc.tuple(atom, fc.constantFrom("*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?")).map(([a, q]) => a + q),
    fc.constantFrom("^", "$"),
    fc.tuple(tie("alt"), fc.constantFrom("", "+", "{1,2}", "*")).map(([inner, q]) => `(${inner})${q}`),
  ),
  alt: fc.array(tie("seq"), { minLength: 1, maxLength: 3 }).map((branches) => (branches as string[]).join("|")),
})).alt as fc.Arbitrary<string>;
const texts = fc.array(
  fc.array(char, { maxLength: 12 }).map((cs) => cs.join("")),
  { minLength: 1, maxLength: 8 },
);

/** Limits that fill the cache of DFA states at once: the automaton is then run uncached. */
const TINY: CacheLimits = { cells: 24, listed: 12 };

test.each([
  ["cached", undefined],
  ["past the cache's limits", TINY],
])("the automaton agrees with JavaScript's RegExp on the written pattern, %s (random patterns and texts, seeded)", (_, limits) => {
  let checked = 0;
  fc.assert(
    fc.property(pattern, fc.boolean(), texts, (source, ignoreCase, samples) => {
      let regex: ReturnType<typeof parseRegex>;
      try {
        regex = parseRegex((ignoreCase ? "(?i)" : "") + source);
      } catch (error) {
        if (error instanceof RegexSyntaxError) return; // refused forms are tested above
        throw error;
      }
      checked++;
      const reference = new RegExp(postgresPattern(regex), "su");
      const test = compileRegex(regex, limits);
      for (const text of samples) expect({ source, text, matched: test(text) }).toEqual({ source, text, matched: reference.test(text) });
    }),
    { seed: 20261130, numRuns: 3000 },
  );
  expect(checked).toBeGreaterThan(1000);
});

test("a pattern that makes a backtracking engine exponential stays linear", () => {
  // (a|a)*b and (a|aa)*c on 5,000 a's: 2^5000 paths for a backtracking search; one pass here.
  const text = "a".repeat(5_000);
  expect(compileRegex(parseRegex("(a|a)*b"))(text)).toBe(false);
  expect(compileRegex(parseRegex("(a|aa)+c"))(text)).toBe(false);
  expect(compileRegex(parseRegex("(.*a){20}x"))(text)).toBe(false);
  expect(compileRegex(parseRegex("(.*a){20}"))(text)).toBe(true);
});

test("a pattern whose DFA is exponential fills the cache, then runs uncached: still right, still linear", () => {
  // The 31st character from the end: 2^31 DFA states; on 60,000 random characters the cache fills
  // (CACHE_LIMITS) part way through and the rest is read uncached.
  const regex = parseRegex("(a|b)*a(a|b){30}$");
  const test = compileRegex(regex);
  let seed = 7;
  const text = Array.from({ length: 60_000 }, () => ((seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) & 0x10000 ? "a" : "b")).join("");
  for (const end of [60_000, 59_999, 40_000, 31, 30]) expect(test(text.slice(0, end))).toBe(end >= 31 && text[end - 31] === "a");
});

test("surrogate pairs are one character, as code points are in PostgreSQL", () => {
  expect(compileRegex(parseRegex("^.$"))("😀")).toBe(true);
  expect(compileRegex(parseRegex("^..$"))("😀")).toBe(false);
  expect(compileRegex(parseRegex("^[^a]$"))("😀")).toBe(true);
});
