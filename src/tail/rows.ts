// Rows for the live stream, from the two places they come from: a committed batch this process
// wrote (its COPY lines, still in memory) and rows read back from PostgreSQL (other instances'
// batches, resume). One TailRow is shared by every stream that shows it; its parsed event and its
// JSON text are made at most once, and only for rows of sources some stream watches.

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
  rows: readonly (Uint8Array | string)[];
}

const decoder = new TextDecoder();

/** Rows of a batch's COPY text (`id \t source_id \t dt \t raw \n`) whose source is in `watched`. */
export function rowsOfBatch(batch: CommittedRows, watched: ReadonlySet<number>): TailRow[] {
  const out: TailRow[] = [];
  for (const part of batch.rows) {
    const text = typeof part === "string" ? part : decoder.decode(part);
    let start = 0;
    while (start < text.length) {
      let end = text.indexOf("\n", start);
      if (end < 0) end = text.length;
      const tab1 = text.indexOf("\t", start);
      const tab2 = text.indexOf("\t", tab1 + 1);
      const sourceId = Number(text.slice(tab1 + 1, tab2));
      if (watched.has(sourceId)) {
        const tab3 = text.indexOf("\t", tab2 + 1);
        const raw = text.slice(tab3 + 1, end);
        out.push({
          seq: batch.seq,
          id: text.slice(start, tab1),
          sourceId,
          dt: sixDigits(text.slice(tab2 + 1, tab3)),
          // COPY text escaping: the encoder's JSON has no raw control characters, so only "\\" is escaped.
          raw: raw.includes("\\") ? raw.replaceAll("\\\\", "\\") : raw,
        });
      }
      start = end + 1;
    }
  }
  // Ids of one batch are one block; keep them ascending so a resume point inside a batch is exact.
  return out.sort((a, b) => compareIds(a.id, b.id));
}

/** The encoder writes toISOString()-style times with three or six fraction digits. */
export function sixDigits(dt: string): string {
  return dt.length === 24 ? `${dt.slice(0, 23)}000Z` : dt;
}

export function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

export function eventOf(row: TailRow): Record<string, unknown> {
  return (row.event ??= JSON.parse(row.raw) as Record<string, unknown>);
}

/** The row as §7 shows it: the event's fields, with dt, source_id and id set by logpond. */
export function textOf(row: TailRow): string {
  if (row.text !== undefined) return row.text;
  const event = { ...eventOf(row), dt: row.dt, source_id: String(row.sourceId), id: row.id };
  return (row.text = JSON.stringify(event));
}

const encoder = new TextEncoder();

/** One SSE event, the row's cursor as its id: encoded once, shared by every stream that sends it. */
export function sseOf(row: TailRow): Uint8Array {
  return (row.sse ??= encoder.encode(`id: ${row.seq}-${row.id}\ndata: ${textOf(row)}\n\n`));
}
