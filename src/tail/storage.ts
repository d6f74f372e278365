// Reads live-tail rows back from PostgreSQL: one batch by its seq (a batch another instance wrote)
// and a client's catch-up after a resume point, both through the batch log's id range of each
// batch, from either tier (store/batch-log.ts), their keys in the order sent (store/key-orders.ts).
// Read-only; the management pool only. The query's condition is the compiled SQL one.
import type { Node } from "../query/parse";
import { DT_TEXT } from "../query/read";
import { compileQuery } from "../query/sql";
import { BATCH_EVENTS } from "../store/batch-log";
import type { Sql } from "../store/db";
import { showInSentOrder } from "../store/key-orders";
import type { TailRow } from "./rows";

interface StoredRow {
  seq: string;
  id: string;
  source_id: string;
  dt: string;
  raw: string;
}

const SELECT = `select b.seq::text as seq, e.id::text as id, e.source_id::text as source_id, to_char(e.dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt, e.raw::text as raw
  from ${BATCH_EVENTS}`;

const toRow = (row: StoredRow): TailRow => ({ seq: Number(row.seq), id: row.id, sourceId: Number(row.source_id), dt: row.dt, raw: row.raw });

/** The rows of batch `seq` for these sources, in id order. */
export async function readBatchRows(sql: Sql, seq: number, sourceIds: number[]): Promise<TailRow[]> {
  const rows = await sql.unsafe<StoredRow[]>(`${SELECT} where b.seq = $1::bigint and e.source_id = any($2::bigint[]) order by e.id`, [
    seq,
    sourceIds,
  ] as never[]);
  return (await showInSentOrder(sql, rows, "raw")).map(toRow);
}

/** Up to `limit` rows after (seq, id), of batches up to `upTo`, in (seq, id) order. */
export async function readCatchUp(
  sql: Sql,
  from: { seq: number; id: string },
  upTo: number,
  sourceIds: number[],
  query: Node | undefined,
  limit: number,
): Promise<TailRow[]> {
  const { text, params } = catchUpStatement(from, upTo, sourceIds, query, limit);
  return (await showInSentOrder(sql, await sql.unsafe<StoredRow[]>(text, params as never[]), "raw")).map(toRow);
}

/** readCatchUp's statement and parameters (tests read its plan). */
export function catchUpStatement(
  from: { seq: number; id: string },
  upTo: number,
  sourceIds: number[],
  query: Node | undefined,
  limit: number,
): { text: string; params: unknown[] } {
  const params: unknown[] = [from.seq, from.id === "" ? "0" : from.id, upTo, sourceIds, limit];
  let condition = "";
  if (query) {
    const compiled = compileQuery(query, params.length + 1);
    params.push(...compiled.params);
    condition = `and ${compiled.text}`;
  }
  // `b.seq >= $1` repeats what the OR implies: the OR names e.id, so PostgreSQL can check it only
  // after reading each batch's rows, and without this bound it reads every batch of the log (a
  // day's) up to `upTo`, each an id-range scan of the hot tier, to keep those after the resume point.
  const text = `${SELECT} where b.seq >= $1::bigint and b.seq <= $3::bigint and (b.seq > $1::bigint or (b.seq = $1::bigint and e.id > $2::bigint))
    and e.source_id = any($4::bigint[]) ${condition} order by b.seq, e.id limit $5`;
  return { text, params };
}
