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
 */
export function prefixIds(rows: Rows, lines: number, firstId: number): Uint8Array {
  const input = typeof rows === "string" ? Buffer.from(rows) : rows;
  const width = String(firstId + lines - 1).length + 1;
  const out = new Uint8Array(input.length + lines * width);
  let read = 0;
  let write = 0;
  let id = firstId;
  for (let line = 0; line < lines; line++) {
    const end = input.indexOf(NEWLINE, read);
    if (end < 0) throw new Error(`a chunk said ${lines} events but holds ${line} lines`);
    write += digits(out, write, id++);
    out[write++] = TAB;
    out.set(input.subarray(read, end + 1), write);
    write += end + 1 - read;
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
