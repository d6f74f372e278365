// Rows leaving the hot tier → sealed blocks (the rows of log_blocks, drizzle/0005). Pure: the
// sealer (store/sealer.ts) and the seal threads (store/seal-worker.ts) write them.
// A block holds up to `maxEvents` events (and BLOCK_MAX_BYTES of text) of one source and one UTC
// day. Read back (buildBlocks), a source's day is cut into blocks in (dt, id) order, as evenly as
// its count allows, so they do not overlap in time; built as events arrive (BlockBuilder, the
// memory path), blocks of one day may overlap until a merge rewrites them (store/merge.ts). A day's partition holds exactly that day. Times are compared
// as their fixed-width RFC 3339 text, exact to the microsecond for every year logpond accepts.
// Inside a block the lines are ordered by event shape (the set of top-level keys), then (dt, id):
// neighbours of one shape repeat most (docs/storage.md). The block's text — its events' ids and
// times (as offsets from its first id and time, one line each) then the lines — is deflated here and
// framed so that pgcrypto opens it in SQL (codec/pgp.ts, drizzle/0010). Beside it: the count of
// events per minute and level (the histogram's input). Each block's Bloom filter (its grams and numbers,
// codec/grams.ts) is stored bit-sliced with its neighbours': consecutive blocks of one source and
// day whose filters need about the same size (within FILTER_SPREAD) share one log_filters row, a
// block its slot in it (drizzle/0007), so a search reads a few bytes per group, not per block. And
// the counts of its few-valued fields' values (store/summary.ts, drizzle/0012): what an
// aggregation counts without opening the block.
import { blockItems, filterBits, releaseHashes, sliced } from "../codec/grams";
import { PayloadText } from "../codec/pgp";
import { summarize } from "./summary";

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
  kind: "block";
  sourceId: string;
  minDt: string;
  maxDt: string;
  minId: string;
  maxId: string;
  n: number;
  /**
   * The block's text, deflated and framed (codec/pgp.ts): line 1 is `{…}`, each line's id minus
   * minId, line 2 `{…}`, each line's dt minus minDt in microseconds, then the events' JSON text
   * one per line (drizzle/0010's logpond_block_events reads it).
   */
  payload: Uint8Array;
  /** The log_filters row holding this block's filter, and its slot there; null: no filter (every search opens it). */
  filterId: string | null;
  filterSlot: number | null;
  /** Events per (minute since the epoch, level): three arrays of one length. */
  histMinutes: number[];
  histLevels: (string | null)[];
  histCounts: number[];
  /** The field summary (store/summary.ts) as JSON text: values of few-valued fields, counted; null: none (always opened). */
  fields: string | null;
}

/** The bit-sliced filters of consecutive blocks (a log_filters row): position p of slot k's filter is bit p × blocks + k. */
export interface Filter {
  kind: "filter";
  /** The smallest event id of its first block: unique, since every event is in one block. */
  id: string;
  sourceId: string;
  minDt: string;
  maxDt: string;
  blocks: number;
  /** Positions per block filter. */
  bits: number;
  slices: Uint8Array;
}

/** Blocks whose filters differ in size by more than this factor do not share a group (one big event would inflate the others). */
const FILTER_SPREAD = 2;

/** The histogram's level is lower(left(raw->>'level', this)), for hot rows (query/histogram.ts) and blocks alike. */
export const LEVEL_MAX_CHARS = 40;
/** Text per block, at most: a few 1 MiB events make a block of their own (PostgreSQL caps a value at 1 GB). */
export const BLOCK_MAX_BYTES = 16 * 1024 * 1024;

interface Item {
  row: MovedRow;
  id: number;
}

const byTime = (a: Item, b: Item) => (a.row.dt < b.row.dt ? -1 : a.row.dt > b.row.dt ? 1 : a.id - b.id);

/** The blocks and filters of `rows`, as the sealer writes them (every block before the filter that covers it). */
export function buildBlocks(rows: readonly MovedRow[], maxEvents: number): (Block | Filter)[] {
  return [...blocksOf(rows, maxEvents)];
}

/**
 * The blocks one at a time, each group's filter after its last block: a block costs a few ms to
 * build, so a caller can yield between them.
 */
export function* blocksOf(rows: readonly MovedRow[], maxEvents: number): Generator<Block | Filter> {
  const groups = new Map<string, Item[]>();
  for (const row of rows) {
    const key = `${row.source_id} ${row.dt.slice(0, 10)}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push({ row, id: Number(row.id) });
  }
  for (const group of groups.values()) {
    group.sort(byTime);
    const filters = new FilterGroup();
    const count = Math.ceil(group.length / maxEvents);
    for (let k = 0; k < count; k++) {
      const slice = group.slice(Math.floor((k * group.length) / count), Math.floor(((k + 1) * group.length) / count));
      // Cut again where the text would pass BLOCK_MAX_BYTES (events of up to a few MB).
      let from = 0;
      let bytes = 0;
      for (let i = 0; i <= slice.length; i++) {
        const size = i < slice.length ? slice[i]!.row.line.length * 3 : 0; // UTF-8 bytes, at most
        if (i === slice.length || (i > from && bytes + size > BLOCK_MAX_BYTES)) {
          const built = block(slice.slice(from, i));
          const closed = filters.add(built);
          if (closed) yield closed;
          yield built.block;
          from = i;
          bytes = 0;
        }
        bytes += size;
      }
    }
    const last = filters.close();
    if (last) yield last;
  }
}

/**
 * One (source, UTC day)'s blocks built as its events arrive (the sealer's memory path,
 * store/sealer.ts). It holds up to `holdEvents` events (≥ maxEvents); past that (or past
 * BLOCK_MAX_BYTES of text) the oldest maxEvents, in (dt, id) order, are cut into a block and the
 * rest kept, so an event that comes a little late (requests committed out of their order) still
 * lands in its place: blocks of one day overlap in time only where an event comes later than
 * `holdEvents − maxEvents` newer ones. What is left at the end of a generation is cut as evenly as
 * its count allows (as buildBlocks cuts a day). Reads compare each event's dt, so overlapping
 * blocks are correct, only slower; each builder's filters group its own blocks.
 */
export class BlockBuilder {
  private items: Item[] = [];
  /** items[0, sorted) are in (dt, id) order. */
  private sorted = 0;
  private bytes = 0;
  private readonly filters: FilterGroup;

  /**
   * `groupBlocks`: blocks per filter group, at most. A merge never cuts a day between blocks of one
   * filter row (store/merge-plan.ts), so where a builder's block overlaps another's (at a
   * generation's edge, or beside blocks read back) the merge rewrites the whole of the groups on
   * either side: groups as small as a read-back chunk's keep that small.
   */
  constructor(
    private readonly maxEvents: number,
    private readonly holdEvents = maxEvents,
    groupBlocks = Number.POSITIVE_INFINITY,
  ) {
    this.filters = new FilterGroup(groupBlocks);
  }

  get held(): number {
    return this.items.length;
  }

  /** The text it holds, in UTF-8 bytes at most. */
  get heldBytes(): number {
    return this.bytes;
  }

  /** What it holds as blocks now (smaller than the others: the thread's memory bound), its filter group left open. */
  flush(): (Block | Filter)[] {
    return this.cutAll();
  }

  /** Takes one event; returns the blocks (and filters) it completed, in the order they are written. */
  add(row: MovedRow): (Block | Filter)[] {
    this.items.push({ row, id: Number(row.id) });
    this.bytes += row.line.length * 3; // UTF-8 bytes, at most
    if (this.items.length < this.holdEvents && this.bytes < BLOCK_MAX_BYTES) return [];
    if (this.holdEvents <= this.maxEvents) return this.cutAll();
    const out: (Block | Filter)[] = [];
    while (this.items.length >= this.holdEvents || this.bytes >= BLOCK_MAX_BYTES) this.cutOldest(out);
    return out;
  }

  /** Whatever it holds as last blocks, and the last filter. */
  close(): (Block | Filter)[] {
    const out = this.cutAll();
    const last = this.filters.close();
    if (last) out.push(last);
    return out;
  }

  /** Everything held in (dt, id) order: the new tail sorted and merged into the sorted head. */
  private order(): Item[] {
    const items = this.items;
    if (this.sorted < items.length) {
      const tail = items.slice(this.sorted).sort(byTime);
      if (this.sorted === 0) this.items = tail;
      else {
        const merged: Item[] = new Array(items.length);
        let i = 0;
        let j = 0;
        let k = 0;
        while (i < this.sorted && j < tail.length) merged[k++] = byTime(items[i]!, tail[j]!) <= 0 ? items[i++]! : tail[j++]!;
        while (i < this.sorted) merged[k++] = items[i++]!;
        while (j < tail.length) merged[k++] = tail[j++]!;
        this.items = merged;
      }
      this.sorted = this.items.length;
    }
    return this.items;
  }

  /** The oldest maxEvents (and at most BLOCK_MAX_BYTES of text, at least one event) as a block. */
  private cutOldest(out: (Block | Filter)[]): void {
    const items = this.order();
    let count = 0;
    let bytes = 0;
    while (count < items.length && count < this.maxEvents) {
      const size = items[count]!.row.line.length * 3;
      if (count > 0 && bytes + size > BLOCK_MAX_BYTES) break;
      bytes += size;
      count++;
    }
    this.emit(items.slice(0, count), out);
    this.items = items.slice(count);
    this.sorted = this.items.length;
    this.bytes -= bytes;
  }

  /** Everything held, cut as evenly as the count allows (each block at most maxEvents and, but for one big event, BLOCK_MAX_BYTES). */
  private cutAll(): (Block | Filter)[] {
    const out: (Block | Filter)[] = [];
    if (this.items.length === 0) return out;
    const items = this.order();
    this.items = [];
    this.sorted = 0;
    this.bytes = 0;
    const count = Math.ceil(items.length / this.maxEvents);
    for (let k = 0; k < count; k++) {
      const slice = items.slice(Math.floor((k * items.length) / count), Math.floor(((k + 1) * items.length) / count));
      // The memory path's blocks were one cut of whatever was held: kept so where it fits (a builder without slack).
      if (this.holdEvents <= this.maxEvents) {
        this.emit(slice, out);
        continue;
      }
      let from = 0;
      let bytes = 0;
      for (let i = 0; i <= slice.length; i++) {
        const size = i < slice.length ? slice[i]!.row.line.length * 3 : 0;
        if (i === slice.length || (i > from && bytes + size > BLOCK_MAX_BYTES)) {
          this.emit(slice.slice(from, i), out);
          from = i;
          bytes = 0;
        }
        bytes += size;
      }
    }
    return out;
  }

  private emit(timeOrdered: Item[], out: (Block | Filter)[]): void {
    const built = block(timeOrdered);
    const closed = this.filters.add(built);
    if (closed) out.push(closed);
    out.push(built.block);
  }
}

/** Collects consecutive blocks' filters into groups of similar size. */
class FilterGroup {
  constructor(private readonly maxBlocks = Number.POSITIVE_INFINITY) {}

  private hashes: Uint32Array[] = [];
  private bits = 0;
  private first: Block | undefined;
  /** The group's time range: its blocks' least min_dt and greatest max_dt (a builder's blocks may overlap in time). */
  private minDt = "";
  private maxDt = "";

  /** Assigns the block its group and slot; returns the previous group's filter when this block starts a new one. */
  add(built: { block: Block; hashes: Uint32Array; bits: number }): Filter | undefined {
    if (built.bits === 0) return undefined; // nothing to index: the block is always opened
    let closed: Filter | undefined;
    if (this.first && (built.bits > this.bits * FILTER_SPREAD || built.bits * FILTER_SPREAD < this.bits || this.hashes.length >= this.maxBlocks))
      closed = this.close();
    if (!this.first) {
      this.first = built.block;
      this.minDt = built.block.minDt;
      this.maxDt = built.block.maxDt;
    }
    if (built.block.minDt < this.minDt) this.minDt = built.block.minDt;
    if (built.block.maxDt > this.maxDt) this.maxDt = built.block.maxDt;
    this.bits = Math.max(this.bits, built.bits);
    built.block.filterId = this.first.minId;
    built.block.filterSlot = this.hashes.length;
    this.hashes.push(built.hashes);
    return closed;
  }

  close(): Filter | undefined {
    const first = this.first;
    if (!first) return undefined;
    const filter: Filter = {
      kind: "filter",
      id: first.minId,
      sourceId: first.sourceId,
      minDt: this.minDt,
      maxDt: this.maxDt,
      blocks: this.hashes.length,
      bits: this.bits,
      slices: sliced(this.hashes, this.bits),
    };
    releaseHashes(this.hashes);
    this.hashes = [];
    this.bits = 0;
    this.first = undefined;
    return filter;
  }
}

/** The payload's text is written here, block after block (one per thread: the module is synchronous). */
const payloadText = new PayloadText();

function block(timeOrdered: Item[]): { block: Block; hashes: Uint32Array; bits: number } {
  const first = timeOrdered[0]!;
  const last = timeOrdered[timeOrdered.length - 1]!;
  let minId = first.id;
  let maxId = first.id;
  const histMinutes: number[] = [];
  const histLevels: (string | null)[] = [];
  const histCounts: number[] = [];
  // Time order: a minute's events are neighbours, so its number is parsed once per run of them,
  // and its (minute, level) counts are found among that minute's only (a minute never comes back).
  let minuteText = "";
  let minute = 0;
  const ofMinute = new Map<string | null, number>();
  // Lines of one shape, in time order; the shapes are sorted below (sorting all the lines by
  // shape, then time, orders them the same: they are in time order already).
  const byShape = new Map<string, Item[]>();
  for (const item of timeOrdered) {
    const row = item.row;
    if (item.id < minId) minId = item.id;
    if (item.id > maxId) maxId = item.id;
    if (!row.dt.startsWith(minuteText) || minuteText === "") {
      minuteText = row.dt.slice(0, 16);
      minute = Date.parse(`${minuteText}:00Z`) / 60_000;
      ofMinute.clear();
    }
    const bucket = ofMinute.get(row.level);
    if (bucket !== undefined) histCounts[bucket]!++;
    else {
      ofMinute.set(row.level, histCounts.length);
      histMinutes.push(minute);
      histLevels.push(row.level);
      histCounts.push(1);
    }
    const shaped = byShape.get(row.shape);
    if (shaped) shaped.push(item);
    else byShape.set(row.shape, [item]);
  }
  const shapes = [...byShape.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const lines: Item[] = shapes.length === 1 ? byShape.get(shapes[0]!)! : [];
  if (shapes.length > 1) for (const shape of shapes) for (const item of byShape.get(shape)!) lines.push(item);
  const texts: string[] = new Array(lines.length);
  const firstMicros = microsOfDay(first.row.dt);
  const text = payloadText;
  text.byte(0x7b);
  for (let i = 0; i < lines.length; i++) {
    if (i > 0) text.byte(0x2c);
    text.integer(lines[i]!.id - minId);
  }
  text.byte(0x7d);
  text.byte(0x0a);
  text.byte(0x7b);
  for (let i = 0; i < lines.length; i++) {
    if (i > 0) text.byte(0x2c);
    text.integer(microsOfDay(lines[i]!.row.dt) - firstMicros);
  }
  text.byte(0x7d);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.row.line;
    texts[i] = line;
    text.byte(0x0a);
    text.text(line);
  }
  const { hashes, count } = blockItems(texts);
  const built: Block = {
    kind: "block",
    sourceId: first.row.source_id,
    minDt: first.row.dt,
    maxDt: last.row.dt,
    minId: String(minId),
    maxId: String(maxId),
    n: lines.length,
    payload: text.seal(),
    filterId: null,
    filterSlot: null,
    histMinutes,
    histLevels,
    histCounts,
    fields: summarize(texts),
  };
  return { block: built, hashes, bits: filterBits(hashes, count) };
}

/** Microseconds since midnight of a MovedRow's dt ("YYYY-MM-DDTHH:MM:SS.ffffffZ"): a block holds one UTC day. */
function microsOfDay(dt: string): number {
  const t = dt.indexOf("T"); // a year may have more than four digits
  const digits = (at: number, count: number) => {
    let value = 0;
    for (let i = t + at; i < t + at + count; i++) value = value * 10 + dt.charCodeAt(i) - 48;
    return value;
  };
  return ((digits(1, 2) * 60 + digits(4, 2)) * 60 + digits(7, 2)) * 1_000_000 + digits(10, 6);
}

/** A PostgreSQL array literal of text elements (each quoted; null → NULL). */
export function textArray(values: readonly (string | number | null)[]): string {
  return `{${values.map((v) => (v === null ? "NULL" : `"${String(v).replace(/[\\"]/g, (c) => `\\${c}`)}"`)).join(",")}}`;
}
