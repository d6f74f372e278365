// GET /api/v2/query/histogram: how many events of some sources match a query in each time bucket
// of a window, split by level. Statements over both tiers with the query API's own window, source
// and query rules (query/request.ts, query/sql.ts), all within its QUERY_TIMEOUT_MS. Without a
// query, one statement: hot chunks and sealed blocks inside the window are counted from their
// per-minute counts and never opened. With one, slices of the window, newest first, two at a time: blocks are skipped
// by their filters (query/prefilter.ts) and scanned, and what is counted in time is answered.
import { unixMicros } from "../codec/time";
import { AppError } from "../errors";
import { LEVEL_MAX_CHARS } from "../store/blocks";
import type { Sql } from "../store/db";
import { blockEventsMeeting, blockInside, blockMinutesInside } from "../store/tiers";
import { besideScans, blockBatch, leftOf, queryTimeout, scanThenRest, tiers, timed } from "./read";
import { FIELD_PATH, FIELD_PATH_MAX_CHARS, micros, readQuery, readSourceIds, readWindow, refuseUnknown, single } from "./request";
import { aliasObject } from "./levels";
import type { Node } from "./parse";
import { type Counts, TooManyTallies } from "./scan";
import type { ScanPool } from "./scan-pool";
import { compileQuery } from "./sql";

export const BUCKETS_DEFAULT = 100;
export const BUCKETS_MAX = 500;
/** Round bucket sizes, smallest first; past a day, whole days. */
export const BUCKET_SECONDS = [1, 5, 10, 30, 60, 300, 900, 1800, 3600, 10_800, 21_600, 43_200, 86_400] as const;
/** Levels named in the answer (the most frequent in the window); the rest count as "other". */
export const LEVELS_MAX = 6;

export interface HistogramRequest {
  sourceIds: number[];
  malformed: string[];
  query: Node | undefined;
  from: string;
  to: string;
  /** Upper bound on the number of buckets answered. */
  buckets: number;
  /** The field whose values are counted (query/histogram-by.ts); undefined: the level, by severity. */
  by: string | undefined;
}

export interface Bucket {
  from: string;
  to: string;
  /** null: not counted within QUERY_TIMEOUT_MS (meta.complete is false). */
  count: number | null;
  levels: Record<string, number>;
}

export interface Histogram {
  data: Bucket[];
  meta: { from: string; to: string; bucket_seconds: number; buckets: number; total: number; levels: string[]; complete: boolean };
}

export function readHistogramRequest(url: URL, now: () => Date = () => new Date()): HistogramRequest {
  refuseUnknown(url, "histogram", ["source_ids", "query", "from", "to", "buckets", "by"]);
  const { ids, malformed } = readSourceIds(url);
  const query = readQuery(url);
  const raw = single(url, "buckets");
  let buckets = BUCKETS_DEFAULT;
  if (raw !== null && raw !== "") {
    if (!/^[0-9]{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > BUCKETS_MAX) {
      throw new AppError("bad_request", `buckets must be a whole number from 1 to ${BUCKETS_MAX} (got ${JSON.stringify(raw.slice(0, 32))})`);
    }
    buckets = Number(raw);
  }
  const rawBy = single(url, "by");
  let by: string | undefined;
  if (rawBy !== null) {
    if (rawBy.length > FIELD_PATH_MAX_CHARS || !FIELD_PATH.test(rawBy)) {
      throw new AppError("bad_request", `by must be one field path such as service or http.status (got ${JSON.stringify(rawBy.slice(0, 64))})`);
    }
    // The level keeps its own count: by severity, from the blocks' per-minute summaries.
    if (rawBy !== "level") by = rawBy;
  }
  const { from, to } = readWindow(url, now());
  return { sourceIds: ids, malformed, query, from, to, buckets, by };
}

const ms = (dt: string) => Date.parse(`${dt.slice(0, 23)}Z`);

/**
 * The smallest round size whose buckets, aligned to the Unix epoch (so to UTC midnight for a
 * day), cover [from, to] in at most `buckets` of them.
 */
export function bucketSeconds(from: string, to: string, buckets: number): number {
  const first = ms(from) / 1000,
    last = ms(to) / 1000;
  const count = (size: number) => Math.floor(last / size) - Math.floor(first / size) + 1;
  for (const size of BUCKET_SECONDS) if (count(size) <= buckets) return size;
  let days = Math.max(1, Math.ceil((last - first) / 86_400 / buckets));
  // A window across 1970-01-01 never fits one epoch-aligned bucket: past the farthest edge from
  // the epoch, a wider bucket changes nothing, so the search stops there (two buckets).
  const widest = Math.max(Math.abs(first), Math.abs(last));
  while (count(days * 86_400) > buckets && days * 86_400 <= widest) days++;
  return days * 86_400;
}

/** Levels each statement names before folding the rest into "other" (the answer keeps LEVELS_MAX). */
const LEVELS_PER_STATEMENT = 32;
/** With a query, slices of the window are counted this many at a time, each on a connection of its own (a scan is one core per statement). */
export const SLICES_AT_ONCE = 2;

/**
 * Without a query, one statement (block summaries, fast). With one, the window is cut into slices
 * of whole buckets from the newest (1, 1, 2, 2, 4, 4… buckets), counted newest first,
 * SLICES_AT_ONCE at a time, all within one QUERY_TIMEOUT_MS: when time runs out, the slices counted
 * are answered (`meta.complete` false, the others' buckets with a null count), so a frequent word
 * over a long window still shows its recent part (at 20 M events a day, one 30-minute bucket of
 * `timeout` is seconds of scanning). Nothing counted in time → the usual 503.
 */
export function readHistogram(sql: Sql, request: HistogramRequest, timeoutMs: number, scans?: ScanPool, seams: HistogramSeams = {}): Promise<Histogram> {
  return histogramOf(request, timeoutMs, (slice, left) => countSlice(sql, request, slice, left, scans, seams));
}

/**
 * What a test injects: `beforeRest` runs inside a scanned slice's snapshot, after the scan threads
 * counted its blocks and before PostgreSQL counts the rest (countScanned).
 */
export interface HistogramSeams {
  beforeRest?(): Promise<void>;
}

/** A stretch of the window counted by one statement: [from, to), or [from, to] when `last`. */
export interface Slice {
  from: string;
  to: string;
  last: boolean;
  bucketSeconds: number;
}

/** Counts per (bucket index, level); `n` as text (a bigint). */
export type Counted = { bucket: string; level: string | null; n: string }[];

/** readHistogram with the statement that counts a slice given (`count`: countSlice, or a test's). */
export async function histogramOf(
  request: HistogramRequest,
  timeoutMs: number,
  count: (slice: Slice, timeoutMs: number) => Promise<Counted>,
): Promise<Histogram> {
  const size = bucketSeconds(request.from, request.to, request.buckets);
  const firstIndex = Math.floor(ms(request.from) / 1000 / size);
  const lastIndex = Math.floor(ms(request.to) / 1000 / size);
  const at = (index: number) => micros(new Date(index * size * 1000).toISOString());
  const slices: { first: number; last: number }[] = [];
  if (!request.query) slices.push({ first: firstIndex, last: lastIndex });
  else {
    for (let last = lastIndex, width = 1; last >= firstIndex; last -= width, width *= slices.length % SLICES_AT_ONCE === 0 ? 2 : 1) {
      slices.push({ first: Math.max(firstIndex, last - width + 1), last });
    }
  }
  const deadline = performance.now() + timeoutMs;
  const counted: (Counted | undefined)[] = slices.map(() => undefined);
  let next = 0;
  let timedOut: AppError | undefined;
  let failed: { error: unknown } | undefined;
  // A worker never rejects: a failure is kept and thrown once every slice begun has ended, so the
  // answer waits for the other statement (none outlives its request) and no slice starts after it.
  const worker = async () => {
    while (next < slices.length && timedOut === undefined && failed === undefined) {
      const index = next++;
      const slice = slices[index]!;
      const left = Math.floor(deadline - performance.now());
      if (left < 1) {
        timedOut = queryTimeout(timeoutMs);
        return;
      }
      const from = slice.first === firstIndex ? request.from : at(slice.first);
      const to = slice.last === lastIndex ? request.to : at(slice.last + 1);
      try {
        counted[index] = await count({ from, to, last: slice.last === lastIndex, bucketSeconds: size }, left);
      } catch (error) {
        if (error instanceof AppError && error.reason === "query_timeout") timedOut = queryTimeout(timeoutMs);
        else failed ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(SLICES_AT_ONCE, slices.length) }, worker));
  if (failed) throw failed.error;
  if (counted.every((rows) => rows === undefined)) throw timedOut;
  const data: Bucket[] = [];
  for (let index = firstIndex; index <= lastIndex; index++) data.push({ from: at(index), to: at(index + 1), count: 0, levels: {} });
  slices.forEach((slice, i) => {
    if (counted[i] === undefined) for (let index = slice.first; index <= slice.last; index++) data[index - firstIndex]!.count = null;
  });
  // The window's LEVELS_MAX most frequent levels keep their names (ties by name), the rest are
  // added up as "other" (a level named "other" joins them, and the statements' own "other" takes
  // no name's place).
  const byLevel = new Map<string, number>();
  for (const row of counted.flat())
    if (row && row.level !== null && row.level !== "other") byLevel.set(row.level, (byLevel.get(row.level) ?? 0) + Number(row.n));
  const named = new Set(
    [...byLevel]
      .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))
      .slice(0, LEVELS_MAX)
      .map(([level]) => level),
  );
  const levelTotals = new Map<string, number>();
  let total = 0;
  for (const row of counted.flat()) {
    if (!row) continue;
    const bucket = data[Number(row.bucket) - firstIndex];
    if (bucket === undefined || bucket.count === null) continue; // cannot happen: a slice bounds its rows
    const n = Number(row.n);
    bucket.count += n;
    total += n;
    if (row.level !== null) {
      const level = named.has(row.level) ? row.level : "other";
      bucket.levels[level] = (bucket.levels[level] ?? 0) + n;
      levelTotals.set(level, (levelTotals.get(level) ?? 0) + n);
    }
  }
  // 'other' last, whatever its count: it is the rest, not a level.
  const levels = [...levelTotals].sort(([a, x], [b, y]) => Number(a === "other") - Number(b === "other") || y - x || (a < b ? -1 : 1)).map(([level]) => level);
  const complete = counted.every((rows) => rows !== undefined);
  return { data, meta: { from: request.from, to: request.to, bucket_seconds: size, buckets: data.length, total, levels, complete } };
}

/**
 * Counts per (bucket, level) of [from, to] (`to` included only for the window's last slice), the
 * statement's LEVELS_PER_STATEMENT most frequent levels named and the rest as "other": at most
 * buckets × (LEVELS_PER_STATEMENT + 2) rows leave PostgreSQL, however many distinct levels the
 * events carry. The bucket is an epoch index, exact to the microsecond.
 */
function countSlice(
  sql: Sql,
  request: HistogramRequest,
  slice: Slice,
  timeoutMs: number,
  scans: ScanPool | undefined,
  seams: HistogramSeams,
): Promise<Counted> {
  const params: unknown[] = [slice.from, slice.to, slice.bucketSeconds, request.sourceIds];
  const upper = slice.last ? "<=" : "<";
  let filter = "";
  if (request.query) {
    const condition = compileQuery(request.query, params.length + 1, "line");
    params.push(...condition.params);
    filter = ` and ${condition.text}`;
  }
  // With a query and the scan threads, the v4 blocks are counted by them (countScanned, below) and
  // PostgreSQL counts the rest: the hot tier and v3 blocks.
  const scanned = request.query !== undefined && scans !== undefined;
  const events = !request.query
    ? ""
    : scanned
      ? besideScans(params, "$4::bigint[]", "$1::text::timestamptz", "$2::text::timestamptz", request.query)
      : tiers(params, "$4::bigint[]", "$1::text::timestamptz", "$2::text::timestamptz", request.query);
  // A level is counted under its severity when the one table of level names knows it (`err`,
  // `ERROR` and pino's 50 are all "error", as `level:error` finds them), else under its own text
  // lowered; blocks' per-minute counts keep the lowered text and are folded here the same way.
  params.push(JSON.stringify(aliasObject()));
  const aliases = `$${params.length}::jsonb`;
  const fold = (lowered: string) => `coalesce(${aliases} ->> ${lowered}, ${lowered})`;
  const level = (raw: string) => fold(`nullif(lower(left(${raw}->>'level', ${LEVEL_MAX_CHARS})), '')`);
  const window = (dt: string) => `${dt} >= $1::text::timestamptz and ${dt} ${upper} $2::text::timestamptz`;
  // The scan threads' counts, as three arrays (bucket, lowered level, events) added last.
  const threads = scanned
    ? `union all select u.bucket, ${fold("u.level")}, u.n from unnest($${params.length + 1}::bigint[], $${params.length + 2}::text[], $${params.length + 3}::bigint[]) u(bucket, level, n) `
    : "";
  const counted = request.query
    ? `select floor(extract(epoch from dt) / $3::bigint)::bigint as bucket, ${level("raw")} as level, count(*) as n from ${events} ` +
      `where ${window("dt")} and source_id = any($4::bigint[])${filter} group by 1, 2 ${threads}`
    : // No query: a hot chunk or a block inside the window by its counts per minute (exact when a
      // bucket is whole minutes), without opening it; hot rows, and a chunk or a block across the
      // window's edge, line by line. A staged block (generation not null, drizzle/0011) is skipped:
      // its events are still hot.
      `select floor(extract(epoch from dt) / $3::bigint)::bigint as bucket, ${level("raw")} as level, count(*) as n ` +
      `from logpond_hot_uncounted($4::bigint[], $1::text::timestamptz, $2::text::timestamptz, $3::bigint % 60 = 0) ` +
      `where ${window("dt")} group by 1, 2 ` +
      `union all select floor(h.minute::numeric * 60 / $3::bigint)::bigint, ${fold("h.level")}, sum(h.n) ` +
      `from logpond_hot_minutes($4::bigint[], $1::text::timestamptz, $2::text::timestamptz) h where $3::bigint % 60 = 0 group by 1, 2 ` +
      `union all select floor(h.minute::numeric * 60 / $3::bigint)::bigint, ${fold("h.level")}, sum(h.n) ` +
      `${blockMinutesInside("$4::bigint[]", "$1", upper, "$2")} and $3::bigint % 60 = 0 group by 1, 2 ` +
      `union all select floor(extract(epoch from e.dt) / $3::bigint)::bigint, ${level("e.line::jsonb")}, count(*) ` +
      `${blockEventsMeeting("$4::bigint[]", "$1", upper, "$2")} ` +
      `and not (${blockInside("$1", upper, "$2")} and $3::bigint % 60 = 0) ` +
      `and ${window("e.dt")} group by 1, 2`;
  const text =
    `with counted as (${counted}), ` +
    `top as (select level from counted where level is not null group by level order by sum(n) desc, level limit ${LEVELS_PER_STATEMENT}) ` +
    `select bucket::text as bucket, case when counted.level is null then null when counted.level in (select level from top) then counted.level else 'other' end as level, ` +
    `sum(n)::text as n from counted group by 1, 2`;
  if (!scanned) return timed(sql, timeoutMs, (tx) => tx.unsafe<Counted>(text, params as never[]));
  const started = performance.now();
  return countScanned(sql, { ...slice, query: request.query!, sourceIds: request.sourceIds }, timeoutMs, scans!, seams, async (tx, counts) => {
    params.push(counts.buckets, counts.levels, counts.counts);
    return tx.unsafe<Counted>(text, params as never[]);
  }).catch((error: unknown) => {
    // Too many levels to add up here: PostgreSQL counts the slice alone, in what is left of the time.
    if (!(error instanceof TooManyTallies)) throw error;
    return countSlice(sql, request, slice, leftOf(timeoutMs, started), undefined, seams);
  });
}

/**
 * A slice counted in one snapshot (query/read.ts scanThenRest): the v4 blocks that may hold
 * matches are counted on the scan threads, then `rest` counts the other tiers with the threads'
 * counts added. Past the pool's maxTallies distinct (bucket, level) pairs, TooManyTallies.
 */
export function countScanned(
  sql: Sql,
  slice: Slice & { query: Node; sourceIds: number[]; by?: string },
  timeoutMs: number,
  scans: ScanPool,
  seams: HistogramSeams,
  rest: (tx: Sql, counts: Counts) => Promise<Counted>,
): Promise<Counted> {
  const totals = new Map<string, { bucket: string; level: string | null; n: number }>();
  return scanThenRest(
    sql,
    slice,
    timeoutMs,
    scans,
    (batch) =>
      scans.count({
        ...blockBatch(batch),
        fromUs: String(unixMicros(slice.from)),
        toUs: String(unixMicros(slice.to)),
        toIncluded: slice.last,
        bucketSeconds: slice.bucketSeconds,
        query: slice.query,
        by: slice.by,
      }),
    (counts) => {
      counts.buckets.forEach((bucket, i) => {
        const level = counts.levels[i]!;
        const key = level === null ? bucket : `${bucket} ${level}`;
        const entry = totals.get(key);
        if (entry) entry.n += counts.counts[i]!;
        else if (totals.size >= scans.maxTallies) throw new TooManyTallies(scans.maxTallies);
        else totals.set(key, { bucket, level, n: counts.counts[i]! });
      });
    },
    async (tx) => {
      const counts: Counts = { buckets: [], levels: [], counts: [] };
      for (const { bucket, level, n } of totals.values()) {
        counts.buckets.push(bucket);
        counts.levels.push(level);
        counts.counts.push(n);
      }
      await seams.beforeRest?.();
      return rest(tx, counts);
    },
  );
}
