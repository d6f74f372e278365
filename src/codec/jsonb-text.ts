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
/** Where the next backslash at or after `pos` is (text.length when there is none): a string before it has no escape. */
let nextBackslash = 0;

export function jsonbText(json: string): JsonbText {
  text = json;
  pos = 0;
  nextBackslash = indexOrEnd("\\", 0);
  skipBlanks();
  let result: JsonbText;
  if (text.charCodeAt(pos) === OPEN_OBJECT) result = topObject();
  else result = { line: value(), shape: "", level: null };
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
    case OPEN_OBJECT:
      return objectText(objectMembers());
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

/** An object's members, in jsonb order, duplicates collapsed (the last one wins, as jsonb keeps it). */
interface Members {
  /** Decoded keys. */
  keys: string[];
  /** `"key": value` as jsonb prints each member. */
  texts: string[];
}

function objectMembers(): Members {
  pos++;
  const keys: string[] = [];
  const texts: string[] = [];
  skipBlanks();
  if (text.charCodeAt(pos) === CLOSE_OBJECT) {
    pos++;
    return { keys, texts };
  }
  for (;;) {
    skipBlanks();
    const token = stringToken();
    keys.push(lastEscaped ? (JSON.parse(token) as string) : token.slice(1, -1));
    skipBlanks();
    pos++; // the colon
    texts.push(`${token}: ${value()}`);
    skipBlanks();
    if (text.charCodeAt(pos++) !== COMMA) break;
  }
  if (!inJsonbOrder(keys)) return sortMembers(keys, texts);
  return { keys, texts };
}

function objectText(members: Members): string {
  const texts = members.texts;
  if (texts.length === 0) return "{}";
  let out = `{${texts[0]}`;
  for (let i = 1; i < texts.length; i++) out += `, ${texts[i]}`;
  return `${out}}`;
}

/** The top-level object: its text, its keys, and the value of "level" as ->> gives it. */
function topObject(): JsonbText {
  const members = objectMembers();
  const keys = members.keys;
  let shape = keys.length === 0 ? "" : keys[0]!;
  let levelAt = keys[0] === "level" ? 0 : -1;
  for (let i = 1; i < keys.length; i++) {
    shape += `,${keys[i]}`;
    if (levelAt < 0 && keys[i] === "level") levelAt = i;
  }
  return { line: objectText(members), shape, level: levelAt < 0 ? null : levelOf(members.texts[levelAt]!.slice('"level": '.length)) };
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
  let end = indexOrEnd('"', start + 1);
  if (nextBackslash > end) {
    pos = end + 1;
    lastEscaped = false;
    return text.slice(start, pos);
  }
  lastEscaped = true;
  let canonical = true;
  let at = nextBackslash;
  for (;;) {
    const escaped = text.charCodeAt(at + 1);
    let after = at + 2;
    if (escaped === LETTER_U) {
      if (canonical) canonical = isControlEscape(at + 2);
      after = at + 6;
    } else if (escaped === 0x2f) canonical = false; // \/ is written as /
    at = indexOrEnd("\\", after);
    if (end < after) end = indexOrEnd('"', after);
    if (at > end) break;
  }
  nextBackslash = at;
  pos = end + 1;
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

/** Whether the keys are strictly increasing in jsonb order (no duplicate either). */
function inJsonbOrder(keys: string[]): boolean {
  let previous = keys[0]!;
  let previousBytes = utf8Bytes(previous);
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    const bytes = utf8Bytes(key);
    if (compareKeys(previous, previousBytes, key, bytes) >= 0) return false;
    previous = key;
    previousBytes = bytes;
  }
  return true;
}

/** The members sorted into jsonb order; of equal keys the last one stays. */
function sortMembers(keys: string[], texts: string[]): Members {
  const bytes = keys.map(utf8Bytes);
  const order = keys.map((_, i) => i);
  // Array.prototype.sort is stable: equal keys stay in input order, so the last of a run is the one kept.
  order.sort((i, j) => compareKeys(keys[i]!, bytes[i]!, keys[j]!, bytes[j]!));
  const sortedKeys: string[] = [];
  const sortedTexts: string[] = [];
  for (let k = 0; k < order.length; k++) {
    const i = order[k]!;
    const next = order[k + 1];
    if (next !== undefined && keys[next] === keys[i]) continue;
    sortedKeys.push(keys[i]!);
    sortedTexts.push(texts[i]!);
  }
  return { keys: sortedKeys, texts: sortedTexts };
}
