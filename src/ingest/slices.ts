// Where a big body can be cut into slices that decode on their own (prepare.ts decodes and encodes
// it slice by slice, so its objects are one slice's, not the whole body's): NDJSON after a newline
// (JSON text holds none raw), a JSON array at a comma between two of its elements. Reads bytes
// only and allocates nothing per value. A body it cannot follow (not an array, a bracket closing
// the array early, a string never closed, anything after the array) gets no cuts: it is decoded
// whole. Whether each slice is JSON is JSON.parse's to say. A MessagePack array is cut by
// the byte walk that bounds it (codec/bounds.ts, msgpackArrayCuts).
import { CLOSE, CLOSE_ARRAY, COMMA_BYTE, endOfString, isBlank, JSON_BYTE, NEWLINE, OPEN, OPEN_ARRAY, QUOTE_BYTE, SCALAR } from "../codec/jsonbytes";

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
  while (i < length && isBlank(body[i]!)) i++;
  if (body[i] !== OPEN_ARRAY) return undefined;
  const at = [i];
  const elements: number[] = [];
  let count = 1;
  let depth = 0; // within the array's elements
  for (i++; i < length; i++) {
    const kind = JSON_BYTE[body[i]!]!;
    if (kind <= SCALAR) continue; // blanks and scalars' bytes: one table load and a branch
    if (kind === QUOTE_BYTE) {
      i = endOfString(body, i + 1);
      if (i >= length) return undefined;
    } else if (kind === OPEN) depth++;
    else if (kind === CLOSE) {
      if (depth-- > 0) continue;
      if (body[i] !== CLOSE_ARRAY) return undefined;
      for (let j = i + 1; j < length; j++) if (!isBlank(body[j]!)) return undefined;
      at.push(i);
      elements.push(count);
      return { at, elements };
    } else if (kind === COMMA_BYTE && depth === 0) {
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
