// GET /api/v2/query/histogram?by=<field>: the histogram's buckets split by the values of any field
// instead of the level. Blocks' per-minute summaries know levels only, so every event of the window
// is read: the counting is the aggregations' (query/aggregate.ts, `by` with `buckets`), one
// statement within QUERY_TIMEOUT_MS; this file only reshapes its answer into the histogram's.
import { readAggregate } from "./aggregate";
import { LEVELS_MAX, type HistogramRequest } from "./histogram";
import type { Sql } from "../store/db";

export interface ValueBucket {
  from: string;
  to: string;
  count: number;
  /** Events per value of the field: the window's LEVELS_MAX most frequent, the rest as "other". */
  values: Record<string, number>;
}

export interface ValueHistogram {
  data: ValueBucket[];
  meta: { from: string; to: string; bucket_seconds: number; buckets: number; total: number; by: string; values: string[]; complete: true };
}

/**
 * The window's LEVELS_MAX most frequent values keep their names (ties by text, as the aggregation
 * ranks them); the others are summed as "other", which a value named "other" joins. An event without
 * the field (or with null) is in `count` only, as an event without a level is.
 */
export async function readHistogramBy(sql: Sql, request: HistogramRequest & { by: string }, timeoutMs: number): Promise<ValueHistogram> {
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
