// JSON values back to back in one body (Fluent Bit's `json_stream`: objects with no separator;
// NDJSON or `json_lines` labelled application/json): the text of each top-level value, found by
// its brackets and quotes, for the decoder to parse. Runs only after JSON.parse refused the body as
// one value, so a single-value body never pays for it. Delimits only: whether each piece is JSON is
// JSON.parse's to say. Never throws.

const QUOTE = 0x22,
  BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b,
  OPEN_ARRAY = 0x5b,
  CLOSE_OBJECT = 0x7d,
  CLOSE_ARRAY = 0x5d;

/**
 * The top-level values' texts when the text holds more than one, else undefined (one value, or
 * none: the single-value parse's error says what is wrong). A value cut short at the end is
 * returned as it is, for its parse to refuse.
 */
export function splitJsonValues(text: string): string[] | undefined {
  const pieces: string[] = [];
  let at = skipBlanks(text, 0);
  while (at < text.length) {
    const end = endOfValue(text, at);
    pieces.push(text.slice(at, end));
    at = skipBlanks(text, end);
  }
  return pieces.length > 1 ? pieces : undefined;
}

/** Past the value that starts at `from` (the end of the text when it is cut short); at least one character. */
function endOfValue(text: string, from: number): number {
  const first = text.charCodeAt(from);
  if (first === QUOTE) return Math.min(text.length, endOfString(text, from + 1) + 1);
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) return endOfScalar(text, from + 1);
  let depth = 0;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = endOfString(text, i + 1);
    else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
    else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && --depth === 0) return i + 1;
  }
  return text.length;
}

/** A number, `true`, `false` or `null` (or anything else that is not JSON): up to a blank or a bracket. */
function endOfScalar(text: string, from: number): number {
  let i = from;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (isBlank(c) || c === QUOTE || c === OPEN_OBJECT || c === OPEN_ARRAY || c === CLOSE_OBJECT || c === CLOSE_ARRAY) break;
    i++;
  }
  return i;
}

/** Index of the closing quote of a string whose content starts at `from` (or the end). */
function endOfString(text: string, from: number): number {
  for (let i = from; ; ) {
    const quote = text.indexOf('"', i);
    if (quote < 0) return text.length;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    i = quote + 1;
  }
}

function skipBlanks(text: string, from: number): number {
  let i = from;
  while (i < text.length && isBlank(text.charCodeAt(i))) i++;
  return i;
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
