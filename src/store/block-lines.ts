// A sealed block's events decoded here rather than in PostgreSQL: the query API's pages open the
// few blocks they need in logpond (query/read.ts). A v4 block's payload (store/blocks.ts `Block`)
// is its text deflated and framed as an OpenPGP message (codec/pgp.ts): line 1 `{…}` each event's
// id minus the block's min_id, line 2 `{…}` each event's dt minus min_dt in microseconds (a block
// holds one UTC day), then one JSON text per event — what logpond_block_events
// (store/sql/functions.sql) unnests. Pure: no I/O.
import { openPayload } from "../codec/pgp";

export interface BlockLine {
  id: string;
  /** RFC 3339 UTC with six fraction digits, as the query API shows it (query/read.ts DT_TEXT). */
  dt: string;
  /** The event's JSON text as jsonb prints it (raw::text). */
  line: string;
}

/** The events of a payload whose block starts at `minId` and `minDt` (DT_TEXT's form), in the payload's order. */
export function blockLines(payload: Uint8Array, minId: string, minDt: string): BlockLine[] {
  const text = openPayload(payload);
  const firstBreak = text.indexOf("\n");
  const secondBreak = text.indexOf("\n", firstBreak + 1);
  const idOffsets = arrayOf(text.slice(0, firstBreak));
  const dtOffsets = arrayOf(text.slice(firstBreak + 1, secondBreak));
  const lines = text.slice(secondBreak + 1).split("\n");
  if (idOffsets.length !== lines.length || dtOffsets.length !== lines.length) {
    throw new Error(`a block's payload (min_id ${minId}) holds ${lines.length} lines for ${idOffsets.length} ids and ${dtOffsets.length} times`);
  }
  const t = minDt.indexOf("T"); // a year may have more than four digits
  const day = minDt.slice(0, t + 1);
  const firstMicros = microsOfDay(minDt, t);
  const base = BigInt(minId);
  const out: BlockLine[] = new Array(lines.length);
  for (let k = 0; k < lines.length; k++) {
    out[k] = { id: String(base + BigInt(idOffsets[k]!)), dt: day + timeOfDay(firstMicros + dtOffsets[k]!), line: lines[k]! };
  }
  return out;
}

/** The numbers of a PostgreSQL array literal of integers, `{1,2,3}`. */
function arrayOf(literal: string): number[] {
  if (literal.length <= 2) return [];
  return literal.slice(1, -1).split(",").map(Number);
}

/** Microseconds since midnight of "…THH:MM:SS.ffffffZ", the T at `t`. */
function microsOfDay(dt: string, t: number): number {
  const digits = (at: number, count: number) => Number(dt.slice(t + at, t + at + count));
  return ((digits(1, 2) * 60 + digits(4, 2)) * 60 + digits(7, 2)) * 1_000_000 + digits(10, 6);
}

/** "HH:MM:SS.ffffffZ" of microseconds since midnight. */
function timeOfDay(micros: number): string {
  const two = (n: number) => (n < 10 ? `0${n}` : String(n));
  const fraction = micros % 1_000_000;
  const seconds = (micros - fraction) / 1_000_000;
  return `${two(Math.floor(seconds / 3600))}:${two(Math.floor(seconds / 60) % 60)}:${two(seconds % 60)}.${String(fraction).padStart(6, "0")}Z`;
}
