// The search index's grams, numbers and Bloom filters (codec/grams.ts) and what a query needs from a
// block (query/prefilter.ts): no item of a block's text is ever missing from its filter (a missing
// one would hide a match), absent terms are mostly rejected, the bit-sliced layout keeps each
// block's filter apart, and needles are necessary conditions.
import { describe, expect, test } from "bun:test";
import { asciiLower, blockHashes, canonicalNumber, filterBits, GRAM, numberHashes, sliced, termGrams } from "../../src/codec/grams";
import { buildBlocks, type Block, type Filter, type MovedRow } from "../../src/store/blocks";
import { openPayload } from "../../src/codec/pgp";
import { parseQuery } from "../../src/query/parse";
import { MAX_GRAMS, prefilter } from "../../src/query/prefilter";

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
}
const has = (filter: Uint8Array, grams: number[]) =>
  grams.every((g) => ((filter[(g % (filter.length * 8)) >>> 3]! >> ((g % (filter.length * 8)) & 7)) & 1) === 1);
/** One block's filter: a group of one slot is a plain Bloom filter. */
function bloom(lines: string[]): Uint8Array | undefined {
  const hashes = blockHashes(lines);
  const bits = filterBits(hashes);
  return bits === 0 ? undefined : sliced([hashes], bits);
}
/** Whether slot k of a bit-sliced group holds every hash (as drizzle/0007 reads it). */
const slotHas = (filter: Filter, k: number, hashes: number[]) =>
  hashes.every((h) => {
    const bit = (h % filter.bits) * filter.blocks + k;
    return ((filter.slices[bit >>> 3]! >> (bit & 7)) & 1) === 1;
  });

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

  test("is about 1.44 bits per distinct item, and none for text without one", () => {
    expect(filter.length).toBeLessThan(lines.join("").length / 4);
    expect(bloom(['{"a": true}'])).toBeUndefined();
  });
});

describe("number items", () => {
  test.each([
    ["123457", "123457"],
    ["123457.000", "123457"],
    ["1.50", "1.5"],
    ["-0", "0"],
    ["-0.00", "0"],
    ["-12.0", "-12"],
    ["0.001", "0.001"],
    ["007", undefined],
    ["1e5", undefined],
    ["abc", undefined],
  ])("%p is canonically %p", (text, canonical) => {
    expect(canonicalNumber(text)).toBe(canonical as string | undefined);
  });

  test("a block holds its number values (canonical) and its strings that are canonical numbers", () => {
    const filter = bloom(['{"http": {"bytes": 123457.000, "status": 500}, "order": "98765", "trace": "ab-4242424-cd", "n": -0}'])!;
    for (const n of ["123457", "500", "98765", "0"]) expect(has(filter, numberHashes(n))).toBe(true);
    let passed = 0;
    for (let i = 0; i < 1_000; i++) if (has(filter, numberHashes(String(1_000_000 + i)))) passed++;
    expect(passed).toBeLessThan(60); // 2^-5 each, about 31
  });
});

describe("bit-sliced filters of a group of blocks", () => {
  const next = random(7);
  const hex = (n: number) => Array.from({ length: n }, () => "0123456789abcdef"[Math.floor(next() * 16)]).join("");
  const rows: MovedRow[] = Array.from({ length: 500 }, (_, i) => ({
    id: String(1_000 + i),
    source_id: "9",
    dt: `2026-11-26T10:${String(Math.floor(i / 10)).padStart(2, "0")}:00.000000Z`,
    line: JSON.stringify({ message: `request ${hex(12)} done`, bytes: 10_000 + i, user: `${hex(6)}` }),
    shape: "bytes,message,user",
    level: null,
  }));
  const items = buildBlocks(rows, 100);
  /** A block's JSON lines: its payload's text past the ids' and times' lines. */
  const linesOf = (block: Block) => openPayload(block.payload).split("\n").slice(2);
  const blocks = items.filter((item): item is Block => item.kind === "block");
  const filters = items.filter((item): item is Filter => item.kind === "filter");

  test("blocks of one source and day share one filter row, each in its own slot, written before it", () => {
    expect(blocks.length).toBe(5);
    expect(filters.length).toBe(1);
    expect(blocks.map((b) => [b.filterId, b.filterSlot])).toEqual(blocks.map((_, k) => [filters[0]!.id, k]));
    expect(items[items.length - 1]!.kind).toBe("filter");
    expect(filters[0]!.blocks).toBe(5);
    expect(filters[0]!.slices.length).toBe(Math.ceil((filters[0]!.bits * 5) / 8));
  });

  test("each slot holds the items of its own block's lines", () => {
    const filter = filters[0]!;
    for (const block of blocks) {
      for (const line of linesOf(block).slice(0, 20)) {
        const event = JSON.parse(line) as { message: string; bytes: number };
        expect(slotHas(filter, block.filterSlot!, termGrams(event.message.split(" ")[1]!))).toBe(true);
        expect(slotHas(filter, block.filterSlot!, numberHashes(String(event.bytes)))).toBe(true);
      }
    }
  });

  test("and mostly not another block's", () => {
    const filter = filters[0]!;
    let passed = 0;
    let tried = 0;
    for (const block of blocks) {
      for (const other of blocks) {
        if (other === block) continue;
        for (const line of linesOf(other).slice(0, 20)) {
          tried++;
          if (slotHas(filter, block.filterSlot!, numberHashes(String((JSON.parse(line) as { bytes: number }).bytes)))) passed++;
        }
      }
    }
    expect(passed).toBeLessThan(tried * 0.1);
  });

  test("a block whose filter needs far more bits than its neighbours' starts a group of its own", () => {
    const big = rows.map((row, i) => (i >= 200 && i < 300 ? { ...row, line: JSON.stringify({ message: hex(4_000) }) } : row));
    const grouped = buildBlocks(big, 100).filter((item): item is Filter => item.kind === "filter");
    expect(grouped.map((f) => f.blocks)).toEqual([2, 1, 2]);
  });
});

describe("what a query needs from a block", () => {
  const needs = (query: string) => prefilter(parseQuery(query)).needles.sort();
  test.each([
    ["ERROR", ["error"]],
    ['"Disk Full"', ["disk full"]],
    ['lvl=error msg:"Time Out"', ["error", "time out"]],
    // A level through the table of level names (err, ERROR, 50…): only its key is sure to be there.
    ['level=error msg:"Time Out"', ['"level"', "time out"]],
    ["x:*", ['"x"']],
    ["a.b:*", ['"b"']],
    ["tags.0:*", []], // an array position has no key in the text
    ["msg:tim*", ["tim"]],
    ["/conn.*Refused/", ["conn", "refused"]],
    ["msg:/conn.*Refused/", ['"msg"', "conn", "refused"]],
    ['msg=~"say \\"hi"', ['"msg"', "hi", "say "]], // the quote is escaped in a string field's text: the pieces around it
    ['/say "hi/', ['say "hi']], // on the line, the text itself
    ["/a|b/", []],
    ["-x:* -/abc/", []],
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

  test("an `=` term with a canonical number needs that number item; other terms need none", () => {
    expect(prefilter(parseQuery("http.bytes=123457")).nums).toEqual(numberHashes("123457"));
    expect(prefilter(parseQuery("a=1 AND b=1")).nums).toEqual(numberHashes("1"));
    for (const query of ["123457", "bytes:123457", "bytes>=123457", "ms=1.50", "n=-0", "a=1 OR b=2", "NOT a=1", "name=abc"]) {
      expect(prefilter(parseQuery(query)).nums).toEqual([]);
    }
  });

  test("grams come from the needles' pieces of at least GRAM characters", () => {
    expect(prefilter(parseQuery("abc")).grams).toEqual([]);
    expect(prefilter(parseQuery("abcdefgh")).grams.length).toBe(3);
    expect(prefilter(parseQuery('"abcdef ghijkl"')).grams.length).toBe(2);
    // A long needle probes MAX_GRAMS of its grams, from all along it.
    const long = prefilter(parseQuery("req-needle-0123456789abcdef0123")).grams;
    expect(long.length).toBe(MAX_GRAMS);
    expect(long).toContain(termGrams("req-ne")[0]!);
    expect(long.some((g) => termGrams("abcdef0123").includes(g))).toBe(true);
  });
});
