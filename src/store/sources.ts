// The sources as retention and the query API read them (retention/, query/request.ts): which ids
// exist, each one's retention, and the tombstones of deleted ones (written by sources/service.ts),
// so no file there names a table. May touch: sources (read), source_deletions (read, and deletes of
// tombstones whose grace period is over).
import type { Sql } from "./db";

/** Which of `ids` are sources. */
export async function sourceIdsAmong(sql: Sql, ids: number[]): Promise<number[]> {
  if (ids.length === 0) return [];
  const found = await sql<{ id: string }[]>`select id::text as id from sources where id = any(${ids}::bigint[])`;
  return found.map((row) => Number(row.id));
}

/** Every source's retention, in days. */
export async function sourceRetentions(sql: Sql): Promise<{ id: string; days: number }[]> {
  return await sql<{ id: string; days: number }[]>`select id, logs_retention as days from sources`;
}

/** The deleted sources whose events may still be stored, and when each was deleted. */
export async function sourceTombstones(sql: Sql): Promise<{ source_id: string; deleted_at: Date }[]> {
  return await sql<{ source_id: string; deleted_at: Date }[]>`select source_id, deleted_at from source_deletions`;
}

/** How many tombstones there are (retention/scheduler.ts waits for the flush before a sweep when any). */
export async function tombstoneCount(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from source_deletions`;
  return row!.n;
}

/** Deletes the tombstones of `deleted` (a bigint[] literal) older than `before`; returns how many. */
export async function clearTombstones(sql: Sql, deleted: string, before: Date): Promise<number> {
  const cleared = await sql`
    delete from source_deletions
    where deleted_at < ${before.toISOString()}::timestamptz and source_id = any(${deleted}::bigint[])`;
  return cleared.count;
}
