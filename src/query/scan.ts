// A query's events counted inside sealed v4 blocks by the application, as PostgreSQL counts them
// through logpond_events_matching (src/store/sql/functions.sql) and query/sql.ts: each payload
// opened (codec/pgp.ts), each line in the window matched, counted per (bucket, level). Pure and
// synchronous: it runs on the scan threads (query/scan-pool.ts), never on the HTTP thread.
// - A line is matched on its text first: it must hold every needle (query/prefilter.ts), ASCII
//   letters lowered as ILIKE lowers them in the embedded database's C ctype. Words (`text` terms)
//   are then found in the line's text, as query/sql.ts finds them on `line`; every other term is
//   decided by query/match.ts on the line parsed once, the predicate the live tail uses (both
//   checked against PostgreSQL: test/integration/query-language.test.ts,
//   test/integration/scan-threads.test.ts).
// - The level is nullif(lower(left(raw->>'level', 40)), '') (codec/jsonb-text.ts levelOfJson); the
//   caller folds it into its severity in SQL, as it folds PostgreSQL's own counts.
// - The bucket is floor(extract(epoch from dt) / bucketSeconds), in exact microseconds.
// - A field's value (an aggregation's, a histogram's by a field) is `raw #>> path` cut as left()
//   cuts it (codec/jsonb-text.ts jsonbTextAt), or logpond's own id, source_id and dt as the rows
//   show them; the caller applies in SQL what query/aggregate.ts `expressions` applies after (the
//   level's fold), so the threads' values and PostgreSQL's meet in one statement.
import { asciiLower } from "../codec/grams";
import { jsonbPath, jsonbTextAt, levelOfJson } from "../codec/jsonb-text";
import { openPayloadBytes } from "../codec/pgp";
import { unixMicrosText } from "../codec/time";
import { LEVEL_MAX_CHARS } from "../store/blocks";
import { arrayLine } from "../store/chunks";
import { compileMatcher, parseExact } from "./match";
import type { Node } from "./parse";
import { prefilter } from "./prefilter";
import { jsonEscape } from "./sql";

/** A value longer than this is cut before counting, so one odd event cannot make a huge key (query/aggregate.ts cuts PostgreSQL's the same). */
export const VALUE_MAX_CHARS = 200;

/** A batch of blocks as logpond_blocks_matching gives them: what every call carries. */
export interface BlockBatch {
  payloads: Uint8Array[];
  /** Each block's first event time, in microseconds since the Unix epoch (decimal text). */
  minUs: string[];
  /** Each block's first id and source (decimal text). */
  minIds: string[];
  sources: string[];
}

export interface CountRequest extends BlockBatch {
  /** The window in microseconds since the epoch: [fromUs, toUs], or [fromUs, toUs) when not toIncluded. */
  fromUs: string;
  toUs: string;
  toIncluded: boolean;
  bucketSeconds: number;
  query: Node;
  /** Counted per this field's value instead of the level (query/histogram-by.ts). */
  by?: string;
}

/** Events per (bucket, level), one entry per distinct pair. */
export interface Counts {
  buckets: string[];
  levels: (string | null)[];
  counts: number[];
}

export function countBlocks(request: CountRequest): Counts {
  const match = lineMatcher(request.query);
  const from = BigInt(request.fromUs);
  const to = BigInt(request.toUs) - (request.toIncluded ? 0n : 1n);
  const value = request.by === undefined ? undefined : fieldValue(request.by);
  const totals = new Map<string, { bucket: bigint; level: string | null; n: number }>();
  for (let k = 0; k < request.payloads.length; k++) {
    const min = BigInt(request.minUs[k]!);
    const bucketOf = buckets(min, request.bucketSeconds)!;
    const event = eventOf(request, k);
    eachMatch(request.payloads[k]!, match, clamp(from - min), clamp(to - min), (text, start, end, offset, idOffset) => {
      const bucket = bucketOf(offset);
      const level = value ? value(event.at(text, start, end, offset, idOffset)) : levelOfJson(text, start, end);
      const key = level === null ? String(bucket) : `${bucket} ${level}`;
      const entry = totals.get(key);
      if (entry) entry.n++;
      else totals.set(key, { bucket, level, n: 1 });
    });
  }
  const counts: Counts = { buckets: [], levels: [], counts: [] };
  for (const { bucket, level, n } of totals.values()) {
    counts.buckets.push(String(bucket));
    counts.levels.push(level);
    counts.counts.push(n);
  }
  return counts;
}

export interface TallyRequest extends BlockBatch {
  /** The window, both ends included (µs since the Unix epoch). */
  fromUs: string;
  toUs: string;
  /** Buckets of this many seconds, or none (null). */
  bucketSeconds: number | null;
  /** undefined: every event of the window. */
  query: Node | undefined;
  /** Fields counted together, per event: the `by` pair, `distinct`'s and `field`'s (query/aggregate.ts). */
  by: string[];
  distinct: string | undefined;
  field: string | undefined;
  /** Fields counted each on its own (their values that are not null). */
  facets: string[];
  /** At most this many matches are tallied, the blocks' in order (query/aggregate.ts's cap). */
  limit?: number;
}

/**
 * query/aggregate.ts's events as weighted rows: each distinct (bucket, `by` values, `distinct`'s
 * value, `field`'s text and whether it is a JSON number) with its events, and per facet each
 * value with its events.
 */
export interface Tallies {
  joint: {
    buckets: (string | null)[];
    by: (string | null)[][];
    distinct: (string | null)[];
    field: (string | null)[];
    numbers: boolean[];
    counts: number[];
  };
  facets: { values: string[]; counts: number[] }[];
  /** The matches tallied (at most the request's limit). */
  matched: number;
}

/** Tallies of the events in the blocks that match the query inside the window (what `add` merges). */
export function tallyBlocks(request: TallyRequest): Tallies {
  const match = lineMatcher(request.query);
  const from = BigInt(request.fromUs);
  const to = BigInt(request.toUs);
  const by = request.by.map(fieldValue);
  const distinct = request.distinct === undefined ? undefined : fieldValue(request.distinct);
  // statistics read the whole text: left() is not applied before the cast to a number.
  const field = request.field === undefined ? undefined : jsonbPath(request.field);
  const facets = request.facets.map(fieldValue);
  const tallies = emptyTallies(request.by.length, request.facets.length);
  const joint = new Map<string, number>();
  const perFacet = facets.map(() => new Map<string, number>());
  const limit = request.limit ?? Number.POSITIVE_INFINITY;
  const key: JointKey = [null];
  for (let k = 0; k < request.payloads.length && tallies.matched < limit; k++) {
    const min = BigInt(request.minUs[k]!);
    const bucketOf = buckets(min, request.bucketSeconds);
    const event = eventOf(request, k);
    eachMatch(request.payloads[k]!, match, clamp(from - min), clamp(to - min), (text, start, end, offset, idOffset) => {
      if (tallies.matched >= limit) return false;
      tallies.matched++;
      const at = event.at(text, start, end, offset, idOffset);
      const x = field ? numberText(jsonbTextAt(text, start, end, field, Number.POSITIVE_INFINITY)) : NO_NUMBER;
      key[0] = bucketOf ? String(bucketOf(offset)) : null;
      for (let i = 0; i < by.length; i++) key[1 + i] = by[i]!(at);
      key[1 + by.length] = distinct ? distinct(at) : null;
      key[2 + by.length] = x.text;
      key[3 + by.length] = x.number;
      const entry = JSON.stringify(key);
      joint.set(entry, (joint.get(entry) ?? 0) + 1);
      for (let i = 0; i < facets.length; i++) {
        const v = facets[i]!(at);
        if (v !== null) perFacet[i]!.set(v, (perFacet[i]!.get(v) ?? 0) + 1);
      }
    });
  }
  for (const [key, n] of joint) addJoint(tallies, JSON.parse(key) as JointKey, n);
  perFacet.forEach((values, i) => {
    for (const [value, n] of values) addFacet(tallies, i, value, n);
  });
  return tallies;
}

const NO_NUMBER = { text: null, number: false };
/** What PostgreSQL's text test (query/aggregate.ts `number`) may take, once its blanks, whatever they are, are trimmed. */
const NUMBER_TEXT = /^[^!-~]*-?[0-9]{1,30}(?:\.[0-9]{1,30})?[^!-~]*$/;

/**
 * `field`'s value as statistics need it: a JSON number's text, or a text PostgreSQL's pattern may
 * read as one (any character but printable ASCII counts as a blank here, more than PostgreSQL's
 * `\s` in any locale: PostgreSQL decides); any other value as null, which it is to PostgreSQL too,
 * so a field of long texts sends nothing back.
 */
function numberText(value: { text: string | null; number: boolean }): { text: string | null; number: boolean } {
  return value.number || (value.text !== null && NUMBER_TEXT.test(value.text)) ? value : NO_NUMBER;
}

/** A joint entry's key: bucket, the `by` values, `distinct`'s value, `field`'s text, whether a number. */
type JointKey = [string | null, ...(string | null | boolean)[]];

export function emptyTallies(by: number, facets: number): Tallies {
  return {
    joint: { buckets: [], by: Array.from({ length: by }, () => []), distinct: [], field: [], numbers: [], counts: [] },
    facets: Array.from({ length: facets }, () => ({ values: [], counts: [] })),
    matched: 0,
  };
}

function addJoint(tallies: Tallies, key: JointKey, n: number): void {
  const { joint } = tallies;
  const by = joint.by.length;
  joint.buckets.push(key[0]);
  for (let i = 0; i < by; i++) joint.by[i]!.push(key[1 + i] as string | null);
  joint.distinct.push(key[1 + by] as string | null);
  joint.field.push(key[2 + by] as string | null);
  joint.numbers.push(key[3 + by] as boolean);
  joint.counts.push(n);
}

function addFacet(tallies: Tallies, i: number, value: string, n: number): void {
  tallies.facets[i]!.values.push(value);
  tallies.facets[i]!.counts.push(n);
}

/** A read's tallies grew past query/scan-pool.ts SCAN_TALLIES_MAX entries: it is made by PostgreSQL alone. */
export class TooManyTallies extends Error {
  constructor(max: number) {
    super(`more than ${max} distinct values to add up`);
  }
}

/** Tallies added up: the threads' answers merged on the HTTP thread, one entry per distinct key, at most `max` entries in all. */
export class TallyTotals {
  private readonly joint = new Map<string, number>();
  private readonly facets: Map<string, number>[];
  private entries = 0;

  constructor(
    private readonly by: number,
    facets: number,
    private readonly max: number,
  ) {
    this.facets = Array.from({ length: facets }, () => new Map());
  }

  /** Matches added. */
  matched = 0;

  /** Throws TooManyTallies past `max` entries. */
  add(tallies: Tallies): void {
    const { joint } = tallies;
    this.matched += tallies.matched;
    const count = (totals: Map<string, number>, key: string, n: number) => {
      const before = totals.get(key);
      if (before === undefined && ++this.entries > this.max) throw new TooManyTallies(this.max);
      totals.set(key, (before ?? 0) + n);
    };
    joint.counts.forEach((n, k) => {
      count(
        this.joint,
        JSON.stringify([joint.buckets[k]!, ...joint.by.map((values) => values[k]!), joint.distinct[k]!, joint.field[k]!, joint.numbers[k]!]),
        n,
      );
    });
    tallies.facets.forEach((facet, i) => {
      facet.counts.forEach((n, k) => count(this.facets[i]!, facet.values[k]!, n));
    });
  }

  get totals(): Tallies {
    const tallies = emptyTallies(this.by, this.facets.length);
    tallies.matched = this.matched;
    for (const [key, n] of this.joint) addJoint(tallies, JSON.parse(key) as JointKey, n);
    this.facets.forEach((values, i) => {
      for (const [value, n] of values) addFacet(tallies, i, value, n);
    });
    return tallies;
  }
}

/** Where an event lies and whose it is: what fieldValue reads. */
interface EventAt {
  text: Buffer;
  start: number;
  end: number;
  us: bigint;
  id: number;
  source: string;
}

/** A block's events as EventAt, one object reused per block. */
function eventOf(request: BlockBatch, k: number) {
  const min = BigInt(request.minUs[k]!);
  const minId = Number(request.minIds[k]!);
  const event: EventAt = { text: Buffer.alloc(0), start: 0, end: 0, us: 0n, id: 0, source: request.sources[k]! };
  return {
    at(text: Buffer, start: number, end: number, offset: number, idOffset: number): EventAt {
      event.text = text;
      event.start = start;
      event.end = end;
      event.us = min + BigInt(offset);
      event.id = minId + idOffset;
      return event;
    },
  };
}

/**
 * A field's value as query/aggregate.ts `expressions` reads it before applying left() and the
 * level's fold: logpond's id, source_id and dt as the rows show them, the level's text cut to
 * LEVEL_MAX_CHARS, any other path's `raw #>> path` cut to VALUE_MAX_CHARS.
 */
export function fieldValue(path: string): (event: EventAt) => string | null {
  if (path === "id") return (event) => String(event.id);
  if (path === "source_id") return (event) => event.source;
  if (path === "dt") return (event) => unixMicrosText(event.us);
  const at = jsonbPath(path);
  const chars = path === "level" ? LEVEL_MAX_CHARS : VALUE_MAX_CHARS;
  return (event) => jsonbTextAt(event.text, event.start, event.end, at, chars).text;
}

/** The bucket of a block's event by its time offset (µs from min); undefined without buckets. */
function buckets(min: bigint, bucketSeconds: number | null): ((offset: number) => bigint) | undefined {
  if (bucketSeconds === null) return undefined;
  const bucketUs = BigInt(bucketSeconds) * 1_000_000n;
  // The bucket of min + offset is base + floor((rest + offset) / size), rest in [0, size).
  const base = floorDiv(min, bucketUs);
  const rest = Number(min - base * bucketUs);
  const size = Number(bucketUs);
  return (offset) => base + BigInt(Math.floor((rest + offset) / size));
}

export interface MatchRequest extends BlockBatch {
  /** The slice, both ends included (µs since the Unix epoch; an open end is passed a microsecond in). */
  lowerUs: string;
  upperUs: string;
  /** The page's cursor: only events past it (dt in µs since the Unix epoch, id) in the page's order. */
  after: { us: string; id: string } | undefined;
  newest: boolean;
  /** At most this many, the nearest to the page's start. */
  limit: number;
  query: Node;
}

/** An event a page may show: its id, dt (RFC 3339, six fraction digits, as query/read.ts DT_TEXT prints it), source and JSON text. */
export interface Found {
  id: string;
  dt: string;
  source: string;
  line: string;
}

/**
 * The events of the blocks that match the query inside the slice and past the cursor, the `limit`
 * nearest to the page's start, in the page's order: (dt, id) descending newest first, else
 * ascending.
 */
export function matchBlocks(request: MatchRequest): Found[] {
  const match = lineMatcher(request.query);
  const lower = BigInt(request.lowerUs);
  const upper = BigInt(request.upperUs);
  const after = request.after && { us: BigInt(request.after.us), id: Number(request.after.id) };
  const found: { us: bigint; id: number; source: string; line: string }[] = [];
  for (let k = 0; k < request.payloads.length; k++) {
    const min = BigInt(request.minUs[k]!);
    const minId = Number(request.minIds[k]!);
    const source = request.sources[k]!;
    eachMatch(request.payloads[k]!, match, clamp(lower - min), clamp(upper - min), (text, start, end, offset, idOffset) => {
      const us = min + BigInt(offset);
      const id = minId + idOffset;
      if (after) {
        const past = us === after.us ? (request.newest ? id < after.id : id > after.id) : request.newest ? us < after.us : us > after.us;
        if (!past) return;
      }
      found.push({ us, id, source, line: text.toString("utf8", start, end) });
    });
  }
  const sign = request.newest ? -1 : 1;
  found.sort((a, b) => sign * (a.us === b.us ? a.id - b.id : a.us < b.us ? -1 : 1));
  return found.slice(0, request.limit).map((event) => ({
    id: String(event.id),
    dt: unixMicrosText(event.us),
    source: event.source,
    line: event.line,
  }));
}

/**
 * Each line of a payload whose time offset (from the block's first event) is within [lower,
 * upper] and that `match` accepts, in the payload's order: its bytes [start, end) of the opened
 * text, its time offset and its id offset (from the block's first id).
 */
function eachMatch(
  payload: Uint8Array,
  match: LineMatcher,
  lower: number,
  upper: number,
  /** false: no more lines (the rest of the block is not read). */
  visit: (text: Buffer, start: number, end: number, offset: number, idOffset: number) => void | false,
): void {
  // Offsets are below 2^51 (store/blocks.ts): numbers.
  const text = openPayloadBytes(payload);
  const lowered = match.lowers ? lowerAscii(text) : text;
  const ids = arrayLine(text, 0);
  const dts = arrayLine(text, ids.end + 2);
  match.reset();
  let at = dts.end + 1;
  for (let i = 0; i < dts.values.length; i++) {
    const start = at + 1;
    let end = text.indexOf(0x0a, start);
    if (end < 0) end = text.length;
    at = end;
    const offset = Number(dts.values[i]!);
    if (offset < lower || offset > upper) continue;
    if (!match.test(text, lowered, start, end)) continue;
    if (visit(text, start, end, offset, Number(ids.values[i]!)) === false) return;
  }
}

/** Offsets past ±2^52 µs lie outside any block (store/blocks.ts keeps a block's within 2^51). */
const clamp = (value: bigint): number => (value > 2n ** 52n ? 2 ** 52 : value < -(2n ** 52n) ? -(2 ** 52) : Number(value));

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/**
 * A copy of `text` with its ASCII capitals lowered (UTF-8's other bytes are all ≥ 0x80: untouched).
 * Four bytes at a time: in each byte b < 0x80 of a word, b + 0x3f carries into the top bit when
 * b ≥ 'A' and b + 0x25 when b > 'Z' (never into the next byte), so the capitals' top bits, shifted
 * to 0x20, lower them. A 1,000-event block's text (about 680 KB): 0.64–0.71 ms against 1.0–1.35
 * for a byte at a time, of a histogram's 2.5–3.1 ms per block (a one-off measurement on
 * bench/corpus.ts's events; test/unit/scan-lower.test.ts checks every byte).
 */
export function lowerAscii(text: Buffer): Buffer {
  const words = (text.length + 3) >>> 2;
  const buffer = new ArrayBuffer(words * 4);
  const lowered = Buffer.from(buffer, 0, text.length);
  lowered.set(text);
  const word = new Uint32Array(buffer);
  for (let i = 0; i < words; i++) {
    const w = word[i]!;
    const low = w & 0x7f7f7f7f;
    const capitals = ((low + 0x3f3f3f3f) & ~(low + 0x25252525) & ~w & 0x80808080) >>> 2;
    if (capitals !== 0) word[i] = w | capitals;
  }
  return lowered;
}

interface LineMatcher {
  /** Whether `test` reads the lowered copy of the text (else it is given the text itself). */
  lowers: boolean;
  /** Before each block's lines. */
  reset(): void;
  /** Whether the line at [start, end) of `text` (and of its ASCII-lowered copy) matches. */
  test(text: Buffer, lowered: Buffer, start: number, end: number): boolean;
}

/** The line being tested, its parsed event made at most once. */
interface Line {
  text: Buffer;
  lowered: Buffer;
  start: number;
  end: number;
  parsed: Record<string, unknown> | undefined;
}

/**
 * The query as a test of a block's line. The needles every match holds (ASCII, lowered) are looked
 * for first; then words (`text` terms) are found in the line's text as query/sql.ts finds them on
 * `line`, and every other term is decided by query/match.ts on the line parsed once. Each ASCII
 * word or needle is found in the lowered copy at its next place from the line on, so a block is
 * searched once per word whatever its lines hold (lines are tested in order).
 * With no query, every line matches.
 */
export function lineMatcher(query: Node | undefined): LineMatcher {
  if (query === undefined) return { lowers: false, reset() {}, test: () => true };
  const resets: (() => void)[] = [];
  const found = (word: string): ((line: Line) => boolean) => {
    if (/[^\x00-\x7f]/.test(word)) return (line) => asciiLower(line.text.toString("utf8", line.start, line.end)).includes(word);
    const needle = Buffer.from(word, "latin1");
    let next = -1;
    resets.push(() => {
      next = -1;
    });
    return (line) => {
      if (next < line.start) {
        next = line.lowered.indexOf(needle, line.start);
        // None left in the block: no later line holds it either.
        if (next < 0) next = Number.POSITIVE_INFINITY;
      }
      return next + needle.length <= line.end;
    };
  };
  const compile = (node: Node): ((line: Line) => boolean) => {
    switch (node.kind) {
      case "and": {
        const parts = node.nodes.map(compile);
        return (line) => parts.every((part) => part(line));
      }
      case "or": {
        const parts = node.nodes.map(compile);
        return (line) => parts.some((part) => part(line));
      }
      case "not": {
        const inner = compile(node.node);
        return (line) => !inner(line);
      }
      case "text":
        return found(asciiLower(jsonEscape(node.text)));
      default: {
        const predicate = compileMatcher(node);
        return (line) => predicate((line.parsed ??= parseExact(line.text.toString("utf8", line.start, line.end)) as Record<string, unknown>));
      }
    }
  };
  const needles = prefilter(query).needles.map(found);
  const matches = compile(query);
  const line: Line = { text: Buffer.alloc(0), lowered: Buffer.alloc(0), start: 0, end: 0, parsed: undefined };
  return {
    lowers: true,
    reset() {
      for (const reset of resets) reset();
    },
    test(text, lowered, start, end) {
      line.text = text;
      line.lowered = lowered;
      line.start = start;
      line.end = end;
      line.parsed = undefined;
      for (const needle of needles) if (!needle(line)) return false;
      return matches(line);
    },
  };
}
