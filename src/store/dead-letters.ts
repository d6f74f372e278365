// The dead letters as the query API and retention read them (query/read.ts, retention/sweep.ts):
// the events PostgreSQL refused for their data, which store/copy.ts keeps in dead_letters, so no
// file there names the table. May touch: dead_letters (read, and deletes of expired ones, a bounded
// number per statement).
import type { Sql } from "./db";

/**
 * A page of dead letters of some sources in id order (newest first or oldest first): each row's id
 * and the dead letter as JSON text. Parameters: $1 the sources (bigint[]), $2 the rows to read, $3
 * (when `after`) the id to read past.
 */
export function deadLettersPage(newest: boolean, after: boolean): string {
  const keyset = !after ? "" : newest ? "and id < $3::bigint" : "and id > $3::bigint";
  return (
    `select id::text as id, jsonb_build_object('id', id::text, 'source_id', source_id::text, 'dt', dt, 'raw', raw, 'sqlstate', sqlstate, 'error', error, ` +
    `'failed_at', to_char(failed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text as row ` +
    `from dead_letters where source_id = any($1::bigint[]) ${keyset} order by dead_letters.id ${newest ? "desc" : "asc"} limit $2`
  );
}

/**
 * Deletes up to `limit` dead letters of the `deleted` sources, or older than their source's
 * retention (counted from when they failed: their dt may be what was refused); returns how many.
 */
export async function deleteDeadLetters(sql: Sql, deleted: string, now: Date, limit: number): Promise<number> {
  const gone = await sql`
    delete from dead_letters where id = any(array(
      select d.id from dead_letters d left join sources s on s.id = d.source_id
      where d.source_id = any(${deleted}::bigint[])
         or (s.id is not null and d.failed_at < ${now.toISOString()}::timestamptz - make_interval(secs => s.logs_retention * 86400))
      limit ${limit}))`;
  return gone.count;
}
