// PostgreSQL's text form of a jsonb value, computed in the application from the JSON text that was
// COPYed into a jsonb column: what `raw::text`, jsonb_object_keys(raw) and `raw->>'level'` give, so
// a block built from the flusher's own text holds byte-for-byte what one built from committed rows
// holds (searches match and filters hash that text: store/sealer.ts, query/prefilter.ts).
// Input: a text PostgreSQL accepted as jsonb (valid JSON, no \u0000, no lone surrogate, numbers in
// numeric's range); anything else gives an unspecified result. Pure: no I/O.

export interface JsonbText {
  /** `raw::text`: jsonb's key order, duplicates collapsed, `{"a": 1, "b": [1, 2]}` spacing, strings as escape_json writes them, numbers as numeric_out does. */
  line: string;
  /** The top-level keys in jsonb order joined by "," ("" for an empty object or a non-object). */
  shape: string;
  /** nullif(lower(left(raw->>'level', 40)), ''), lower() as the C locale does it (ASCII letters only). */
  level: string | null;
}

/** The characters of `left(…, LEVEL_CHARS)` in the sealer's query (code points, as PostgreSQL counts them). */
export const LEVEL_CHARS = 40;

const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COMMA = 0x2c,
  CLOSE_OBJECT = 0x7d,
  CLOSE_ARRAY = 0x5d,
  OPEN_OBJECT = 0x7b,
  OPEN_ARRAY = 0x5b,
  LETTER_E = 0x65,
  LETTER_CAPITAL_E = 0x45,
  LETTER_U = 0x75,
  MINUS = 0x2d,
  DIGIT_ZERO = 0x30,
  DIGIT_ONE = 0x31,
  DIGIT_NINE = 0x39;

// One parse at a time (the module is synchronous): the text and the cursor live here rather than
// in an object passed down every call.
let text = "";
let pos = 0;
/**
 * The next backslash at or after the place it was looked for from (text.length when there is
 * none): a long string that ends before it has no escape. Looked for again once a string starts
 * past it.
 */
let nextBackslash = -1;

export function jsonbText(json: string): JsonbText {
  text = json;
  pos = 0;
  nextBackslash = -1;
  ascii = !NON_ASCII.test(json);
  members = 0;
  skipBlanks();
  let result: JsonbText;
  if (text.charCodeAt(pos) === OPEN_OBJECT) result = topObject();
  else result = { line: value(), shape: "", level: null };
  // Let go of the event's strings: the stacks outlive the call.
  keys.fill("", 0, used);
  texts.fill("", 0, used);
  used = 0;
  text = "";
  return result;
}

function indexOrEnd(needle: string, from: number): number {
  const at = text.indexOf(needle, from);
  return at < 0 ? text.length : at;
}

/** Outside strings valid JSON has no character at or below a space but the four blanks. */
function skipBlanks(): void {
  while (text.charCodeAt(pos) <= 0x20) pos++;
}

function value(): string {
  skipBlanks();
  switch (text.charCodeAt(pos)) {
    case QUOTE:
      return stringToken();
    case OPEN_OBJECT: {
      const base = members;
      objectMembers();
      const out = objectText(base);
      members = base;
      return out;
    }
    case OPEN_ARRAY:
      return array();
    case 0x74: // true
      pos += 4;
      return "true";
    case 0x66: // false
      pos += 5;
      return "false";
    case 0x6e: // null
      pos += 4;
      return "null";
    default:
      return number();
  }
}

function array(): string {
  pos++;
  skipBlanks();
  if (text.charCodeAt(pos) === CLOSE_ARRAY) {
    pos++;
    return "[]";
  }
  let out = `[${value()}`;
  for (;;) {
    skipBlanks();
    if (text.charCodeAt(pos++) !== COMMA) return `${out}]`;
    out += `, ${value()}`;
  }
}

// The members of the objects being read, the innermost last, in three stacks (no array per
// object): keys (decoded, between quotes), their UTF-8 lengths, and `"key": value` as jsonb prints
// the member.
const keys: string[] = [];
const texts: string[] = [];
let bytes = new Int32Array(64);
/** Entries in use on the stacks. */
let members = 0;
/** The most entries this call has used (cleared at its end). */
let used = 0;
/** Whether the text is all ASCII: then a key's UTF-8 length is its length. */
let ascii = true;
const NON_ASCII = /[^\x00-\x7f]/;

/**
 * Reads the object at `pos` onto the stacks, from `members` on, in jsonb order with duplicates
 * collapsed (the last one wins, as jsonb keeps it); `members` ends past its last member.
 */
function objectMembers(): void {
  pos++;
  skipBlanks();
  if (text.charCodeAt(pos) === CLOSE_OBJECT) {
    pos++;
    return;
  }
  const base = members;
  let ordered = true;
  for (;;) {
    skipBlanks();
    const token = stringToken();
    // Keys are compared as their tokens, quotes included (no slice per key): equal UTF-8 lengths
    // align the quotes, so the order is the keys' own. An escaped key is compared decoded.
    const key = lastEscaped ? `"${JSON.parse(token) as string}"` : token;
    const keyBytes = ascii ? key.length : utf8Bytes(key);
    skipBlanks();
    pos++; // the colon
    const member = `${token}: ${value()}`;
    // value() may have used the stacks above this member and given them back.
    const at = members++;
    if (members > used) used = members;
    if (at === bytes.length) {
      const grown = new Int32Array(at * 2);
      grown.set(bytes);
      bytes = grown;
    }
    keys[at] = key;
    texts[at] = member;
    bytes[at] = keyBytes;
    if (ordered && at > base && compareKeys(keys[at - 1]!, bytes[at - 1]!, key, keyBytes) >= 0) ordered = false;
    skipBlanks();
    if (text.charCodeAt(pos++) !== COMMA) break;
  }
  if (!ordered) sortMembers(base);
}

/** The object whose members are on the stacks from `base` on. */
function objectText(base: number): string {
  if (members === base) return "{}";
  let out = `{${texts[base]}`;
  for (let i = base + 1; i < members; i++) out += `, ${texts[i]}`;
  return `${out}}`;
}

const LEVEL_KEY = '"level"';

/** The top-level object: its text, its keys, and the value of "level" as ->> gives it. */
function topObject(): JsonbText {
  objectMembers();
  if (members === 0) return { line: "{}", shape: "", level: null };
  let shape = keys[0]!.slice(1, -1);
  let levelAt = keys[0] === LEVEL_KEY ? 0 : -1;
  for (let i = 1; i < members; i++) {
    shape += `,${keys[i]!.slice(1, -1)}`;
    if (levelAt < 0 && keys[i] === LEVEL_KEY) levelAt = i;
  }
  const line = objectText(0);
  const level = levelAt < 0 ? null : levelOf(texts[levelAt]!.slice('"level": '.length));
  return { line, shape, level };
}

/** nullif(lower(left(value ->> text, 40)), '') from the member's jsonb text. */
function levelOf(valueText: string): string | null {
  let level: string;
  const first = valueText.charCodeAt(0);
  if (first === QUOTE) level = valueText.includes("\\") ? (JSON.parse(valueText) as string) : valueText.slice(1, -1);
  else if (first === 0x6e)
    return null; // JSON null: ->> gives SQL NULL
  else level = valueText;
  if (level.length > LEVEL_CHARS) level = level.slice(0, codePointsEnd(level, LEVEL_CHARS));
  if (level === "") return null;
  return HAS_UPPER.test(level) ? level.replace(UPPER, lowerLetter) : level;
}

const HAS_UPPER = /[A-Z]/;
const UPPER = /[A-Z]/g;
const lowerLetter = (letter: string) => String.fromCharCode(letter.charCodeAt(0) | 0x20);

/** Where the first `count` code points of `s` end (a surrogate pair is one). */
function codePointsEnd(s: string, count: number): number {
  let i = 0;
  for (let n = 0; n < count && i < s.length; n++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c < 0xdc00 ? 2 : 1;
  }
  return i;
}

/** Whether the string token just read had an escape (then its decoded key needs JSON.parse). */
let lastEscaped = false;

/**
 * A string token at `pos`, as escape_json writes it: \" \\ \b \f \n \r \t, other controls as
 * \u00xx (lowercase hex), every other character itself. A token without an escape, or whose
 * escapes are all already of that form, is its own output; any other is decoded and written again
 * (JSON.stringify escapes exactly that set, the same way, for text without lone surrogates).
 */
function stringToken(): string {
  const start = pos;
  let i = start + 1;
  // Most strings are short: a loop finds their end before a native search would have started.
  for (const stop = start + SHORT_STRING; i < stop; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      pos = i + 1;
      lastEscaped = false;
      return text.slice(start, pos);
    }
    if (c === BACKSLASH) return escapedToken(start, i);
  }
  const end = indexOrEnd('"', i);
  if (nextBackslash < i) nextBackslash = indexOrEnd("\\", i);
  if (nextBackslash < end) return escapedToken(start, nextBackslash);
  pos = end + 1;
  lastEscaped = false;
  return text.slice(start, pos);
}

/** Characters a string token is scanned for by a loop before native searches take over. */
const SHORT_STRING = 24;

/** A string token at `start` whose first backslash is at `at`. */
function escapedToken(start: number, at: number): string {
  lastEscaped = true;
  let canonical = true;
  for (;;) {
    const c = text.charCodeAt(at);
    if (c === QUOTE) break;
    if (c !== BACKSLASH) {
      at++;
      continue;
    }
    const escaped = text.charCodeAt(at + 1);
    if (escaped === LETTER_U) {
      if (canonical) canonical = isControlEscape(at + 2);
      at += 6;
    } else {
      if (escaped === 0x2f) canonical = false; // \/ is written as /
      at += 2;
    }
  }
  pos = at + 1;
  const token = text.slice(start, pos);
  return canonical ? token : JSON.stringify(JSON.parse(token) as string);
}

/** Whether the 4 hex digits at `at` are escape_json's own \u escape: 00 then [01][0-9a-f], lowercase. */
function isControlEscape(at: number): boolean {
  if (text.charCodeAt(at) !== DIGIT_ZERO || text.charCodeAt(at + 1) !== DIGIT_ZERO) return false;
  const high = text.charCodeAt(at + 2);
  if (high !== DIGIT_ZERO && high !== DIGIT_ONE) return false;
  const low = text.charCodeAt(at + 3);
  if (low >= DIGIT_ZERO && low <= DIGIT_NINE) return !(high === DIGIT_ZERO && (low === 0x38 || low === 0x39)); // \b \t
  if (low < 0x61 || low > 0x66) return false;
  // \u000a \u000c \u000d are written \n \f \r; \u000b \u000e \u000f stay as they are.
  return !(high === DIGIT_ZERO && (low === 0x61 || low === 0x63 || low === 0x64));
}

/**
 * A number token as numeric_out prints what numeric_in read: plain decimal, the exponent applied,
 * as many fraction digits as the literal had less its exponent (never fewer than 0), no sign on
 * zero. Done on the digits as text: a double would round big ones.
 */
function number(): string {
  const start = pos;
  let exponent = false;
  let nonZero = false;
  for (;;) {
    const c = text.charCodeAt(pos);
    if (c >= DIGIT_ONE && c <= DIGIT_NINE) nonZero = true;
    else if (c === LETTER_E || c === LETTER_CAPITAL_E) exponent = true;
    else if (c !== DIGIT_ZERO && c !== 0x2e && c !== MINUS && c !== 0x2b) break;
    pos++;
  }
  const literal = text.slice(start, pos);
  if (!exponent && (nonZero || literal.charCodeAt(0) !== MINUS)) return literal;
  return numericText(literal);
}

/** A JSON number literal as numeric prints it (see number()). */
export function numericText(literal: string): string {
  const negative = literal.charCodeAt(0) === MINUS;
  let e = literal.indexOf("e");
  if (e < 0) e = literal.indexOf("E");
  const mantissa = literal.slice(negative ? 1 : 0, e < 0 ? literal.length : e);
  const exponent = e < 0 ? 0 : Number(literal.slice(e + 1));
  const point = mantissa.indexOf(".");
  const digits = point < 0 ? mantissa : mantissa.slice(0, point) + mantissa.slice(point + 1);
  // Where the decimal point falls in `digits` once the exponent is applied; the fraction keeps
  // every digit after it (numeric's display scale: fraction digits less the exponent, at least 0).
  const pointAt = (point < 0 ? mantissa.length : point) + exponent;
  let whole: string;
  let fraction: string;
  if (pointAt <= 0) {
    whole = "0";
    fraction = "0".repeat(-pointAt) + digits;
  } else if (pointAt >= digits.length) {
    whole = digits + "0".repeat(pointAt - digits.length);
    fraction = "";
  } else {
    whole = digits.slice(0, pointAt);
    fraction = digits.slice(pointAt);
  }
  let lead = 0;
  while (lead < whole.length - 1 && whole.charCodeAt(lead) === DIGIT_ZERO) lead++;
  const plain = fraction === "" ? whole.slice(lead) : `${whole.slice(lead)}.${fraction}`;
  return negative && NON_ZERO_DIGIT.test(digits) ? `-${plain}` : plain;
}

const NON_ZERO_DIGIT = /[1-9]/;

/**
 * jsonb's key order: shorter UTF-8 first, then bytewise. UTF-8's byte order is code point order,
 * which is UTF-16's except that a surrogate (a code point past U+FFFF) sorts after U+E000–U+FFFF.
 */
function compareKeys(a: string, aBytes: number, b: string, bBytes: number): number {
  if (aBytes !== bBytes) return aBytes - bBytes;
  if (ascii) return a < b ? -1 : a > b ? 1 : 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return 0;
}

function utf8Bytes(s: string): number {
  let bytes = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c < 0xdc00) {
      bytes += 2; // a pair: 4 bytes for 2 units
      i++;
    } else bytes += 2;
  }
  return bytes;
}

/** Objects with more members than this are sorted through an index (insertion sort is quadratic). */
const INSERTION_MAX = 24;

/**
 * Sorts the members from `base` on into jsonb order, stably, then keeps the last of each run of
 * equal keys (the one jsonb keeps).
 */
function sortMembers(base: number): void {
  const end = members;
  if (end - base <= INSERTION_MAX) {
    for (let i = base + 1; i < end; i++) {
      const key = keys[i]!;
      const keyBytes = bytes[i]!;
      const member = texts[i]!;
      let j = i - 1;
      while (j >= base && compareKeys(keys[j]!, bytes[j]!, key, keyBytes) > 0) {
        keys[j + 1] = keys[j]!;
        bytes[j + 1] = bytes[j]!;
        texts[j + 1] = texts[j]!;
        j--;
      }
      keys[j + 1] = key;
      bytes[j + 1] = keyBytes;
      texts[j + 1] = member;
    }
  } else {
    const order = Array.from({ length: end - base }, (_, k) => base + k);
    // Array.prototype.sort is stable: equal keys stay in input order.
    order.sort((i, j) => compareKeys(keys[i]!, bytes[i]!, keys[j]!, bytes[j]!));
    const sortedKeys = order.map((i) => keys[i]!);
    const sortedTexts = order.map((i) => texts[i]!);
    const sortedBytes = order.map((i) => bytes[i]!);
    for (let k = 0; k < order.length; k++) {
      keys[base + k] = sortedKeys[k]!;
      texts[base + k] = sortedTexts[k]!;
      bytes[base + k] = sortedBytes[k]!;
    }
  }
  let kept = base;
  for (let i = base; i < end; i++) {
    if (i + 1 < end && keys[i + 1] === keys[i]) continue;
    keys[kept] = keys[i]!;
    texts[kept] = texts[i]!;
    bytes[kept] = bytes[i]!;
    kept++;
  }
  members = kept;
}
