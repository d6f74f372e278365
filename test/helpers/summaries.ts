// Asking the aggregation and the block summaries behind it (src/query/aggregate.ts,
// logpond_block_summaries in src/store/sql/functions.sql), for the tests that compare an answer
// counted from summaries with one that reads every event.
import { expect } from "bun:test";
import type postgres from "postgres";
import type { TestLogpond } from "./logpond";

/** GET /api/v2/query/aggregate for one source; expects a 200 and gives its body. */
export function aggregator(lp: TestLogpond, sourceId: string) {
  return async (params: Record<string, string>) => {
    const search = new URLSearchParams({ source_ids: sourceId, ...params });
    const response = await lp.api("GET", `/api/v2/query/aggregate?${search}`);
    const body = (await response.json()) as any;
    expect({ status: response.status, errors: body.errors }).toEqual({ status: 200, errors: undefined });
    return body;
  };
}

/** Events the summaries count for `paths` in the window: how much of an answer did not read events. */
export async function countedBySummaries(
  sql: postgres.Sql,
  sourceId: string,
  paths: string[],
  from: string,
  to: string,
  bucketSeconds: number | null = null,
): Promise<number> {
  const prefixes = [...new Set(paths.flatMap((path) => path.split(".").map((_, i, parts) => parts.slice(0, i + 1).join("."))))];
  const [row] = await sql<{ n: string }[]>`
    select coalesce(sum(n), 0)::text as n
    from logpond_block_summaries(${[Number(sourceId)]}::bigint[], ${from}::timestamptz, ${to}::timestamptz, ${paths}::text[], ${prefixes}::text[], ${bucketSeconds}::numeric)`;
  return Number(row!.n);
}
