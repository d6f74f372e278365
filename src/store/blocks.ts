// Rows leaving the hot tier → sealed blocks (the rows of log_blocks, drizzle/0005). Pure:
// the sealer (store/sealer.ts) reads the rows and writes the blocks in one transaction.
// A block holds up to `maxEvents` events (and BLOCK_MAX_BYTES of text) of one source and one UTC
// day; a source's day is cut into blocks in (dt, id) order, as evenly as its count allows, so
// blocks do not overlap in time and a day's partition holds exactly that day. Times are compared
// as their fixed-width RFC 3339 text, exact to the microsecond for every year logpond accepts. Inside a block the lines are ordered by event shape (the
// set of top-level keys), then (dt, id): PostgreSQL's pglz finds repeats only 4 KiB back, and
// neighbours of one shape repeat most (docs/storage.md). Beside the lines: a Bloom filter of their
// grams (codec/grams.ts) and the count of events per minute and level (the histogram's input).
import { bloom } from "../codec/grams";

/** One row as the sealer reads it from a hot table. */
export interface MovedRow {
  id: string;
  source_id: string;
  /** dt as RFC 3339 UTC text with six fraction digits: sorts as dt does, and goes back into timestamptz exactly. */
  dt: string;
  /** raw::text */
  line: string;
  /** Top-level keys, comma-separated (empty for a non-object). */
  shape: string;
  /** The histogram's level: lower(left(raw->>'level', 40)), null when absent or empty. */
  level: string | null;
}

export interface Block {
  sourceId: string;
  minDt: string;
  maxDt: string;
  minId: string;
  maxId: string;
  n: number;
  ids: string[];
  dts: string[];
  body: string;
  bloom: Uint8Array | undefined;
  /** Events per (minute since the epoch, level): three arrays of one length. */
  histMinutes: number[];
  histLevels: (string | null)[];
  histCounts: number[];
}

/** The histogram's level is lower(left(raw->>'level', this)), for hot rows (query/histogram.ts) and blocks alike. */
export const LEVEL_MAX_CHARS = 40;
/** Text per block, at most: a few 1 MiB events make a block of their own (PostgreSQL caps a value at 1 GB). */
export const BLOCK_MAX_BYTES = 16 * 1024 * 1024;

interface Item {
  row: MovedRow;
  id: number;
}

const byTime = (a: Item, b: Item) => (a.row.dt < b.row.dt ? -1 : a.row.dt > b.row.dt ? 1 : a.id - b.id);

export function buildBlocks(rows: readonly MovedRow[], maxEvents: number): Block[] {
  return [...blocksOf(rows, maxEvents)];
}

/** The blocks one at a time: each costs a few ms to build, so a caller can yield between them. */
export function* blocksOf(rows: readonly MovedRow[], maxEvents: number): Generator<Block> {
  const groups = new Map<string, Item[]>();
  for (const row of rows) {
    const key = `${row.source_id} ${row.dt.slice(0, 10)}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push({ row, id: Number(row.id) });
  }
  for (const group of groups.values()) {
    group.sort(byTime);
    const count = Math.ceil(group.length / maxEvents);
    for (let k = 0; k < count; k++) {
      const slice = group.slice(Math.floor((k * group.length) / count), Math.floor(((k + 1) * group.length) / count));
      // Cut again where the text would pass BLOCK_MAX_BYTES (events of up to a few MB).
      let from = 0;
      let bytes = 0;
      for (let i = 0; i < slice.length; i++) {
        const size = slice[i]!.row.line.length * 3; // UTF-8 bytes, at most
        if (i > from && bytes + size > BLOCK_MAX_BYTES) {
          yield block(slice.slice(from, i));
          from = i;
          bytes = 0;
        }
        bytes += size;
      }
      yield block(slice.slice(from));
    }
  }
}

function block(timeOrdered: Item[]): Block {
  const first = timeOrdered[0]!;
  const last = timeOrdered[timeOrdered.length - 1]!;
  let minId = first.id;
  let maxId = first.id;
  const hist = new Map<string, { minute: number; level: string | null; n: number }>();
  // Time order: a minute's events are neighbours, so its number is parsed once per run of them.
  let minuteText = "";
  let minute = 0;
  for (const item of timeOrdered) {
    if (item.id < minId) minId = item.id;
    if (item.id > maxId) maxId = item.id;
    if (!item.row.dt.startsWith(minuteText) || minuteText === "") {
      minuteText = item.row.dt.slice(0, 16);
      minute = Date.parse(`${minuteText}:00Z`) / 60_000;
    }
    const key = `${minute} ${item.row.level ?? "\u0000"}`;
    const bucket = hist.get(key);
    if (bucket) bucket.n++;
    else hist.set(key, { minute, level: item.row.level, n: 1 });
  }
  const lines = [...timeOrdered].sort((a, b) => (a.row.shape < b.row.shape ? -1 : a.row.shape > b.row.shape ? 1 : byTime(a, b)));
  const texts = lines.map((item) => item.row.line);
  const summary = [...hist.values()];
  return {
    sourceId: first.row.source_id,
    minDt: first.row.dt,
    maxDt: last.row.dt,
    minId: String(minId),
    maxId: String(maxId),
    n: lines.length,
    ids: lines.map((item) => item.row.id),
    dts: lines.map((item) => item.row.dt),
    body: texts.join("\n"),
    bloom: bloom(texts),
    histMinutes: summary.map((s) => s.minute),
    histLevels: summary.map((s) => s.level),
    histCounts: summary.map((s) => s.n),
  };
}

/** A PostgreSQL array literal of text elements (each quoted; null → NULL). */
export function textArray(values: readonly (string | number | null)[]): string {
  return `{${values.map((v) => (v === null ? "NULL" : `"${String(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`)).join(",")}}`;
}
