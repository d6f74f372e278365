// GET /api/v2/query/histogram?by=<field>: the histogram's buckets split by the values of any field
// instead of the level. Without a query the counting is the aggregations' (query/aggregate.ts, `by`
// with `buckets`: whole blocks from their field summaries, the rest read), one statement within
// QUERY_TIMEOUT_MS, reshaped here into the histogram's answer. With one, every matching event is
// read, so the window is counted as the level histogram counts it (query/histogram.ts histogramOf:
// slices from the newest, what is counted in time answered, `meta.complete` false past it), the
// sealed v4 blocks on the scan threads as the level histogram counts them (countScanned).
import { expressions, readAggregate } from "./aggregate";
import { type Counted, countScanned, histogramOf, LEVELS_MAX, type HistogramRequest, type Slice } from "./histogram";
import { besideScans, leftOf, tiers, timed } from "./read";
import { TooManyTallies } from "./scan";
import type { ScanPool } from "./scan-pool";
import { compileQuery } from "./sql";
import type { Sql } from "../store/db";

export interface ValueBucket {
  from: string;
  to: string;
  /** null: not counted within QUERY_TIMEOUT_MS (meta.complete is false). */
  count: number | null;
  /** Events per value of the field: the window's LEVELS_MAX most frequent, the rest as "other". */
  values: Record<string, number>;
}

export interface ValueHistogram {
  data: ValueBucket[];
  meta: { from: string; to: string; bucket_seconds: number; buckets: number; total: number; by: string; values: string[]; complete: boolean };
}

/**
 * The window's LEVELS_MAX most frequent values keep their names (ties by text, as the aggregation
 * ranks them); the others are summed as "other", which a value named "other" joins. An event without
 * the field (or with null) is in `count` only, as an event without a level is.
 */
export async function readHistogramBy(
  sql: Sql,
  request: HistogramRequest & { by: string },
  timeoutMs: number,
  scans?: ScanPool,
  /** What counts a slice under a query (a test's stand-in for the statement). */
  count: (slice: Slice, timeoutMs: number) => Promise<Counted> = (slice, left) => countSlice(sql, request, slice, left, scans),
): Promise<ValueHistogram> {
  if (request.query) {
    const histogram = await histogramOf(request, timeoutMs, count);
    const { from, to, bucket_seconds, buckets, total, levels, complete } = histogram.meta;
    return {
      data: histogram.data.map((bucket) => ({ from: bucket.from, to: bucket.to, count: bucket.count, values: bucket.levels })),
      meta: { from, to, bucket_seconds, buckets, total, by: request.by, values: levels, complete },
    };
  }
  // One more than shown: null may hold a place in the ranking, and it is no series.
  const answer = await readAggregate(
    sql,
    {
      sourceIds: request.sourceIds,
      malformed: request.malformed,
      query: request.query,
      from: request.from,
      to: request.to,
      by: [request.by],
      facets: [],
      distinct: undefined,
      field: undefined,
      top: LEVELS_MAX + 1,
      buckets: request.buckets,
      maxEvents: undefined,
      missing: true,
    },
    timeoutMs,
    scans,
  );
  const ranked = answer.data.by!.top.map(({ values: [value] }) => value ?? null);
  const named = ranked.filter((value) => value !== null).slice(0, LEVELS_MAX);
  // Each ranked place → its series: its own name, "other", or none (null: no value).
  const series = ranked.map((value) => (value === null ? null : named.includes(value) && value !== "other" ? value : "other"));
  const totals = new Map<string, number>();
  const data = answer.data.buckets!.map((bucket) => {
    const values: Record<string, number> = {};
    const add = (name: string, n: number) => {
      if (n === 0) return;
      values[name] = (values[name] ?? 0) + n;
      totals.set(name, (totals.get(name) ?? 0) + n);
    };
    bucket.top!.forEach((n, rank) => {
      const name = series[rank];
      if (name !== null && name !== undefined) add(name, n);
    });
    add("other", bucket.other! - bucket.missing!);
    return { from: bucket.from, to: bucket.to, count: bucket.count, values };
  });
  // 'other' last, whatever its count: it is the rest, not a value.
  const values = [...totals].sort(([a, x], [b, y]) => Number(a === "other") - Number(b === "other") || y - x || (a < b ? -1 : 1)).map(([value]) => value);
  return {
    data,
    meta: {
      from: request.from,
      to: request.to,
      bucket_seconds: answer.meta.bucket_seconds!,
      buckets: data.length,
      total: answer.data.count,
      by: request.by,
      values,
      complete: true,
    },
  };
}

/** Values each slice names before folding the rest into "other" (the answer keeps LEVELS_MAX). */
const VALUES_PER_STATEMENT = 32;

/**
 * Counts per (bucket, value of `by`) of the slice's matching events, as query/histogram.ts's
 * countSlice counts levels: the slice's VALUES_PER_STATEMENT most frequent values named, the rest
 * as "other", an event without the field under null (in the bucket's count only).
 */
function countSlice(sql: Sql, request: HistogramRequest & { by: string }, slice: Slice, timeoutMs: number, scans: ScanPool | undefined): Promise<Counted> {
  const params: unknown[] = [slice.from, slice.to, slice.bucketSeconds, request.sourceIds];
  const condition = compileQuery(request.query!, params.length + 1, "line");
  params.push(...condition.params);
  const window = ["$4::bigint[]", "$1::text::timestamptz", "$2::text::timestamptz"] as const;
  const events = scans ? besideScans(params, ...window, request.query!) : tiers(params, ...window, request.query);
  const { value, threaded } = expressions(params);
  const level = value(request.by);
  const fromThreads = threaded(request.by, "u.value");
  // The scan threads' counts (query/scan.ts countBlocks with `by`), as three arrays added last.
  const threads = scans
    ? `union all select u.bucket, ${fromThreads}, u.n from unnest($${params.length + 1}::bigint[], $${params.length + 2}::text[], $${params.length + 3}::bigint[]) u(bucket, value, n) `
    : "";
  const text =
    `with counted as (select floor(extract(epoch from dt) / $3::bigint)::bigint as bucket, ${level} as level, count(*) as n from ${events} ` +
    `where dt >= $1::text::timestamptz and dt ${slice.last ? "<=" : "<"} $2::text::timestamptz and source_id = any($4::bigint[]) and ${condition.text} group by 1, 2 ${threads}), ` +
    `top as (select level from counted where level is not null group by level order by sum(n) desc, level limit ${VALUES_PER_STATEMENT}) ` +
    `select bucket::text as bucket, case when counted.level is null then null when counted.level in (select level from top) then counted.level else 'other' end as level, ` +
    `sum(n)::text as n from counted group by 1, 2`;
  if (!scans) return timed(sql, timeoutMs, (tx) => tx.unsafe<Counted>(text, params as never[]));
  const started = performance.now();
  return countScanned(sql, { ...slice, query: request.query!, sourceIds: request.sourceIds, by: request.by }, timeoutMs, scans, {}, (tx, counts) =>
    tx.unsafe<Counted>(text, [...params, counts.buckets, counts.levels, counts.counts] as never[]),
  ).catch((error: unknown) => {
    // Too many values to add up here (ids, messages): PostgreSQL counts the slice alone, in what is left of the time.
    if (!(error instanceof TooManyTallies)) throw error;
    return countSlice(sql, request, slice, leftOf(timeoutMs, started), undefined);
  });
}
