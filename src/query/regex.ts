// Regular expressions of the query language: the part of the syntax that PostgreSQL's regex engine
// (ARE, `~`) and this service's own matcher (query/automaton.ts, for the live stream) read the same
// way, and nothing else. A pattern is parsed into a small tree and written out again for
// PostgreSQL in a canonical form (every special character escaped, groups non-capturing, `\d` as
// `[0-9]`…), so no construct whose meaning differs between the two engines (`\b` is a word boundary
// in JavaScript and a backspace in PostgreSQL, `\s` is Unicode or ASCII by engine, `.` and newlines,
// POSIX classes, back-references, look-around, embedded options) ever reaches either. Case-sensitive;
// `(?i)` at the very start folds ASCII letters only, written out as `[Aa]`, as ILIKE folds in the
// embedded database's C ctype. Pure: no I/O.

/** Characters of a pattern, at most (the query's own limit is query/parse.ts's MAX_QUERY_LENGTH). */
export const REGEX_MAX_CHARS = 256;
/** Characters a pattern matches in a row once its counts are expanded (`a{200}` is 200), at most: bounds the matcher's and PostgreSQL's automata. */
export const REGEX_MAX_SIZE = 256;
/** The largest count `{n,m}` takes (PostgreSQL's own limit). */
export const REGEX_MAX_COUNT = 255;
const MAX_CODE_POINT = 0x10ffff;

/** A pattern's tree. A set's ranges are [lo, hi, lo, hi…] of code points, sorted and merged; a literal is a set of one. */
export type Re =
  | { t: "set"; ranges: number[]; negated: boolean }
  | { t: "seq"; items: Re[] }
  | { t: "alt"; items: Re[] }
  | { t: "rep"; item: Re; min: number; max: number }
  | { t: "bol" }
  | { t: "eol" };

export interface Regex {
  tree: Re;
  ignoreCase: boolean;
}

/** A pattern the subset does not take: `index` is the 0-based character of the pattern it concerns. */
export class RegexSyntaxError extends Error {
  constructor(
    readonly index: number,
    readonly problem: string,
  ) {
    super(problem);
    this.name = "RegexSyntaxError";
  }
}

/** What the subset takes, for error messages. */
export const REGEX_ACCEPTED =
  "accepted: characters, . [abc] [^a-z] \\d \\w \\s \\D \\W \\S \\t \\n \\r \\f \\v, \\ before punctuation, ^ $ | ( ) (?: ) * + ? {n} {n,} {n,m}, and (?i) at the start";

const SPECIAL = new Set([..."\\^$.|?*+()[]{}"]);
const DIGIT = [48, 57];
const WORD = [48, 57, 65, 90, 95, 95, 97, 122];
const SPACE = [9, 13, 32, 32]; // \t \n \v \f \r and space: ASCII whitespace, as both engines' \s agree on it
const CONTROL: Record<string, number> = { t: 9, n: 10, v: 11, f: 12, r: 13 };
const CLASS_ESCAPES: Record<string, { ranges: number[]; negated: boolean }> = {
  d: { ranges: DIGIT, negated: false },
  w: { ranges: WORD, negated: false },
  s: { ranges: SPACE, negated: false },
  D: { ranges: DIGIT, negated: true },
  W: { ranges: WORD, negated: true },
  S: { ranges: SPACE, negated: true },
};

export function parseRegex(source: string): Regex {
  if (source.length > REGEX_MAX_CHARS) throw new RegexSyntaxError(REGEX_MAX_CHARS, `a pattern is at most ${REGEX_MAX_CHARS} characters`);
  const nul = source.indexOf("\0");
  if (nul >= 0) throw new RegexSyntaxError(nul, "a NUL character cannot be matched (no stored text holds one)");
  const ignoreCase = source.startsWith("(?i)");
  let i = ignoreCase ? 4 : 0;
  if (i === source.length) throw new RegexSyntaxError(i, "the pattern is empty (an empty pattern matches everything: write field:* for a field that exists)");
  const fail = (at: number, problem: string): never => {
    throw new RegexSyntaxError(at, problem);
  };
  let depth = 0;

  const alt = (): Re => {
    const branches: Re[] = [];
    for (;;) {
      const start = i;
      const branch = seq();
      if (branch.t === "seq" && branch.items.length === 0) fail(start, "an empty alternative (write a? for an optional a, not (a|))");
      branches.push(branch);
      if (source[i] !== "|") break;
      i++;
    }
    return branches.length === 1 ? branches[0]! : { t: "alt", items: branches };
  };

  const seq = (): Re => {
    const items: Re[] = [];
    while (i < source.length && source[i] !== "|" && source[i] !== ")") {
      const at = i;
      let atom = single();
      atom = quantified(atom, at);
      if (atom.t === "seq") items.push(...atom.items);
      else items.push(atom);
    }
    return items.length === 1 ? items[0]! : { t: "seq", items };
  };

  const quantified = (atom: Re, at: number): Re => {
    const c = source[i];
    if (c !== "*" && c !== "+" && c !== "?" && c !== "{") return atom;
    const quantifierAt = i;
    let min: number, max: number;
    if (c === "{") {
      const bound = /^\{([0-9]{1,4})(,([0-9]{0,4}))?\}/.exec(source.slice(i));
      if (!bound) fail(i, "a '{' starts a count such as {2}, {2,} or {1,3} (write \\{ for the character)");
      min = Number(bound![1]);
      max = bound![2] === undefined ? min : bound![3] === "" ? Infinity : Number(bound![3]);
      if (min > REGEX_MAX_COUNT || (max !== Infinity && max > REGEX_MAX_COUNT)) fail(i, `a count is at most ${REGEX_MAX_COUNT}`);
      if (max < min) fail(i, `the count ${bound![0]} has its larger number first`);
      if (max === 0) fail(i, "the count {0} repeats nothing");
      i += bound![0].length;
    } else {
      min = c === "+" ? 1 : 0;
      max = c === "?" ? 1 : Infinity;
      i++;
    }
    if (atom.t === "bol" || atom.t === "eol") fail(quantifierAt, `nothing to repeat before '${c}' (write \\${c} for the character)`);
    if (nullable(atom)) fail(at, "a repeated part that can match nothing, such as (a*)* or (a?)+ (repeat what it repeats once: a*)");
    // A lazy quantifier (`*?`) finds the same lines as a greedy one: only which text matches differs.
    if (source[i] === "?") i++;
    if (i < source.length && "*+?{".includes(source[i]!)) fail(i, `two quantifiers in a row ('${source.slice(quantifierAt, i + 1)}'): write one`);
    return { t: "rep", item: atom, min, max };
  };

  const single = (): Re => {
    const at = i;
    const c = source[i]!;
    switch (c) {
      case "(": {
        i++;
        if (source[i] === "?") {
          if (source[i + 1] !== ":") {
            const what = source.startsWith("(?i)", at)
              ? "(?i) is taken only at the very start of the pattern"
              : "look-around, named groups and inline options are not accepted";
            fail(at, `'${source.slice(at, at + 3)}': ${what}`);
          }
          i += 2;
        }
        if (++depth > 32) fail(at, "groups nested deeper than 32");
        if (source[i] === ")") fail(at, "an empty group");
        const inner = alt();
        if (source[i] !== ")") fail(at, "the group opened here is not closed (write \\( for the character)");
        i++;
        depth--;
        return inner;
      }
      case ")":
        return fail(at, "unexpected ')' (write \\) for the character)");
      case "[":
        return bracket();
      case ".":
        i++;
        return { t: "set", ranges: [0, MAX_CODE_POINT], negated: false };
      case "^":
        i++;
        return { t: "bol" };
      case "$":
        i++;
        return { t: "eol" };
      case "*":
      case "+":
      case "?":
        return fail(at, `nothing to repeat before '${c}' (write \\${c} for the character)`);
      case "{":
        return fail(at, "nothing to repeat before '{' (write \\{ for the character)");
      case "]":
      case "}":
        return fail(at, `an unmatched '${c}' (write \\${c} for the character)`);
      case "\\": {
        const escaped = escape(false);
        return "ranges" in escaped ? { t: "set", ...escaped } : literal(escaped.code);
      }
      default: {
        const code = source.codePointAt(i)!;
        i += code > 0xffff ? 2 : 1;
        return literal(code);
      }
    }
  };

  /** After a backslash: a character (`code`) or a class (`\d`…). Inside brackets the negated classes are refused. */
  const escape = (inBracket: boolean): { code: number } | { ranges: number[]; negated: boolean } => {
    const at = i;
    i++;
    if (i >= source.length) fail(at, "a '\\' ends the pattern (write \\\\ for the character)");
    const c = source[i]!;
    if (!/[A-Za-z0-9]/.test(c)) {
      const code = source.codePointAt(i)!;
      i += code > 0xffff ? 2 : 1;
      return { code };
    }
    i++;
    if (c in CONTROL) return { code: CONTROL[c]! };
    const cls = CLASS_ESCAPES[c];
    if (cls) {
      if (inBracket && cls.negated) fail(at, `'\\${c}' inside [ ] is not accepted (PostgreSQL refuses it): write [^…] around the other characters`);
      return cls;
    }
    const why =
      c === "b" || c === "B"
        ? "word boundaries are not accepted (PostgreSQL reads \\b as a backspace): write (^|[^A-Za-z0-9_])word"
        : /[0-9]/.test(c)
          ? "back-references are not accepted"
          : c === "x" || c === "u" || c === "c"
            ? "character codes are not accepted: write the character itself"
            : c === "p" || c === "P"
              ? "Unicode properties are not accepted"
              : "not accepted";
    return fail(at, `'\\${c}': ${why}; ${REGEX_ACCEPTED}`);
  };

  const bracket = (): Re => {
    const at = i;
    i++;
    const negated = source[i] === "^";
    if (negated) i++;
    const ranges: number[] = [];
    if (source[i] === "]") fail(at, "an empty class '[]' (write \\] for the character)");
    const endpoint = (): { code: number } | { ranges: number[]; negated: boolean } => {
      const c = source[i];
      if (c === undefined) return fail(at, "the class opened here is not closed (write \\[ for the character)");
      if (c === "[")
        return fail(i, "'[' inside a class: POSIX classes ([:alpha:]) and collating elements are not accepted (write [a-zA-Z], or \\[ for the character)");
      if (c === "\\") return escape(true);
      const code = source.codePointAt(i)!;
      i += code > 0xffff ? 2 : 1;
      return { code };
    };
    while (source[i] !== "]") {
      const lowAt = i;
      const low = endpoint();
      if ("ranges" in low) {
        ranges.push(...low.ranges);
        continue;
      }
      if (source[i] === "-" && i + 1 < source.length && source[i + 1] !== "]") {
        i++;
        const high = endpoint();
        if ("ranges" in high) fail(lowAt, "a range ends in a class such as \\d (write the class apart)");
        const to = (high as { code: number }).code;
        if (to < low.code) fail(lowAt, `the range '${String.fromCodePoint(low.code)}-${String.fromCodePoint(to)}' is out of order`);
        ranges.push(low.code, to);
      } else ranges.push(low.code, low.code);
    }
    i++;
    return { t: "set", ranges: normalise(ranges), negated };
  };

  const literal = (code: number): Re => ({ t: "set", ranges: [code, code], negated: false });

  const tree = alt();
  if (i < source.length) fail(i, "unexpected ')' (write \\) for the character)");
  if (size(tree) > REGEX_MAX_SIZE) fail(0, `the pattern matches more than ${REGEX_MAX_SIZE} characters in a row once its counts are expanded`);
  return { tree: ignoreCase ? foldCase(tree) : tree, ignoreCase };
}

function nullable(re: Re): boolean {
  switch (re.t) {
    case "set":
      return false;
    case "seq":
      return re.items.every(nullable);
    case "alt":
      return re.items.some(nullable);
    case "rep":
      return re.min === 0 || nullable(re.item);
    default:
      return true;
  }
}

/** Characters in a row the automaton holds for the tree: counts expanded. */
function size(re: Re): number {
  switch (re.t) {
    case "set":
      return 1;
    case "seq":
    case "alt":
      return re.items.reduce((sum, item) => sum + size(item), 0);
    case "rep":
      return size(re.item) * (re.max === Infinity ? Math.max(re.min, 1) : re.max);
    default:
      return 0;
  }
}

/** Sorted, overlapping and adjacent ranges merged. */
export function normalise(ranges: number[]): number[] {
  const pairs: [number, number][] = [];
  for (let k = 0; k < ranges.length; k += 2) pairs.push([ranges[k]!, ranges[k + 1]!]);
  pairs.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  for (const [lo, hi] of pairs) {
    if (out.length && lo <= out[out.length - 1]! + 1) out[out.length - 1] = Math.max(out[out.length - 1]!, hi);
    else out.push(lo, hi);
  }
  return out;
}

/** (?i): every set also holds the other case of its ASCII letters (a negated set then excludes both). */
function foldCase(re: Re): Re {
  switch (re.t) {
    case "set": {
      const extra: number[] = [];
      for (let k = 0; k < re.ranges.length; k += 2) {
        const lo = re.ranges[k]!,
          hi = re.ranges[k + 1]!;
        for (const [from, to, shift] of [
          [97, 122, -32],
          [65, 90, 32],
        ] as const) {
          const a = Math.max(lo, from),
            b = Math.min(hi, to);
          if (a <= b) extra.push(a + shift, b + shift);
        }
      }
      return extra.length ? { ...re, ranges: normalise([...re.ranges, ...extra]) } : re;
    }
    case "seq":
    case "alt":
      return { ...re, items: re.items.map(foldCase) };
    case "rep":
      return { ...re, item: foldCase(re.item) };
    default:
      return re;
  }
}

/** The pattern for PostgreSQL's `~`: canonical, every special character escaped, groups non-capturing. */
export function postgresPattern(regex: Regex): string {
  const write = (re: Re, inner: boolean): string => {
    switch (re.t) {
      case "set":
        return writeSet(re.ranges, re.negated);
      case "seq":
        return inner ? `(?:${re.items.map((item) => write(item, false)).join("")})` : re.items.map((item) => write(item, false)).join("");
      case "alt":
        return `(?:${re.items.map((item) => write(item, false)).join("|")})`;
      case "rep": {
        const count =
          re.min === 0 && re.max === Infinity
            ? "*"
            : re.min === 1 && re.max === Infinity
              ? "+"
              : re.min === 0 && re.max === 1
                ? "?"
                : re.max === Infinity
                  ? `{${re.min},}`
                  : re.min === re.max
                    ? `{${re.min}}`
                    : `{${re.min},${re.max}}`;
        const repeated = write(re.item, true) + count;
        return inner ? `(?:${repeated})` : repeated;
      }
      case "bol":
        return "^";
      case "eol":
        return "$";
    }
  };
  return write(regex.tree, false);
}

/** \t \n \v \f \r by their escapes (both engines read them so), for a readable pattern. */
const CONTROL_ESCAPES = ["\\t", "\\n", "\\v", "\\f", "\\r"];

function writeSet(ranges: number[], negated: boolean): string {
  if (!negated && ranges.length === 2 && ranges[0] === 0 && ranges[1] === MAX_CODE_POINT) return ".";
  if (!negated && ranges.length === 2 && ranges[0] === ranges[1]) {
    const c = String.fromCodePoint(ranges[0]!);
    return CONTROL_ESCAPES[ranges[0]! - 9] ?? (SPECIAL.has(c) ? `\\${c}` : c);
  }
  const one = (code: number) => {
    const c = String.fromCodePoint(code);
    return CONTROL_ESCAPES[code - 9] ?? ("\\]^-[".includes(c) ? `\\${c}` : c);
  };
  let body = "";
  for (let k = 0; k < ranges.length; k += 2) body += ranges[k] === ranges[k + 1] ? one(ranges[k]!) : `${one(ranges[k]!)}-${one(ranges[k + 1]!)}`;
  return `[${negated ? "^" : ""}${body}]`;
}

/**
 * Texts every match contains, from the pattern's top-level sequence of literal characters: a part
 * that is a class, a choice or an optional part ends a run. Exact without (?i); with it, letters
 * lowercased, to be looked for case-insensitively. Nothing for a top-level alternative.
 */
export function requiredLiterals(regex: Regex): string[] {
  const runs: string[] = [];
  let run = "";
  const end = () => {
    if (run) runs.push(run);
    run = "";
  };
  const items = regex.tree.t === "seq" ? regex.tree.items : [regex.tree];
  for (const item of items) {
    const char =
      item.t === "set"
        ? literalChar(item, regex.ignoreCase)
        : item.t === "rep" && item.min >= 1 && item.item.t === "set"
          ? literalChar(item.item, regex.ignoreCase)
          : undefined;
    if (char === undefined) {
      end();
      continue;
    }
    run += char;
    if (item.t === "rep") end();
  }
  end();
  return runs;
}

/** The character a set stands for when it is one (or, with (?i), one ASCII letter in both cases: its lowercase). */
function literalChar(set: Extract<Re, { t: "set" }>, ignoreCase: boolean): string | undefined {
  if (set.negated) return undefined;
  const r = set.ranges;
  if (r.length === 2 && r[0] === r[1]) return String.fromCodePoint(r[0]!);
  if (ignoreCase && r.length === 4 && r[0] === r[1] && r[2] === r[3] && r[0]! >= 65 && r[0]! <= 90 && r[2] === r[0]! + 32) return String.fromCodePoint(r[2]!);
  return undefined;
}
