// Where a big body can be cut into slices that decode on their own (prepare.ts decodes and encodes
// it slice by slice, so its objects are one slice's, not the whole body's): NDJSON after a newline
// (JSON text holds none raw), a JSON array at a comma between two of its elements. Reads bytes
// only and allocates nothing per value. A body it cannot follow (not an array, a bracket closing
// the array early, a string never closed, anything after the array) gets no cuts: it is decoded
// whole, as before. Whether each slice is JSON is JSON.parse's to say. A MessagePack array is cut by
// the byte walk that bounds it (codec/bounds.ts, msgpackArrayCuts).

/** An NDJSON body's slices: slice k is body[at[k], at[k + 1]), each cut just past a newline. */
export function ndjsonCuts(body: Uint8Array, sliceBytes: number): number[] {
  const at = [0];
  for (let from = sliceBytes; from < body.length; ) {
    const newline = body.indexOf(NEWLINE, from);
    if (newline < 0 || newline + 1 >= body.length) break;
    at.push(newline + 1);
    from = newline + 1 + sliceBytes;
  }
  at.push(body.length);
  return at;
}

/**
 * A JSON array's slices: `at` holds the array's `[`, the commas cut at, and its `]`; slice k is
 * its elements between at[k] and at[k + 1] (both excluded), `elements[k]` of them (its top-level
 * commas plus one). Undefined when the body is not one JSON array this scan can follow.
 */
export function arrayCuts(body: Uint8Array, sliceBytes: number): { at: number[]; elements: number[] } | undefined {
  const length = body.length;
  let i = 0;
  while (i < length && BYTE[body[i]!] === BLANK) i++;
  if (body[i] !== OPEN_ARRAY) return undefined;
  const at = [i];
  const elements: number[] = [];
  let count = 1;
  let depth = 0; // within the array's elements
  for (i++; i < length; i++) {
    const kind = BYTE[body[i]!]!;
    if (kind <= SCALAR) continue; // blanks and scalars' bytes: one table load and a branch
    if (kind === QUOTE_BYTE) {
      i = endOfString(body, i + 1);
      if (i >= length) return undefined;
    } else if (kind === OPEN) depth++;
    else if (kind === CLOSE) {
      if (depth-- > 0) continue;
      if (body[i] !== CLOSE_ARRAY) return undefined;
      for (let j = i + 1; j < length; j++) if (BYTE[body[j]!] !== BLANK) return undefined;
      at.push(i);
      elements.push(count);
      return { at, elements };
    } else if (depth === 0) {
      // A comma between two elements: cut here once the slice is big enough.
      if (i - at[at.length - 1]! < sliceBytes) count++;
      else {
        at.push(i);
        elements.push(count);
        count = 1;
      }
    }
  }
  return undefined;
}

const NEWLINE = 0x0a,
  QUOTE = 0x22,
  BACKSLASH = 0x5c,
  OPEN_ARRAY = 0x5b,
  CLOSE_ARRAY = 0x5d;

const BLANK = 0,
  SCALAR = 1,
  QUOTE_BYTE = 2,
  OPEN = 3,
  CLOSE = 4,
  COMMA_BYTE = 5;
/** What each byte is to the scan: JSON's four blanks, structure, or part of a scalar. */
const BYTE = new Uint8Array(256).fill(SCALAR);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) BYTE[c] = BLANK;
BYTE[QUOTE] = QUOTE_BYTE;
BYTE[0x7b] = OPEN;
BYTE[OPEN_ARRAY] = OPEN;
BYTE[0x7d] = CLOSE;
BYTE[CLOSE_ARRAY] = CLOSE;
BYTE[0x2c] = COMMA_BYTE;

/** Index of the closing quote of a string whose content starts at `from` (the body's length when there is none). */
function endOfString(body: Uint8Array, from: number): number {
  for (let i = from; ; ) {
    const quote = body.indexOf(QUOTE, i);
    if (quote < 0) return body.length;
    let backslashes = 0;
    while (body[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    i = quote + 1;
  }
}
