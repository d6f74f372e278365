// GET /api/v2/query/histogram: how many events of some sources match a query in each time bucket
// of a window, split by level. One statement over both tiers with the query API's own window,
// source and query rules (query/request.ts, query/sql.ts) and its statement timeout. Without a
// query, sealed blocks inside the window are counted from their per-minute counts and never
// opened; with one, blocks are skipped by their filters (query/prefilter.ts) and scanned.
import { AppError } from "../errors";
import { LEVEL_MAX_CHARS } from "../store/blocks";
import type { Sql } from "../store/db";
import { tiers, timed } from "./read";
import { micros, readQuery, readSourceIds, readWindow } from "./request";
import type { Node } from "./parse";
import { compileQuery } from "./sql";

export const BUCKETS_DEFAULT = 100;
export const BUCKETS_MAX = 500;
/** Round bucket sizes, smallest first; past a day, whole days. */
export const BUCKET_SECONDS = [1, 5, 10, 30, 60, 300, 900, 1800, 3600, 10_800, 21_600, 43_200, 86_400] as const;
/** Levels named in the answer (the most frequent in the window); the rest count as "other". */
export const LEVELS_MAX = 6;
/** A level longer than this is cut before counting, so one odd event cannot make a huge key. */

export interface HistogramRequest {
  sourceIds: number[];
  malformed: string[];
  query: Node | undefined;
  from: string;
  to: string;
  /** Upper bound on the number of buckets answered. */
  buckets: number;
}

export interface Bucket {
  from: string;
  to: string;
  count: number;
  levels: Record<string, number>;
}

export interface Histogram {
  data: Bucket[];
  meta: { from: string; to: string; bucket_seconds: number; buckets: number; total: number; levels: string[] };
}

export function readHistogramRequest(url: URL, now: () => Date = () => new Date()): HistogramRequest {
  const { ids, malformed } = readSourceIds(url);
  const query = readQuery(url);
  const raw = url.searchParams.get("buckets");
  let buckets = BUCKETS_DEFAULT;
  if (raw !== null && raw !== "") {
    if (!/^[0-9]{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > BUCKETS_MAX) {
      throw new AppError("bad_request", `buckets must be a whole number from 1 to ${BUCKETS_MAX} (got ${JSON.stringify(raw.slice(0, 32))})`);
    }
    buckets = Number(raw);
  }
  const { from, to } = readWindow(url, now());
  return { sourceIds: ids, malformed, query, from, to, buckets };
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
  while (count(days * 86_400) > buckets) days++;
  return days * 86_400;
}

export async function readHistogram(sql: Sql, request: HistogramRequest, timeoutMs: number): Promise<Histogram> {
  const size = bucketSeconds(request.from, request.to, request.buckets);
  const params: unknown[] = [request.from, request.to, size, request.sourceIds];
  let filter = "";
  if (request.query) {
    const condition = compileQuery(request.query, params.length + 1, "line");
    params.push(...condition.params);
    filter = ` and ${condition.text}`;
  }
  const events = request.query ? tiers(params, "$4::bigint[]", "$1::text::timestamptz", "$2::text::timestamptz", request.query) : "";
  // Counts per (bucket, level) first, then the window's most frequent levels keep their names and
  // the rest fold into 'other': at most buckets × (LEVELS_MAX + 2) rows leave PostgreSQL, however
  // many distinct levels the events carry. The bucket is an epoch index, exact to the microsecond.
  const level = (raw: string) => `nullif(lower(left(${raw}->>'level', ${LEVEL_MAX_CHARS})), '')`;
  const counted = request.query
    ? `select floor(extract(epoch from dt) / $3::int)::bigint as bucket, ${level("raw")} as level, count(*) as n from ${events} ` +
      `where dt >= $1::text::timestamptz and dt <= $2::text::timestamptz and source_id = any($4::bigint[])${filter} group by 1, 2`
    : // No query: hot rows one by one; a block inside the window by its counts per minute (exact when
      // a bucket is whole minutes), without opening it; a block across the window's edge line by line.
      `select floor(extract(epoch from dt) / $3::int)::bigint as bucket, ${level("raw")} as level, count(*) as n from log_hot ` +
      `where dt >= $1::text::timestamptz and dt <= $2::text::timestamptz and source_id = any($4::bigint[]) group by 1, 2 ` +
      `union all select floor(h.minute::numeric * 60 / $3::int)::bigint, h.level, sum(h.n) from log_blocks b ` +
      `cross join lateral unnest(b.hist_minutes, b.hist_levels, b.hist_counts) as h(minute, level, n) ` +
      `where b.source_id = any($4::bigint[]) and b.min_dt >= $1::text::timestamptz and b.max_dt <= $2::text::timestamptz and $3::int % 60 = 0 group by 1, 2 ` +
      `union all select floor(extract(epoch from e.dt) / $3::int)::bigint, ${level("e.line::jsonb")}, count(*) from log_blocks b ` +
      `cross join lateral unnest(b.dts, string_to_array(b.body, E'\n')) as e(dt, line) ` +
      `where b.source_id = any($4::bigint[]) and b.max_dt >= $1::text::timestamptz and b.min_dt <= $2::text::timestamptz ` +
      `and not (b.min_dt >= $1::text::timestamptz and b.max_dt <= $2::text::timestamptz and $3::int % 60 = 0) ` +
      `and e.dt >= $1::text::timestamptz and e.dt <= $2::text::timestamptz group by 1, 2`;
  const text =
    `with counted as (${counted}), ` +
    `top as (select level from counted where level is not null group by level order by sum(n) desc, level limit ${LEVELS_MAX}) ` +
    `select bucket::text as bucket, case when counted.level is null then null when counted.level in (select level from top) then counted.level else 'other' end as level, ` +
    `sum(n)::text as n from counted group by 1, 2`;
  const rows = await timed(sql, timeoutMs, (tx) => tx.unsafe<{ bucket: string; level: string | null; n: string }[]>(text, params as never[]));

  const firstIndex = Math.floor(ms(request.from) / 1000 / size);
  const lastIndex = Math.floor(ms(request.to) / 1000 / size);
  const at = (index: number) => micros(new Date(index * size * 1000).toISOString());
  const data: Bucket[] = [];
  for (let index = firstIndex; index <= lastIndex; index++) data.push({ from: at(index), to: at(index + 1), count: 0, levels: {} });
  const levelTotals = new Map<string, number>();
  let total = 0;
  for (const row of rows) {
    const bucket = data[Number(row.bucket) - firstIndex];
    if (bucket === undefined) continue; // cannot happen: the window bounds the rows
    const n = Number(row.n);
    bucket.count += n;
    total += n;
    if (row.level !== null) {
      bucket.levels[row.level] = (bucket.levels[row.level] ?? 0) + n;
      levelTotals.set(row.level, (levelTotals.get(row.level) ?? 0) + n);
    }
  }
  // 'other' last, whatever its count: it is the rest, not a level.
  const levels = [...levelTotals].sort(([a, x], [b, y]) => Number(a === "other") - Number(b === "other") || y - x || (a < b ? -1 : 1)).map(([level]) => level);
  return { data, meta: { from: request.from, to: request.to, bucket_seconds: size, buckets: data.length, total, levels } };
}
