// Deletes that make stored events expire, one bounded statement per call, for retention/sweep.ts
// (which decides what goes, rests between calls and checks its AbortSignal). May touch: log_blocks
// (by its (source_id, max_dt) index), log_filters, the hot tier's partitions (log_hot, log_chunks).
// Invariants: row locks only, never more than BLOCKS_PER_STATEMENT blocks or filters a statement.
import type { Sql } from "./db";

/** Blocks (or filters) one DELETE statement removes, at most (up to BLOCK_EVENTS events a block). */
export const BLOCKS_PER_STATEMENT = 200;
const UNDEFINED_TABLE = "42P01";

/** One hot partition: log_hot's rows or log_chunks' chunks (drizzle/0015). */
export interface HotLeaf {
  name: string;
  chunks: boolean;
}

/** dt of the oldest event still stored in a block (null: none). */
export async function oldestBlockTime(sql: Sql): Promise<Date | null> {
  const [oldest] = await sql<{ ms: number | null }[]>`select (extract(epoch from min(min_dt)) * 1000)::float8 as ms from log_blocks`;
  return oldest?.ms == null ? null : new Date(oldest.ms);
}

/**
 * Up to BLOCKS_PER_STATEMENT of a source's blocks whose newest event is before `before` (from
 * 8.64e15, the largest Date: every block). Fewer than that removed: none is left.
 */
export async function deleteBlocks(sql: Sql, sourceId: number, before: Date): Promise<{ blocks: number; events: number; bytes: number }> {
  const until = before.getTime() >= 8.64e15 ? "infinity" : before.toISOString();
  // ctid is unique within one partition only: the pair with tableoid names one block.
  const [removed] = await sql.unsafe<{ blocks: number; events: number; bytes: number }[]>(
    `with gone as (
       delete from log_blocks b where (b.tableoid, b.ctid) in (
         select tableoid, ctid from log_blocks where source_id = $1::bigint and max_dt < $2::text::timestamptz limit ${BLOCKS_PER_STATEMENT})
       returning n, pg_column_size(b.*) as bytes)
     select count(*)::int as blocks, coalesce(sum(n), 0)::int as events, coalesce(sum(bytes), 0)::float8 as bytes from gone`,
    [sourceId, until],
  );
  return { blocks: removed?.blocks ?? 0, events: removed?.events ?? 0, bytes: removed?.bytes ?? 0 };
}

/**
 * Up to BLOCKS_PER_STATEMENT filter rows none of whose blocks is left, among those whose newest event
 * is before `before` (null: none) or of a `deleted` source. Only a block's removal orphans one (a
 * filter is written in its blocks' transaction), so only those rows could be. A row with a block
 * left stays whatever happened meanwhile: a block is never without its filter (a search would not find it).
 */
export async function deleteOrphanFilters(sql: Sql, before: Date | null, deleted: readonly number[]): Promise<{ filters: number; bytes: number }> {
  const [removed] = await sql.unsafe<{ filters: number; bytes: number }[]>(
    `with gone as (
       delete from log_filters where id = any(array(
         select f.id from log_filters f
         where (f.max_dt < $1::text::timestamptz or f.source_id = any($2::bigint[]))
           and not exists (select 1 from log_blocks b where b.filter_id = f.id)
         limit ${BLOCKS_PER_STATEMENT}))
       returning pg_column_size(log_filters.*) as bytes)
     select count(*)::int as filters, coalesce(sum(bytes), 0)::float8 as bytes from gone`,
    [before === null ? "-infinity" : before.toISOString(), pgArray(deleted)],
  );
  return { filters: removed?.filters ?? 0, bytes: removed?.bytes ?? 0 };
}

/** The hot tier's partitions now: each holds a minute or so of events. */
export async function hotLeaves(sql: Sql): Promise<HotLeaf[]> {
  return sql<HotLeaf[]>`
    select c.relname as name, t.tier = 'log_chunks' as chunks
    from (values ('log_hot'), ('log_chunks')) t0(tier), lateral (select t0.tier, p.relid from pg_partition_tree(t0.tier::regclass) p where p.isleaf) t
    join pg_class c on c.oid = t.relid`;
}

/** The `deleted` sources' rows or chunks in one hot partition, in one DELETE; the events removed (0: sealed and dropped meanwhile). */
export async function deleteHotEvents(sql: Sql, leaf: HotLeaf, deleted: readonly number[]): Promise<number> {
  const [removed] = await sql
    .unsafe<{ events: number }[]>(
      `with gone as (delete from ${leaf.name} where source_id = any($1::bigint[]) returning ${leaf.chunks ? "n" : "1 as n"}) select coalesce(sum(n), 0)::int as events from gone`,
      [pgArray(deleted)],
    )
    .catch((error) => {
      if ((error as { code?: string }).code === UNDEFINED_TABLE) return [{ events: 0 }]; // sealed and dropped meanwhile
      throw error;
    });
  return removed?.events ?? 0;
}

/** Arrays go as text literals: postgres.js serialises typed array parameters only in some paths. */
export function pgArray(values: readonly (number | string)[]): string {
  return `{${values.join(",")}}`;
}
