// Event ids on COPY lines: the flusher reserves one block per batch and prefixes each line of a
// chunk with its id here, off the per-event accept path. Pure bytes in, bytes out; no I/O.
// A line ends at its raw newline byte (COPY text escapes newlines inside values as \\n).
import type { Rows } from "./ring";

const TAB = 9;
const NEWLINE = 10;
const ZERO = 48;

/**
 * `id\t` before each COPY line, ids from firstId up: one indexOf pass over the bytes into one
 * buffer sized up front (every id has at most the digits of the last). Cost: bench/storage.ts.
 * Buffer#copy rather than set(subarray): no view per line; allocUnsafe: the output is written
 * whole, and zeroing fresh pages was most of the "set" samples in a json-100 profile.
 */
export function prefixIds(rows: Rows, lines: number, firstId: number): Uint8Array {
  const input = typeof rows === "string" ? Buffer.from(rows) : Buffer.isBuffer(rows) ? rows : Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength);
  const width = String(firstId + lines - 1).length + 1;
  const out = Buffer.allocUnsafe(input.length + lines * width);
  let read = 0;
  let write = 0;
  let id = firstId;
  for (let line = 0; line < lines; line++) {
    const end = input.indexOf(NEWLINE, read);
    if (end < 0) throw new Error(`a chunk said ${lines} events but holds ${line} lines`);
    write += digits(out, write, id++);
    out[write++] = TAB;
    write += input.copy(out, write, read, end + 1);
    read = end + 1;
  }
  if (read !== input.length) throw new Error(`a chunk said ${lines} events but holds more lines`);
  return out.subarray(0, write);
}

/** Writes n's decimal digits at `at`; returns how many. */
function digits(out: Uint8Array, at: number, n: number): number {
  let length = 1;
  for (let rest = n; rest >= 10; rest = Math.floor(rest / 10)) length++;
  for (let i = length - 1, rest = n; i >= 0; i--, rest = Math.floor(rest / 10)) out[at + i] = ZERO + (rest % 10);
  return length;
}

/** The id an id-prefixed COPY line starts with. */
export function idOf(line: string): number {
  return Number(line.slice(0, line.indexOf("\t")));
}

/** COPY text lines of a chunk, each with its "\n" (escaped newlines never end a line). */
export function linesOf(rows: Rows): string[] {
  return (typeof rows === "string" ? rows : Buffer.from(rows).toString()).match(/[^\n]*\n/g) ?? [];
}

/** The COPY lines without their id prefix (the inverse of prefixIds). */
export function stripIds(rows: Rows): Uint8Array {
  return Buffer.from(linesOf(rows).map((line) => line.slice(line.indexOf("\t") + 1)).join(""));
}
