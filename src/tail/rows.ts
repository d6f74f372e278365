// Rows for the live stream, from the two places they come from: a committed batch this process
// wrote (its COPY tuples, still in memory) and rows read back from PostgreSQL (other instances'
// batches, resume). One TailRow is shared by every stream that shows it; its parsed event and its
// JSON text are made at most once, and only for rows of sources some stream watches.
import { microsText } from "../codec/time";
import { fieldsOf, sourceOf, tuplesOf } from "../codec/tuples";
import { parseExact } from "../query/match";

export interface TailRow {
  seq: number;
  id: string;
  sourceId: number;
  /** RFC 3339 UTC with six fraction digits, as the query API shows it. */
  dt: string;
  /** The stored event's JSON text. */
  raw: string;
  event?: Record<string, unknown>;
  text?: string;
  sse?: Uint8Array;
}

export interface CommittedRows {
  seq: number;
  rows: readonly Uint8Array[];
}

/** Rows of a batch's tuples (codec/tuples.ts) whose source is in `watched`. */
export function rowsOfBatch(batch: CommittedRows, watched: ReadonlySet<number>): TailRow[] {
  const out: TailRow[] = [];
  for (const part of batch.rows) {
    for (const tuple of tuplesOf(part)) {
      const sourceId = sourceOf(tuple);
      if (!watched.has(sourceId)) continue;
      const { id, dt, raw } = fieldsOf(tuple);
      out.push({ seq: batch.seq, id: String(id), sourceId, dt: microsText(dt), raw });
    }
  }
  // Ids of one batch are one block; keep them ascending so a resume point inside a batch is exact.
  return out.sort((a, b) => compareIds(a.id, b.id));
}

export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The row's event, parsed once; numbers a double would round stay exact (query/match.ts), as jsonb keeps them. */
export function eventOf(row: TailRow): Record<string, unknown> {
  return (row.event ??= parseExact(row.raw) as Record<string, unknown>);
}

/**
 * The row as the query API shows it (docs/api.md, "A row"): the event's fields, with dt, source_id and id set by logpond. Spliced
 * into the stored JSON text, not parsed and re-serialised (2.5 µs a row, most of a batch's cost
 * with 50 streams; bench/read.ts): the event's own top-level dt/source_id/id are cut out and
 * logpond's appended. The text is JSON.stringify's (compact), which is what the scan relies on.
 */
export function textOf(row: TailRow): string {
  if (row.text !== undefined) return row.text;
  const ours = `"dt":"${row.dt}","source_id":"${row.sourceId}","id":"${row.id}"`;
  const members = membersOf(row.raw);
  if (members === undefined) return (row.text = JSON.stringify({ ...eventOf(row), dt: row.dt, source_id: String(row.sourceId), id: row.id }));
  const kept = members.filter((member) => !member.shadowed).map((member) => row.raw.slice(member.start, member.end));
  kept.push(ours);
  return (row.text = `{${kept.join(",")}}`);
}

const SHADOWED = new Set(["dt", "source_id", "id"]);
const QUOTE = 34,
  BACKSLASH = 92,
  COMMA = 44,
  OPEN_BRACE = 123,
  CLOSE_BRACE = 125,
  OPEN_BRACKET = 91,
  CLOSE_BRACKET = 93;

/**
 * The top-level `"key":value` members of compact JSON object text, and whether logpond shadows
 * each; undefined when the text is not shaped as expected (the caller then parses).
 */
function membersOf(raw: string): { start: number; end: number; shadowed: boolean }[] | undefined {
  if (raw.charCodeAt(0) !== OPEN_BRACE || raw.charCodeAt(raw.length - 1) !== CLOSE_BRACE) return undefined;
  const members: { start: number; end: number; shadowed: boolean }[] = [];
  let i = 1;
  while (i < raw.length - 1) {
    if (raw.charCodeAt(i) !== QUOTE) return undefined;
    const start = i;
    i = skipString(raw, i);
    const key = raw.slice(start + 1, i - 1);
    if (raw.charCodeAt(i) !== 58) return undefined; // ':'
    i++;
    let depth = 0;
    for (; i < raw.length; i++) {
      const c = raw.charCodeAt(i);
      if (c === QUOTE) i = skipString(raw, i) - 1;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (depth === 0) break;
        depth--;
      } else if (c === COMMA && depth === 0) break;
    }
    if (i >= raw.length) return undefined;
    members.push({ start, end: i, shadowed: SHADOWED.has(key) });
    if (raw.charCodeAt(i) === COMMA) i++;
  }
  return members;
}

/** Index just after the JSON string starting at `start`. */
function skipString(raw: string, start: number): number {
  for (let i = start + 1; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i + 1;
  }
  return raw.length;
}

const encoder = new TextEncoder();

/** One SSE event, the row's cursor as its id: encoded once, shared by every stream that sends it. */
export function sseOf(row: TailRow): Uint8Array {
  return (row.sse ??= encoder.encode(`id: ${row.seq}-${row.id}\ndata: ${textOf(row)}\n\n`));
}

/** The SSE bytes of several rows as one buffer. */
export function blockOf(rows: readonly TailRow[]): Uint8Array {
  return Buffer.concat(rows.map(sseOf));
}
