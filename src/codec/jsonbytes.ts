// JSON's bytes as a scan sees them, for the walk that bounds a body (bounds.ts) and the cutter that
// slices a big one (ingest/slices.ts): one table of byte classes and the string skip. Bytes only;
// allocates nothing.

export const QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COMMA = 0x2c,
  NEWLINE = 0x0a;
export const OPEN_OBJECT = 0x7b,
  OPEN_ARRAY = 0x5b,
  CLOSE_OBJECT = 0x7d,
  CLOSE_ARRAY = 0x5d;

/** What a byte is to a scan: a blank (a newline is one of its own, NDJSON's separator), part of a scalar, or structure. */
export const BLANK = 0,
  SCALAR = 1,
  QUOTE_BYTE = 2,
  OPEN = 3,
  CLOSE = 4,
  COMMA_BYTE = 5,
  NEWLINE_BYTE = 6;
/** Each byte's class. */
export const JSON_BYTE = new Uint8Array(256).fill(SCALAR);
for (const c of [0x20, 0x09, 0x0d]) JSON_BYTE[c] = BLANK;
JSON_BYTE[QUOTE] = QUOTE_BYTE;
JSON_BYTE[OPEN_OBJECT] = OPEN;
JSON_BYTE[OPEN_ARRAY] = OPEN;
JSON_BYTE[CLOSE_OBJECT] = CLOSE;
JSON_BYTE[CLOSE_ARRAY] = CLOSE;
JSON_BYTE[COMMA] = COMMA_BYTE;
JSON_BYTE[NEWLINE] = NEWLINE_BYTE;

/** Whether a byte is one of JSON's four blanks. */
export function isBlank(byte: number): boolean {
  const kind = JSON_BYTE[byte];
  return kind === BLANK || kind === NEWLINE_BYTE;
}

/** Index of the closing quote of a string whose content starts at `from` (the body's length when there is none). */
export function endOfString(body: Uint8Array, from: number): number {
  for (let i = from; ; ) {
    const quote = body.indexOf(QUOTE, i);
    if (quote < 0) return body.length;
    let backslashes = 0;
    while (body[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    i = quote + 1;
  }
}
