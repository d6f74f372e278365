// The search index's items. Grams: every run of GRAM characters inside a "segment" of an event's
// JSON text (segments are split where a bare word of the query language ends: whitespace,
// parentheses and double quotes), ASCII letters lowered as ILIKE lowers them in the embedded
// database's C ctype. Numbers: every JSON number value in its canonical form, and every string
// whose whole text is a canonical number (what `field=value` can equal), each set at NUMBER_PROBES
// positions. A block's items go into its Bloom filter, stored bit-sliced with the other blocks of
// its group (sliced() below; store/blocks.ts); a query's are looked up in it (query/prefilter.ts):
// a block whose filter lacks one cannot contain the term, since a term never spans two segments.
// Pure: no I/O. The hashes are part of the stored format: changing them, GRAM, the segment rule or
// the number rule needs a migration that rebuilds every filter.

/** Characters per gram. Terms shorter than this skip no block (they are found by scanning). */
export const GRAM = 6;

/**
 * Calls `out` with the 32-bit hash of every gram of `text`, ASCII letters lowered on the way
 * (so a line need not be lowered first), each gram once per occurrence.
 */
export function gramHashes(text: string, out: (hash: number) => void): void {
  const hashes = new Uint32Array(text.length);
  const n = gramHashesInto(text, hashes, 0);
  for (let i = 0; i < n; i++) out(hashes[i]!);
}

/**
 * The hashes of every gram of `text` written into `into` from `at` (room for text.length more is
 * the caller's; a text has fewer grams than characters); returns where they end. No call per
 * gram: this is the sealer's hot loop.
 */
export function gramHashesInto(text: string, into: Uint32Array, at: number, seen?: Uint32Array): number {
  let run = 0;
  let h = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const code = text.charCodeAt(i);
    const c = code < 128 ? ASCII[code]! : separates(code) ? -1 : lowered(code);
    if (c < 0) {
      run = 0;
      h = 0;
      continue;
    }
    if (run >= GRAM) {
      const old = text.charCodeAt(i - GRAM);
      h = (h - Math.imul(old < 128 ? ASCII[old]! : lowered(old), TOP)) | 0;
    }
    // Rolling polynomial hash of the last GRAM code units: h = Σ c[i]·B^(GRAM-1-i) mod 2^32.
    h = (Math.imul(h, BASE) + c) | 0;
    if (++run >= GRAM) {
      const hash = mix(h);
      if (seen === undefined) into[at++] = hash;
      else if (seen[hash & SEEN_MASK] !== hash) into[at++] = seen[hash & SEEN_MASK] = hash;
      else repeats++;
    }
  }
  return at;
}

/**
 * What blockItems left out as repeats: a hash is written only when it is not the last one that
 * fell in its slot of `seen` (a direct-mapped table, SEEN_SLOTS of them). The filter is a set, so
 * a repeat sets no bit; leaving them out halves what a block's hashes take while its filter group
 * is open (a log line repeats its keys and most of its words).
 */
let repeats = 0;
const SEEN_SLOTS = 1 << 12;
const SEEN_MASK = SEEN_SLOTS - 1;
/** Slot i holds i + 1 when empty: a value no hash of that slot has. */
const SEEN_EMPTY = Uint32Array.from({ length: SEEN_SLOTS }, (_, i) => i + 1);
const seenScratch = new Uint32Array(SEEN_SLOTS);

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

/** ASCII code → its lowered code, or -1 for a separator. */
const ASCII = Int32Array.from({ length: 128 }, (_, c) => (separates(c) ? -1 : lowered(c)));

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

/** Bits per distinct position: one per gram, so a probe of one gram passes about half the blocks that lack it. */
export const BITS_PER_ITEM = 1.44;
/** Positions a number item sets: an absent number passes a filter about 2^-NUMBER_PROBES of the time. */
export const NUMBER_PROBES = 5;

/** A number as PostgreSQL prints every numeric equal to it, up to trailing zeros (query/prefilter.ts uses it too). */
export const CANONICAL_NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/;

/** The NUMBER_PROBES positions' hashes of a canonical number (`=` terms in queries; the sealer's numbers). */
export function numberHashes(canonical: string, out: (hash: number) => void = () => {}): number[] {
  let h = 0x811c9dc5;
  for (let i = 0; i < canonical.length; i++) h = Math.imul(h ^ canonical.charCodeAt(i), 0x01000193);
  const hashes: number[] = [];
  for (let k = 0; k < NUMBER_PROBES; k++) {
    const probe = mix((h + Math.imul(k + 1, 0x9e3779b9)) | 0);
    hashes.push(probe);
    out(probe);
  }
  return hashes;
}

/**
 * Calls `out` with the position hashes of every number item of a JSON text as PostgreSQL prints
 * jsonb (no exponents): number values canonicalised (trailing fraction zeros and -0's sign
 * dropped), and strings whose whole text is a canonical number (keys too: a surplus item only
 * opens a block more).
 */
export function numberItems(text: string, out: (hash: number) => void): void {
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // A string: scanned to its closing quote (escapes skipped); a candidate only if short and plain.
      let j = i + 1;
      let plain = true;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d === 92) {
          j++;
          plain = false;
        } else if (d === 34) break;
        else if (plain && !((d >= 48 && d <= 57) || d === 45 || d === 46)) plain = false;
      }
      if (plain && j > i + 1 && j - i <= 41) {
        const s = text.slice(i + 1, j);
        if (CANONICAL_NUMBER.test(s)) numberHashes(s, out);
      }
      i = j + 1;
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if ((d >= 48 && d <= 57) || d === 46 || d === 45 || d === 43 || d === 101 || d === 69) j++;
        else break;
      }
      const canonical = canonicalNumber(text.slice(i, j));
      if (canonical !== undefined) numberHashes(canonical, out);
      i = j;
    } else {
      i++;
    }
  }
}

/** A plain decimal's canonical text (trailing fraction zeros gone; -0 → 0), or undefined for anything else. */
export function canonicalNumber(text: string): string | undefined {
  const match = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?$/.exec(text);
  if (!match) return undefined;
  const fraction = (match[3] ?? "").replace(/0+$/, "");
  const digits = fraction === "" ? match[2]! : `${match[2]}.${fraction}`;
  return digits === "0" ? "0" : `${match[1]}${digits}`;
}

/** Every item position hash of a block's lines: grams, then numbers (a fresh array). */
export function blockHashes(lines: readonly string[]): Uint32Array {
  return hashLines(lines, undefined).slice();
}

/** A block's item hashes, most repeats left out, and how many items it has with them (filterBits' count). */
export interface BlockItems {
  hashes: Uint32Array;
  count: number;
}

/**
 * The item hashes of a block's lines as blockHashes gives them, but that most repeats are left out
 * (gramHashesInto's `seen`): the same filter bits, filterBits(hashes, count) the same size.
 */
export function blockItems(lines: readonly string[]): BlockItems {
  seenScratch.set(SEEN_EMPTY);
  repeats = 0;
  const found = hashLines(lines, seenScratch);
  // A copy of its size (the scratch is reused), where a block's whose filter group is sliced was.
  const hashes = spareHashes(found.length);
  hashes.set(found);
  return { hashes, count: found.length + repeats };
}

/**
 * Arrays blockItems' hashes were in, given back by releaseHashes, up to SPARE_BYTES: fresh memory
 * of a block's hashes' size (faulted in page by page) cost more than the hashes' copy into it.
 */
const spare: Uint32Array[] = [];
let spareBytes = 0;
const SPARE_BYTES = 8 << 20;

/** `length` hashes' room: in the smallest spare array that holds them, else in a new one with some more. */
function spareHashes(length: number): Uint32Array {
  let best = -1;
  for (let i = 0; i < spare.length; i++) if (spare[i]!.length >= length && (best < 0 || spare[i]!.length < spare[best]!.length)) best = i;
  if (best < 0) {
    const bytes = Buffer.allocUnsafeSlow(Math.ceil(length * 1.25) * 4);
    return new Uint32Array(bytes.buffer, bytes.byteOffset, length);
  }
  const array = spare[best]!;
  spare[best] = spare[spare.length - 1]!;
  spare.pop();
  spareBytes -= array.byteLength;
  return array.subarray(0, length);
}

/** Gives blockItems' arrays back once nothing reads them (their group's filter is sliced). */
export function releaseHashes(lists: readonly Uint32Array[]): void {
  for (const list of lists) {
    const whole = new Uint32Array(list.buffer, list.byteOffset, (list.buffer.byteLength - list.byteOffset) >>> 2);
    if (spareBytes + whole.byteLength > SPARE_BYTES) continue;
    spare.push(whole);
    spareBytes += whole.byteLength;
  }
}

/** The hashes of `lines` in the scratch (valid until the next call). */
function hashLines(lines: readonly string[], seen: Uint32Array | undefined): Uint32Array {
  let chars = 0;
  for (const line of lines) chars += line.length;
  if (scratch.length < chars + 1024) scratch = new Uint32Array(Math.max(chars + 1024, scratch.length * 2));
  let n = 0;
  for (const line of lines) n = gramHashesInto(line, scratch, n, seen);
  const push = (h: number) => {
    if (seen !== undefined) {
      if (seen[h & SEEN_MASK] === h) {
        repeats++;
        return;
      }
      seen[h & SEEN_MASK] = h;
    }
    if (n === scratch.length) {
      const grown = new Uint32Array(Math.max(1024, scratch.length * 2));
      grown.set(scratch);
      scratch = grown;
    }
    scratch[n++] = h;
  };
  for (const line of lines) numberItems(line, push);
  const found = scratch.subarray(0, n);
  if (scratch.length > SCRATCH_KEEP) scratch = new Uint32Array(0);
  return found;
}

/** hashLines' scratch, grown as needed and reused up to SCRATCH_KEEP hashes (a 1,000-event block needs about 300,000). */
let scratch = new Uint32Array(0);
const SCRATCH_KEEP = 4 << 20;

/**
 * Filter bits for a block's hashes: BITS_PER_ITEM per distinct one (estimated by linear counting), a
 * multiple of 8, at least 64. `count`: the items with their repeats (blockItems leaves most out; a
 * repeat sets no probe bit, and the estimate is made from the count with them).
 */
export function filterBits(hashes: Uint32Array, count: number = hashes.length): number {
  const n = count;
  if (n === 0) return 0;
  const probeBits = Math.max(64, 2 ** Math.ceil(Math.log2(n * 8)));
  const words = probeBits / 32;
  if (probe.length < words) probe = new Uint32Array(words);
  else probe.fill(0, 0, words);
  for (let i = 0; i < hashes.length; i++) {
    const bit = hashes[i]! & (probeBits - 1);
    probe[bit >>> 5]! |= 1 << (bit & 31);
  }
  let zeros = 0;
  for (let i = 0; i < words; i++) zeros += 32 - popcount(probe[i]!);
  if (probe.length > PROBE_KEEP_WORDS) probe = new Uint32Array(0);
  const distinct = zeros === 0 ? n : Math.min(n, -probeBits * Math.log(zeros / probeBits));
  return Math.max(64, Math.ceil((distinct * BITS_PER_ITEM) / 8) * 8);
}

/** filterBits' scratch, kept between blocks up to PROBE_KEEP_WORDS (a 1,000-event block needs 1 MiB). */
let probe = new Uint32Array(0);
const PROBE_KEEP_WORDS = 1 << 20;

/**
 * The Bloom filters of a group of blocks, `bits` positions each, bit-sliced: bit (p × blocks + k)
 * of the result (bit i of byte j is position 8j + i, as PostgreSQL's get_bit counts) is position p
 * of block k's filter. A query reads, per item, the `blocks` bits of its position — one short
 * substring of the group's value, one TOAST chunk — and learns which of the group's blocks may
 * hold it, instead of one read per block (drizzle/0007).
 */
export function sliced(hashLists: readonly Uint32Array[], bits: number): Uint8Array {
  const blocks = hashLists.length;
  const out = new Uint8Array(Math.ceil((bits * blocks) / 8));
  for (let k = 0; k < blocks; k++) {
    const hashes = hashLists[k]!;
    for (let i = 0; i < hashes.length; i++) {
      const bit = (hashes[i]! % bits) * blocks + k;
      out[bit >>> 3]! |= 1 << (bit & 7);
    }
  }
  return out;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
}
