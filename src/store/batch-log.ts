// The batch log as the live tail reads it (tail/storage.ts, tail/hub.ts): each committed batch's
// seq and id range (flush_batches, written by store/copy.ts) and the commit counter, so no file in
// tail/ names a table. May touch: flush_batches and logpond_counters, read-only; a batch's events
// through log_events_by_id (store/sql/functions.sql), whichever tier holds them.
import type { Sql } from "./db";

/**
 * A FROM clause: each batch `b` (b.seq) beside its events `e` (id, source_id, dt, raw), in either
 * tier; the caller adds the select list and the conditions.
 */
export const BATCH_EVENTS = "flush_batches b cross join lateral log_events_by_id(b.first_id, b.last_id) e";

/** The oldest seq still in the batch log (it is kept about a day), or undefined when empty. */
export async function oldestSeq(sql: Sql): Promise<number | undefined> {
  const [row] = await sql<{ seq: string | null }[]>`select min(seq)::text as seq from flush_batches`;
  return row?.seq == null ? undefined : Number(row.seq);
}

/** The newest seq still in the batch log (0: none). */
export async function newestLoggedSeq(sql: Sql): Promise<number> {
  const [row] = await sql<{ seq: string | null }[]>`select max(seq)::text as seq from flush_batches`;
  return Number(row?.seq ?? 0);
}

/** The seqs of the logged batches after `seq`, in commit order. */
export async function seqsAfter(sql: Sql, seq: number): Promise<number[]> {
  const rows = await sql<{ seq: string }[]>`select seq::text as seq from flush_batches where seq > ${seq} order by seq`;
  return rows.map((row) => Number(row.seq));
}

/** The newest batch committed to this database (0: none yet); the counter outlives the batch log. */
export async function latestSeq(sql: Sql): Promise<number> {
  const [row] = await sql<{ seq: string }[]>`select value::text as seq from logpond_counters where name = 'commit_seq'`;
  return row ? Number(row.seq) : 0;
}
