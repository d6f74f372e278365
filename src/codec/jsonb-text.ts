// PostgreSQL's text form of a jsonb value, computed in the application from the JSON text that was
// COPYed into a jsonb column: what `raw::text`, jsonb_object_keys(raw) and `raw->>'level'` give, so
// a block built from the flusher's own text holds byte-for-byte what one built from committed rows
// holds (searches match and filters hash that text: store/sealer.ts, query/prefilter.ts).
// Input: a text PostgreSQL accepted as jsonb (valid JSON, no \u0000, no lone surrogate, numbers in
// numeric's range); anything else gives an unspecified result. Pure: no I/O.
//
// One pass over the text's UTF-16 units in a buffer that holds the input, then the output: tokens
// already in jsonb's form are copied, an object's members are moved into jsonb's order once the
// object ends, and the line is made a string once. Concatenating strings instead cost about 1.4
// times as much (a rope of small pieces per event, flattened again by its first reader).

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
  COLON = 0x3a,
  SPACE = 0x20,
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
/** Written after the input: not a blank, nor part of a number, so every scan stops at it. */
const SENTINEL = 0x7e;

/** The buffer's size; one grown past BUFFER_KEEP_UNITS for a big event is let go after it. */
const BUFFER_UNITS = 1 << 14;
const BUFFER_KEEP_UNITS = 1 << 20;

// One parse at a time (the module is synchronous): the text, the buffer and the cursors live here
// rather than in an object passed down every call.
let text = "";
/** The input's units at [0, inputEnd), the sentinel, then the output from outputStart. */
let buf = new Uint16Array(BUFFER_UNITS);
let bytes = Buffer.from(buf.buffer);
/** The output narrowed to bytes when it is all Latin-1 (outputText). */
let narrow = new Uint8Array(BUFFER_UNITS);
let narrowBytes = Buffer.from(narrow.buffer);
let inputEnd = 0;
let outputStart = 0;
/** Read position in the input. */
let pos = 0;
/** Write position in the output. */
let o = 0;
/** Whether the text is all ASCII: then a key's UTF-8 length is its length. */
let ascii = true;
const NON_ASCII = /[^\x00-\x7f]/;
/**
 * The next backslash at or after the place it was looked for from (text.length when there is
 * none): a long string that ends before it has no escape. Looked for again once a string starts
 * past it.
 */
let nextBackslash = -1;

export function jsonbText(json: string): JsonbText {
  text = json;
  inputEnd = json.length;
  outputStart = inputEnd + 1;
  o = 0;
  // The output is at most twice the input (a blank-free ':' or ',' gains a space; every rewritten
  // token is shorter) but for numbers whose exponent is applied, which make room for themselves.
  reserve(outputStart + 2 * inputEnd + 16);
  bytes.write(json, 0, "utf16le");
  buf[inputEnd] = SENTINEL;
  pos = 0;
  o = outputStart;
  nextBackslash = -1;
  ascii = !NON_ASCII.test(json);
  members = 0;
  skipBlanks();
  let result: JsonbText;
  if (buf[pos] === OPEN_OBJECT) result = topObject();
  else {
    value();
    result = { line: outputText(outputStart, o), shape: "", level: null };
  }
  keyNames.fill(undefined, 0, used);
  used = 0;
  text = "";
  if (buf.length > BUFFER_KEEP_UNITS) {
    buf = new Uint16Array(BUFFER_UNITS);
    bytes = Buffer.from(buf.buffer);
  }
  return result;
}

/**
 * The output as a string: Latin-1 (JavaScriptCore's 8-bit strings) when every unit fits in a byte,
 * which most log lines do. A string decoded from UTF-16 is a 16-bit one even when all ASCII, and
 * everything the block's build does with it after (the payload's UTF-8, the summary's parse, the
 * filter's hashes) costs about twice as much on a 16-bit string.
 */
function outputText(from: number, to: number): string {
  const n = to - from;
  if (narrow.length < n) {
    narrow = new Uint8Array(Math.max(n, narrow.length * 2));
    narrowBytes = Buffer.from(narrow.buffer);
  }
  let i = 0;
  for (; i < n; i++) {
    const unit = buf[from + i]!;
    if (unit > 0xff) break;
    narrow[i] = unit;
  }
  const line = i === n ? narrowBytes.toString("latin1", 0, n) : bytes.toString("utf16le", from * 2, to * 2);
  if (narrow.length > BUFFER_KEEP_UNITS) {
    narrow = new Uint8Array(BUFFER_UNITS);
    narrowBytes = Buffer.from(narrow.buffer);
  }
  return line;
}

/** Room for `units` in the buffer (what is in it kept). */
function reserve(units: number): void {
  if (units <= buf.length) return;
  const grown = new Uint16Array(Math.max(units, buf.length * 2));
  grown.set(buf.subarray(0, o));
  buf = grown;
  bytes = Buffer.from(buf.buffer);
}

/** Outside strings valid JSON has no unit at or below a space but the four blanks. */
function skipBlanks(): void {
  while (buf[pos]! <= SPACE) pos++;
}

function value(): void {
  skipBlanks();
  switch (buf[pos]) {
    case QUOTE:
      stringToken();
      return;
    case OPEN_OBJECT: {
      const base = members;
      objectMembers();
      members = base;
      return;
    }
    case OPEN_ARRAY:
      array();
      return;
    case 0x74: // true
    case 0x6e: // null
      buf.copyWithin(o, pos, pos + 4);
      pos += 4;
      o += 4;
      return;
    case 0x66: // false
      buf.copyWithin(o, pos, pos + 5);
      pos += 5;
      o += 5;
      return;
    default:
      number();
  }
}

function array(): void {
  pos++;
  buf[o++] = OPEN_ARRAY;
  skipBlanks();
  if (buf[pos] !== CLOSE_ARRAY) {
    for (;;) {
      value();
      skipBlanks();
      if (buf[pos] !== COMMA) break;
      pos++;
      buf[o++] = COMMA;
      buf[o++] = SPACE;
    }
  }
  pos++;
  buf[o++] = CLOSE_ARRAY;
}

// The members of the objects being read, the innermost last, on stacks shared by all objects (no
// allocation per member): where each member starts, where its key token ends and where the member
// ends in the output; where its key token starts in the input; its UTF-8 length and first code
// point (most comparisons end there), and, for a key written with an escape, its decoded text.
let memberStart = new Int32Array(256);
let keyEnd = new Int32Array(256);
let memberEnd = new Int32Array(256);
let keyInput = new Int32Array(256);
let keyBytes = new Int32Array(256);
let keyFirst = new Int32Array(256);
const keyNames: (string | undefined)[] = [];
/** Entries in use on the stacks. */
let members = 0;
/** The most entries this call has used (cleared at its end). */
let used = 0;

function growStacks(): void {
  const grow = (a: Int32Array) => {
    const grown = new Int32Array(a.length * 2);
    grown.set(a);
    return grown;
  };
  memberStart = grow(memberStart);
  keyEnd = grow(keyEnd);
  memberEnd = grow(memberEnd);
  keyInput = grow(keyInput);
  keyBytes = grow(keyBytes);
  keyFirst = grow(keyFirst);
}

/**
 * Writes the object at `pos` with its members from `members` on the stacks, in jsonb order with
 * duplicates collapsed (the last one wins, as jsonb keeps it); `members` ends past its last member.
 */
function objectMembers(): void {
  const start = o;
  sortedKept = -1; // for an empty object
  pos++;
  buf[o++] = OPEN_OBJECT;
  skipBlanks();
  if (buf[pos] === CLOSE_OBJECT) {
    pos++;
    buf[o++] = CLOSE_OBJECT;
    return;
  }
  const base = members;
  let ordered = true;
  for (;;) {
    skipBlanks();
    const at = o;
    const input = pos;
    stringToken();
    const name = lastEscaped ? (JSON.parse(text.slice(input, pos)) as string) : undefined;
    const tokenEnd = o;
    skipBlanks();
    pos++; // the colon
    buf[o++] = COLON;
    buf[o++] = SPACE;
    value(); // may use the stacks above this member, and gives them back
    const m = members++;
    if (m === memberStart.length) growStacks();
    if (members > used) used = members;
    memberStart[m] = at;
    keyEnd[m] = tokenEnd;
    memberEnd[m] = o;
    keyInput[m] = input;
    keyNames[m] = name;
    if (name !== undefined) {
      keyBytes[m] = Buffer.byteLength(name);
      keyFirst[m] = name.length === 0 ? -1 : name.codePointAt(0)!;
    } else if (tokenEnd - at === 2) {
      keyBytes[m] = 0;
      keyFirst[m] = -1;
    } else {
      keyBytes[m] = ascii ? tokenEnd - at - 2 : utf8Bytes(at + 1, tokenEnd - 1);
      keyFirst[m] = codePointAt(at + 1);
    }
    if (ordered && m > base && compareMembers(m - 1, m) >= 0) ordered = false;
    skipBlanks();
    if (buf[pos] !== COMMA) break;
    pos++;
    buf[o++] = COMMA;
    buf[o++] = SPACE;
  }
  pos++;
  buf[o++] = CLOSE_OBJECT;
  // Set after the members' values: an object inside them may have been sorted too.
  sortedKept = ordered ? -1 : sortMembers(base, start);
}

/** How many members the last object sortMembers() rewrote kept (-1: the last object was in order). */
let sortedKept = -1;

const LEVEL = "level";

/** The top-level object: its text, its keys, and the value of "level" as ->> gives it. */
function topObject(): JsonbText {
  objectMembers();
  const line = outputText(outputStart, o);
  // In order, the members are the stacks' own; sorted, order[] lists them and placed[] says where they are.
  const sorted = sortedKept >= 0;
  const count = sorted ? sortedKept : members;
  if (count === 0) return { line, shape: "", level: null };
  let shape = "";
  let level: string | null = null;
  for (let k = 0; k < count; k++) {
    const m = sorted ? order[k]! : k;
    const key = keyNames[m] ?? keyText(m);
    shape = k === 0 ? key : `${shape},${key}`;
    if (key === LEVEL) {
      const at = (sorted ? placed[k]! : memberStart[m]!) - outputStart;
      const valueAt = at + keyEnd[m]! - memberStart[m]! + 2;
      level = levelOf(line.slice(valueAt, at + memberEnd[m]! - memberStart[m]!));
    }
  }
  return { line, shape, level };
}

/** nullif(lower(left(value ->> text, 40)), '') from the member's jsonb text. */
function levelOf(valueText: string): string | null {
  const first = valueText.charCodeAt(0);
  if (first === 0x6e) return null; // JSON null: ->> gives SQL NULL
  if (first === QUOTE) return levelText(valueText.includes("\\") ? (JSON.parse(valueText) as string) : valueText.slice(1, -1));
  return levelText(valueText); // a number, a boolean, an object or an array: its jsonb text
}

/** nullif(lower(left(value, 40)), ''). */
function levelText(value: string): string | null {
  const level = value.length > LEVEL_CHARS ? value.slice(0, codePointsEnd(value, LEVEL_CHARS)) : value;
  if (level === "") return null;
  return HAS_UPPER.test(level) ? level.replace(UPPER, lowerLetter) : level;
}

const LEVEL_KEY = Buffer.from('"level"');
const UNICODE_ESCAPE = Buffer.from("\\u");
/** A number ->> gives as it is written: no exponent, no leading zero, not a negative zero. */
const PLAIN_NUMBER = /^(?:0|-?[1-9][0-9]*)(?:\.[0-9]+)?$|^-0\.[0-9]*[1-9][0-9]*$/;

/**
 * jsonbText(json).level of the JSON text at bytes[start, end) (UTF-8), without making its jsonb
 * text: the last top-level "level" member found by a scan of the strings and brackets up to it
 * (the text is skipped by indexOf, not read unit by unit). A line with a \u escape is given to
 * jsonbText whole (a key so spelled may be "level"; JSON.stringify writes them only for control
 * characters and lone surrogates). A value ->> cannot give as written (an
 * object, an array, a number with an exponent) is read from jsonbText. What the flush counts per
 * minute and level in each chunk (store/chunks.ts), as the sealer does for a block.
 */
export function levelOfJson(bytes: Buffer, start: number, end: number): string | null {
  const line = bytes.subarray(start, end); // indexOf looks no further than the line
  // A key spelled with \u escapes may be "level" (JSON.stringify never writes one so): jsonbText decodes it.
  if (line.indexOf(UNICODE_ESCAPE) >= 0) return jsonbText(line.toString("utf8")).level;
  let found = line.indexOf(LEVEL_KEY);
  let valueAt = -1;
  let depth = 0;
  let i = 0;
  while (found >= 0) {
    while (i < found) {
      const c = line[i]!;
      if (c === QUOTE) i = stringEnd(line, i) + 1;
      else {
        if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
        else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
        i++;
      }
    }
    if (i === found) {
      // A string token starts here ("level" holds no backslash: its second quote ends it).
      i = found + LEVEL_KEY.length;
      let j = i;
      while (isBlank(line[j]!)) j++;
      if (depth === 1 && line[j] === COLON) {
        j++;
        while (isBlank(line[j]!)) j++;
        valueAt = j;
      }
    } // else: the match lay inside a string the scan skipped
    found = line.indexOf(LEVEL_KEY, i);
  }
  if (valueAt < 0) return null;
  const first = line[valueAt]!;
  if (first === QUOTE) {
    const close = stringEnd(line, valueAt);
    const slash = line.indexOf(BACKSLASH, valueAt);
    if (slash >= 0 && slash < close) return levelText(JSON.parse(line.toString("utf8", valueAt, close + 1)) as string);
    return levelText(line.toString("utf8", valueAt + 1, close));
  }
  if (first === 0x6e) return null; // JSON null: ->> gives SQL NULL
  if (first === 0x74) return "true";
  if (first === 0x66) return "false";
  if (first === MINUS || (first >= DIGIT_ZERO && first <= DIGIT_NINE)) {
    let k = valueAt + 1;
    while (k < line.length && !isBlank(line[k]!) && line[k] !== COMMA && line[k] !== CLOSE_OBJECT) k++;
    const number = line.toString("latin1", valueAt, k);
    if (PLAIN_NUMBER.test(number)) return levelText(number);
  }
  return jsonbText(line.toString("utf8")).level;
}

const isBlank = (c: number) => c === SPACE || c === 0x0a || c === 0x0d || c === 0x09;

/** Where the string token whose opening quote is at `at` closes (its last quote). */
function stringEnd(bytes: Buffer, at: number): number {
  for (let q = bytes.indexOf(QUOTE, at + 1); ; q = bytes.indexOf(QUOTE, q + 1)) {
    if (q < 0) return bytes.length;
    let backslashes = 0;
    while (bytes[q - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return q;
  }
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

/** Characters a string is copied by a loop before native searches take over. */
const SHORT_STRING = 24;

/**
 * Writes the string token at `pos` as escape_json writes it: \" \\ \b \f \n \r \t, other controls
 * as \u00xx (lowercase hex), every other character itself. A token without an escape, or whose
 * escapes are all already of that form, is copied; any other is decoded and written again
 * (JSON.stringify escapes exactly that set, the same way, for text without lone surrogates).
 */
function stringToken(): void {
  const start = pos;
  const at = o;
  let i = start + 1;
  buf[o++] = QUOTE;
  // Most strings are short: a loop copies them before a native search would have started.
  for (const stop = i + SHORT_STRING; i < stop; i++) {
    const c = buf[i]!;
    if (c === QUOTE) {
      buf[o++] = QUOTE;
      pos = i + 1;
      lastEscaped = false;
      return;
    }
    if (c === BACKSLASH) {
      escapedToken(start, at, i);
      return;
    }
    buf[o++] = c;
  }
  const end = indexOrEnd('"', i);
  if (nextBackslash < i) nextBackslash = indexOrEnd("\\", i);
  if (nextBackslash < end) {
    buf.copyWithin(o, i, nextBackslash);
    o += nextBackslash - i;
    escapedToken(start, at, nextBackslash);
    return;
  }
  buf.copyWithin(o, i, end + 1);
  o += end + 1 - i;
  pos = end + 1;
  lastEscaped = false;
}

function indexOrEnd(needle: string, from: number): number {
  const found = text.indexOf(needle, from);
  return found < 0 ? inputEnd : found;
}

/** Goes on with the string token at `start`, written at `at`, from its backslash at `i` (copied up to there). */
function escapedToken(start: number, at: number, i: number): void {
  lastEscaped = true;
  let canonical = true;
  for (;;) {
    const c = buf[i]!;
    if (c === QUOTE) break;
    if (c !== BACKSLASH) {
      buf[o++] = c;
      i++;
      continue;
    }
    const escaped = buf[i + 1]!;
    if (escaped === LETTER_U) {
      if (canonical) canonical = isControlEscape(i + 2);
      buf.copyWithin(o, i, i + 6);
      o += 6;
      i += 6;
    } else {
      if (escaped === 0x2f) canonical = false; // \/ is written as /
      buf[o++] = BACKSLASH;
      buf[o++] = escaped;
      i += 2;
    }
  }
  buf[o++] = QUOTE;
  pos = i + 1;
  if (canonical) return;
  const rewritten = JSON.stringify(JSON.parse(text.slice(start, pos)) as string);
  o = at + bytes.write(rewritten, at * 2, "utf16le") / 2;
}

/** Whether the 4 hex digits at `at` are escape_json's own \u escape: 00 then [01][0-9a-f], lowercase. */
function isControlEscape(at: number): boolean {
  if (buf[at] !== DIGIT_ZERO || buf[at + 1] !== DIGIT_ZERO) return false;
  const high = buf[at + 2]!;
  if (high !== DIGIT_ZERO && high !== DIGIT_ONE) return false;
  const low = buf[at + 3]!;
  if (low >= DIGIT_ZERO && low <= DIGIT_NINE) return !(high === DIGIT_ZERO && (low === 0x38 || low === 0x39)); // \b \t
  if (low < 0x61 || low > 0x66) return false;
  // \u000a \u000c \u000d are written \n \f \r; \u000b \u000e \u000f stay as they are.
  return !(high === DIGIT_ZERO && (low === 0x61 || low === 0x63 || low === 0x64));
}

/**
 * Writes the number token at `pos` as numeric_out prints what numeric_in read: plain decimal, the
 * exponent applied, as many fraction digits as the literal had less its exponent (never fewer
 * than 0), no sign on zero. A literal already in that form is copied.
 */
function number(): void {
  const start = pos;
  let exponent = false;
  let nonZero = false;
  for (;;) {
    const c = buf[pos]!;
    if (c >= DIGIT_ONE && c <= DIGIT_NINE) nonZero = true;
    else if (c === LETTER_E || c === LETTER_CAPITAL_E) exponent = true;
    else if (c !== DIGIT_ZERO && c !== 0x2e && c !== MINUS && c !== 0x2b) break;
    pos++;
  }
  if (!exponent && (nonZero || buf[start] !== MINUS)) {
    buf.copyWithin(o, start, pos);
    o += pos - start;
    return;
  }
  const plain = numericText(text.slice(start, pos));
  reserve(o + plain.length + (inputEnd - pos) * 2 + 16);
  o += bytes.write(plain, o * 2, "utf16le") / 2;
}

/** A JSON number literal as numeric prints it (see number()); done on the digits as text: a double would round big ones. */
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

/** The UTF-8 length of the output's units [from, to). */
function utf8Bytes(from: number, to: number): number {
  let n = to - from;
  for (let i = from; i < to; i++) {
    const c = buf[i]!;
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c < 0xdc00 || c >= 0xe000) n += 2; // a pair's high half: 4 bytes for its 2 units
  }
  return n;
}

/** The code point at `i` of the buffer (a surrogate pair read whole). */
function codePointAt(i: number): number {
  const c = buf[i]!;
  if (c < 0xd800 || c >= 0xdc00) return c;
  return 0x10000 + ((c - 0xd800) << 10) + (buf[i + 1]! - 0xdc00);
}

/**
 * jsonb's key order of members `a` and `b`: shorter UTF-8 first, then bytewise, which is code
 * point order. Most pairs differ in length or first code point; the others are compared whole.
 */
function compareMembers(a: number, b: number): number {
  const length = keyBytes[a]! - keyBytes[b]!;
  if (length !== 0) return length;
  const first = keyFirst[a]! - keyFirst[b]!;
  if (first !== 0) return first;
  const nameA = keyNames[a];
  const nameB = keyNames[b];
  if (nameA === undefined && nameB === undefined) return compareUnits(memberStart[a]! + 1, keyEnd[a]! - 1, memberStart[b]! + 1, keyEnd[b]! - 1);
  return compareStrings(nameA ?? keyText(a), nameB ?? keyText(b));
}

/** The decoded key of a member written without an escape. */
function keyText(m: number): string {
  return text.slice(keyInput[m]! + 1, keyInput[m]! + keyEnd[m]! - memberStart[m]! - 1);
}

/**
 * Code point order of two runs of UTF-16 units: UTF-16's own order but that a surrogate (a code
 * point past U+FFFF) sorts after U+E000–U+FFFF. Equal UTF-8 lengths: one is no proper prefix of the other.
 */
function compareUnits(a: number, aEnd: number, b: number, bEnd: number): number {
  const n = Math.min(aEnd - a, bEnd - b);
  for (let i = 0; i < n; i++) {
    const x = buf[a + i]!;
    const y = buf[b + i]!;
    if (x !== y) return unitOrder(x, y);
  }
  return 0;
}

function compareStrings(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return unitOrder(x, y);
  }
  return a.length - b.length;
}

function unitOrder(x: number, y: number): number {
  if (x >= 0xd800 && y >= 0xd800) {
    x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
    y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
  }
  return x - y;
}

/** Objects with more members than this are sorted through Array.prototype.sort (insertion sort is quadratic). */
const INSERTION_MAX = 24;
/** The members of the last object sorted, in jsonb order, duplicates left out, and where each now starts. */
let order = new Int32Array(64);
let placed = new Int32Array(64);

/**
 * Moves the members from `base` on (the object written from `start`) into jsonb order, stably,
 * keeping the last of each run of equal keys (the one jsonb keeps), and rewrites the object.
 * Returns how many members it kept (order[] and placed[] list them); the stacks are left as they
 * were (the top level reads them through order[]).
 */
function sortMembers(base: number, start: number): number {
  const count = members - base;
  if (order.length < count) {
    order = new Int32Array(count * 2);
    placed = new Int32Array(count * 2);
  }
  if (count <= INSERTION_MAX) {
    for (let i = 0; i < count; i++) {
      const m = base + i;
      let j = i - 1;
      while (j >= 0 && compareMembers(order[j]!, m) > 0) {
        order[j + 1] = order[j]!;
        j--;
      }
      order[j + 1] = m;
    }
  } else {
    order.set(Array.from({ length: count }, (_, i) => base + i).sort(compareMembers)); // stable
  }
  // Equal keys are compared while the object is still where they point.
  let kept = 0;
  for (let k = 0; k < count; k++) {
    if (k + 1 < count && compareMembers(order[k]!, order[k + 1]!) === 0) continue;
    order[kept++] = order[k]!;
  }
  // The object moves past the output, then its members come back in order.
  const end = o;
  const shift = end - start;
  reserve(end + shift);
  buf.copyWithin(end, start, end);
  o = start + 1;
  for (let k = 0; k < kept; k++) {
    if (k > 0) {
      buf[o++] = COMMA;
      buf[o++] = SPACE;
    }
    const m = order[k]!;
    placed[k] = o;
    const from = memberStart[m]! + shift;
    const length = memberEnd[m]! - memberStart[m]!;
    buf.copyWithin(o, from, from + length);
    o += length;
  }
  buf[o++] = CLOSE_OBJECT;
  return kept;
}

/** A field path as `jsonbValueAt` walks it: each key's bytes, and its index when an array's element is asked for. */
export interface JsonbPath {
  keys: Buffer[];
  /** What `#>` makes of the key on an array (strtoint's rules: optional minus, decimal digits, int's range); null: no element. */
  indexes: (number | null)[];
}

const INDEX = /^-?[0-9]+$/;
const INT_MAX = 2_147_483_647;

/** `path` ("a.b.0", the query API's field paths) as `jsonbValueAt` takes it. */
export function jsonbPath(path: string): JsonbPath {
  const segments = path.split(".");
  return {
    keys: segments.map((segment) => Buffer.from(segment, "utf8")),
    // strtoint sets errno past int's range, and INT_MIN is refused as a negative subscript.
    indexes: segments.map((segment) => (INDEX.test(segment) && Math.abs(Number(segment)) <= INT_MAX ? Number(segment) : null)),
  };
}

/**
 * The value `raw #> path` gives for the line at bytes[start, end) (jsonb's text): where its text
 * lies, [at, to), or undefined where PostgreSQL gives NULL (a key not there, an index past the
 * array's ends, a scalar on the way). A negative index counts from the array's end, as
 * jsonb_get_element does. The line's text is not parsed: strings and brackets are skipped by scans.
 */
export function jsonbValueAt(bytes: Buffer, start: number, end: number, path: JsonbPath): { at: number; to: number } | undefined {
  let at = pastBlanks(bytes, start, end);
  for (let k = 0; k < path.keys.length; k++) {
    const open = bytes[at];
    if (open === OPEN_OBJECT) {
      const key = path.keys[k]!;
      let i = pastBlanks(bytes, at + 1, end);
      let found = -1;
      while (found < 0 && bytes[i] === QUOTE) {
        const close = stringEnd(bytes, i);
        // A key with an escape holds a character no field path has (query/request.ts FIELD_PATH).
        const same = close - i - 1 === key.length && bytes.compare(key, 0, key.length, i + 1, close) === 0;
        i = pastBlanks(bytes, pastBlanks(bytes, close + 1, end) + 1, end); // past the colon
        if (same) found = i;
        else i = nextMember(bytes, valueEnd(bytes, i, end), end);
      }
      if (found < 0) return undefined;
      at = found;
    } else if (open === OPEN_ARRAY) {
      const index = path.indexes[k];
      if (index === null || index === undefined) return undefined;
      const elements: number[] = [];
      let i = pastBlanks(bytes, at + 1, end);
      // A non-negative index stops at its element; a negative one needs the array's size.
      while (bytes[i] !== CLOSE_ARRAY && i < end && (index < 0 || elements.length <= index)) {
        elements.push(i);
        i = nextMember(bytes, valueEnd(bytes, i, end), end);
      }
      const chosen = index < 0 ? elements.length + index : index;
      if (chosen < 0 || chosen >= elements.length) return undefined;
      at = elements[chosen]!;
    } else return undefined;
  }
  return { at, to: valueEnd(bytes, at, end) };
}

/**
 * `raw #>> path` of the line at bytes[start, end) (jsonb's text), cut to `chars` code points as
 * left() cuts: a string's text, a number's as numeric prints it (the line's own), an object or an
 * array as jsonb prints it (the line's own too), true or false; null for JSON null and for what
 * `#>` gives NULL. `number`: whether the value is a JSON number (jsonb_typeof 'number').
 */
export function jsonbTextAt(bytes: Buffer, start: number, end: number, path: JsonbPath, chars: number): { text: string | null; number: boolean } {
  const found = jsonbValueAt(bytes, start, end, path);
  if (found === undefined) return { text: null, number: false };
  const first = bytes[found.at]!;
  let text: string;
  if (first === QUOTE) {
    // Looked for in the value only: the rest of a block's text may hold none.
    const escaped = bytes.subarray(found.at, found.to).indexOf(BACKSLASH) >= 0;
    text = escaped ? (JSON.parse(bytes.toString("utf8", found.at, found.to)) as string) : bytes.toString("utf8", found.at + 1, found.to - 1);
  } else if (first === 0x6e) return { text: null, number: false };
  else text = bytes.toString("utf8", found.at, found.to);
  return {
    text: text.length > chars ? text.slice(0, codePointsEnd(text, chars)) : text,
    number: first === MINUS || (first >= DIGIT_ZERO && first <= DIGIT_NINE),
  };
}

function pastBlanks(bytes: Buffer, at: number, end: number): number {
  while (at < end && isBlank(bytes[at]!)) at++;
  return at;
}

/** Past the comma after a member or an element, or at the bracket that closes its container. */
function nextMember(bytes: Buffer, at: number, end: number): number {
  const i = pastBlanks(bytes, at, end);
  return bytes[i] === COMMA ? pastBlanks(bytes, i + 1, end) : i;
}

/** Where the value at `at` ends: past its string's quote, its container's bracket, or its scalar's last character. */
function valueEnd(bytes: Buffer, at: number, end: number): number {
  const first = bytes[at];
  if (first === QUOTE) return stringEnd(bytes, at) + 1;
  if (first === OPEN_OBJECT || first === OPEN_ARRAY) {
    let depth = 0;
    for (let i = at; i < end; i++) {
      const c = bytes[i]!;
      if (c === QUOTE) i = stringEnd(bytes, i);
      else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && --depth === 0) return i + 1;
    }
    return end;
  }
  let i = at;
  while (i < end && !isBlank(bytes[i]!) && bytes[i] !== COMMA && bytes[i] !== CLOSE_OBJECT && bytes[i] !== CLOSE_ARRAY) i++;
  return i;
}
