// The search index's words: every run of GRAM characters inside a "segment" of an event's JSON text
// (segments are split where a bare word of the query language ends: whitespace, parentheses and
// double quotes), ASCII letters lowered as ILIKE lowers them in the embedded database's C ctype.
// A block's grams go into a Bloom filter (store/blocks.ts); a query term's grams are looked up in
// it (query/prefilter.ts): a block whose filter lacks one of them cannot contain the term, since a
// term never spans two segments. Pure: no I/O. The hash is part of the stored format: changing it,
// GRAM or the segment rule needs a migration that rebuilds every block's filter.

/** Characters per gram. Terms shorter than this skip no block (they are found by scanning). */
export const GRAM = 6;

/**
 * Calls `out` with the 32-bit hash of every gram of `text`, ASCII letters lowered on the way
 * (so a line need not be lowered first), each gram once per occurrence.
 */
export function gramHashes(text: string, out: (hash: number) => void): void {
  let run = 0; // characters since the last separator
  let h = 0;
  // Rolling polynomial hash of the last GRAM code units: h = Σ c[i]·B^(GRAM-1-i) mod 2^32.
  for (let i = 0; i < text.length; i++) {
    const c = lowered(text.charCodeAt(i));
    if (separates(c)) {
      run = 0;
      h = 0;
      continue;
    }
    if (run >= GRAM) h = (h - Math.imul(lowered(text.charCodeAt(i - GRAM)), TOP)) | 0;
    h = (Math.imul(h, BASE) + c) | 0;
    run++;
    if (run >= GRAM) out(mix(h));
  }
}

/**
 * ASCII letters lowered, and the two capitals whose lowercase is ASCII in Unicode (KELVIN SIGN → k,
 * I WITH DOT ABOVE → i): a database of another ctype than C folds them so in ILIKE and lower(), and
 * a filter must hold every gram such a database could match (an extra one only opens a block more).
 */
const lowered = (c: number) => (c >= 65 && c <= 90 ? c + 32 : c === 0x212a ? 107 : c === 0x130 ? 105 : c);

/** What ends a bare word of the query language (query/parse.ts: JavaScript's \s, parentheses, "). */
function separates(c: number): boolean {
  if (c > 32 && c < 127) return c === 34 || c === 40 || c === 41;
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13);
  return (
    c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  );
}

const BASE = 0x01000193;
/** BASE^(GRAM-1) mod 2^32: the weight of the character leaving the window. */
const TOP = (() => {
  let t = 1;
  for (let i = 0; i < GRAM - 1; i++) t = Math.imul(t, BASE);
  return t;
})();

/** murmur3's finaliser: spreads the rolling hash's bits over all 32 (a Bloom position is h mod m). */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Lowers ASCII letters only (what ILIKE does in a C ctype database; query/match.ts does the same). */
export function asciiLower(text: string): string {
  return /[^\x00-\x7f]/.test(text) ? text.replace(/[A-Z]+/g, (s) => s.toLowerCase()) : text.toLowerCase();
}

/** The distinct gram hashes of a query term (lowered), as the block filters are probed with. */
export function termGrams(term: string): number[] {
  const hashes = new Set<number>();
  gramHashes(term, (h) => hashes.add(h));
  return [...hashes];
}

/** Bits per distinct gram: one hash function, so a probe of one gram passes half the blocks that lack it. */
const BITS_PER_GRAM = 1.44;

/**
 * A Bloom filter (one hash function; bit i of byte j is position 8j + i, as PostgreSQL's
 * get_bit counts) over the grams of `lines`: about BITS_PER_GRAM bits per distinct gram, so a
 * term of g grams absent from the block passes with probability about 2^-g. Undefined when the
 * lines have no gram at all.
 */
export function bloom(lines: readonly string[]): Uint8Array | undefined {
  let count = 0;
  for (const line of lines) count += line.length;
  if (count === 0) return undefined;
  const hashes = scratch(count);
  let n = 0;
  for (const line of lines) gramHashes(line, (h) => (hashes[n++] = h));
  if (n === 0) return undefined;
  // Distinct grams, estimated by linear counting over a bitmap 8× the gram count (exact enough to size by).
  const probeBits = Math.max(64, 2 ** Math.ceil(Math.log2(n * 8)));
  const probe = new Uint32Array(probeBits / 32);
  for (let i = 0; i < n; i++) {
    const bit = hashes[i]! & (probeBits - 1);
    probe[bit >>> 5]! |= 1 << (bit & 31);
  }
  let zeros = 0;
  for (const word of probe) zeros += 32 - popcount(word);
  const distinct = zeros === 0 ? n : Math.min(n, -probeBits * Math.log(zeros / probeBits));
  const bits = Math.max(64, Math.ceil((distinct * BITS_PER_GRAM) / 8) * 8);
  const filter = new Uint8Array(bits / 8);
  for (let i = 0; i < n; i++) {
    const bit = hashes[i]! % bits;
    filter[bit >>> 3]! |= 1 << (bit & 7);
  }
  return filter;
}

let buffer = new Uint32Array(0);
function scratch(size: number): Uint32Array {
  if (buffer.length < size) buffer = new Uint32Array(Math.max(size, buffer.length * 2));
  return buffer;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
}
