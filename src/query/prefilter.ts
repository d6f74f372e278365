// What a query needs to find in a sealed block's text before any of its lines can match: needles
// (lowered substrings every matching event's JSON text contains, as LIKE/ILIKE patterns for
// drizzle/0007's logpond_events_matching), their grams and the canonical numbers `=` terms need,
// which the block's Bloom filter must all hold (codec/grams.ts). Only necessary conditions are derived — a
// block or line that passes still goes through the query's full condition (query/sql.ts) — so a
// search by the index returns exactly the rows a scan would. Derived from the terms a match needs
// in every case: the terms of an AND; none from OR, NOT, != or comparisons. A regex gives the runs
// of literal characters its top-level sequence needs (query/regex.ts), a field that must exist its
// key (`"key"`, as every JSON text prints a key). A needle with a character outside ASCII is left
// out (ILIKE may fold it in ways the C-ctype lowering here does not).
import { asciiLower, CANONICAL_NUMBER, numberHashes, termGrams } from "../codec/grams";
import type { Node } from "./parse";
import { parseRegex, requiredLiterals } from "./regex";
import { jsonEscape, likeEscape } from "./sql";

export interface Prefilter {
  /** Lowered texts every match contains (as strpos(lower(text), needle) finds them). */
  needles: string[];
  /** Gram hashes of the needles: a block's filter must hold every one. */
  grams: number[];
  /** Position hashes of the numbers `=` terms need (a number value equal to it, or a string that is it): likewise. */
  nums: number[];
  /** The needles as patterns a text must match: ILIKE for those with a letter, LIKE (faster) for the others. */
  ilikes: string[];
  likes: string[];
}

const SEPARATORS = /[\s()"]+/;

export function prefilter(node: Node | undefined): Prefilter {
  const needles = new Set<string>();
  const numbers = new Set<string>();
  if (node) collect(node, needles, numbers);
  const grams = new Set<number>();
  for (const needle of needles) for (const piece of needle.split(SEPARATORS)) for (const gram of termGrams(piece)) grams.add(gram);
  const pattern = (needle: string) => `%${likeEscape(needle)}%`;
  const all = [...needles];
  return {
    needles: all,
    grams: spread([...grams], MAX_GRAMS),
    nums: [...new Set([...numbers].flatMap((n) => numberHashes(n)))],
    // A needle is ASCII and lowered: case can change nothing in one without a letter.
    ilikes: all.filter((needle) => /[a-z]/.test(needle)).map(pattern),
    likes: all.filter((needle) => !/[a-z]/.test(needle)).map(pattern),
  };
}

/**
 * Grams a block's filter is probed with, at most: each absent one passes about half the blocks,
 * so 16 leave ~2^-16 of them (one in 65,536) while a long needle's 20–40 would each cost a read
 * per group of blocks (a 27-character id: 22 grams, ~45 % of a needle's time at 2 M events).
 */
export const MAX_GRAMS = 16;

/** At most `max` of the items, spread over the list (a needle's grams overlap their neighbours). */
function spread<T>(items: T[], max: number): T[] {
  if (items.length <= max) return items;
  return Array.from({ length: max }, (_, i) => items[Math.floor((i * items.length) / max)]!);
}

/** Characters JSON escapes inside a string (a run is cut at them: the pieces between are in the text as they are). */
const ESCAPED = /["\\\u0000-\u001f]/;

/** The last key of a path a match needs, quoted as the event's JSON text prints it; none for an array position. */
function addKey(path: string[], add: (text: string) => void): void {
  const key = path[path.length - 1]!;
  if (!/^-?[0-9]+$/.test(key)) add(`"${jsonEscape(key)}"`);
}

function collect(node: Node, needles: Set<string>, numbers: Set<string>): void {
  const add = (text: string) => {
    if (text !== "" && !/[^\x00-\x7f]/.test(text)) needles.add(asciiLower(text));
  };
  switch (node.kind) {
    case "and":
      for (const child of node.nodes) collect(child, needles, numbers);
      return;
    case "text":
      add(jsonEscape(node.text)); // raw::text ILIKE %escaped%
      return;
    case "prefix":
      // As `:` below: the field's text starts with the value, so holds it.
      if (jsonEscape(node.value) === node.value) add(node.value);
      return;
    case "exists":
      addKey(node.path, add);
      return;
    case "level":
      add('"level"');
      return;
    case "regex":
      // On the line: the pattern's literal runs are in the text itself. On a field: in its text,
      // which the line holds as it is only where JSON escaping leaves the run alone (as for `:`).
      for (const run of requiredLiterals(parseRegex(node.pattern))) {
        if (node.path === undefined) add(run);
        else for (const piece of run.split(ESCAPED)) add(piece);
      }
      if (node.path !== undefined) addKey(node.path, add);
      return;
    case "field":
      if (node.op === ":") {
        // A string field holds the value JSON-escaped in the event's text, an object or array field
        // as it is: only a value that escaping leaves alone is the same needle either way.
        if (jsonEscape(node.value) === node.value) add(node.value);
      } else if (node.op === "=") {
        // A string equal to the value, true/false, or a number equal to it (printed without an
        // exponent, maybe with trailing zeros: the canonical form is a prefix of every such text;
        // not -0, which equals 0 and is printed 0).
        if (node.number === undefined || (CANONICAL_NUMBER.test(node.value) && node.value !== "-0")) add(jsonEscape(node.value));
        // A number equal to it is printed as its canonical form (up to trailing zeros, which the
        // sealer drops), and a string equal to it is it: either way the block holds that number item.
        if (node.number !== undefined && CANONICAL_NUMBER.test(node.value) && node.value !== "-0") numbers.add(node.value);
      }
      return;
    default:
      return;
  }
}
