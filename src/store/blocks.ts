// Rows leaving the hot tier → sealed blocks (the rows of log_blocks, drizzle/0005 and 0006). Pure:
// the sealer (store/sealer.ts) reads the rows and writes the blocks in one transaction.
// A block holds up to `maxEvents` events of one source and one UTC day; a source's day is cut into
// blocks in (dt, id) order, as evenly as its count allows, so blocks do not overlap in time and a
// day's partition holds exactly that day. Inside a block the lines are ordered by event shape (the
// set of top-level keys), then (dt, id): PostgreSQL's pglz finds repeats only 4 KiB back, and
// neighbours of one shape repeat most (docs/storage.md). Beside the lines: a Bloom filter of their
// grams (codec/grams.ts) and the count of events per minute and level (the histogram's input).
import { bloom } from "../codec/grams";

/** One row as the sealer's DELETE … RETURNING gives it. */
export interface MovedRow {
  id: string;
  source_id: string;
  /** dt as microseconds since the epoch (exact in a double until the year 2255). */
  us: string;
  /** dt as RFC 3339 text with six fraction digits (what goes back into timestamptz, exactly). */
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

const DAY_US = 86_400_000_000;
const MINUTE_US = 60_000_000;

interface Item {
  row: MovedRow;
  us: number;
  id: number;
}

export function buildBlocks(rows: readonly MovedRow[], maxEvents: number): Block[] {
  return [...blocksOf(rows, maxEvents)];
}

/** The blocks one at a time: each costs a few ms to build, so a caller can yield between them. */
export function* blocksOf(rows: readonly MovedRow[], maxEvents: number): Generator<Block> {
  const groups = new Map<string, Item[]>();
  for (const row of rows) {
    const us = Number(row.us);
    const key = `${row.source_id} ${Math.floor(us / DAY_US)}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push({ row, us, id: Number(row.id) });
  }
  for (const group of groups.values()) {
    group.sort((a, b) => a.us - b.us || a.id - b.id);
    const count = Math.ceil(group.length / maxEvents);
    for (let k = 0; k < count; k++) {
      yield block(group.slice(Math.floor((k * group.length) / count), Math.floor(((k + 1) * group.length) / count)));
    }
  }
}

function block(timeOrdered: Item[]): Block {
  const first = timeOrdered[0]!;
  const last = timeOrdered[timeOrdered.length - 1]!;
  let minId = first.id;
  let maxId = first.id;
  const hist = new Map<string, { minute: number; level: string | null; n: number }>();
  for (const item of timeOrdered) {
    if (item.id < minId) minId = item.id;
    if (item.id > maxId) maxId = item.id;
    const minute = Math.floor(item.us / MINUTE_US);
    const key = `${minute} ${item.row.level ?? "\u0000"}`;
    const bucket = hist.get(key);
    if (bucket) bucket.n++;
    else hist.set(key, { minute, level: item.row.level, n: 1 });
  }
  const lines = [...timeOrdered].sort((a, b) => (a.row.shape < b.row.shape ? -1 : a.row.shape > b.row.shape ? 1 : a.us - b.us || a.id - b.id));
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
