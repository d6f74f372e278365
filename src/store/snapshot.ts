// One snapshot over several statements for a reader of both tiers (the query API's histogram
// with its scan threads: query/histogram.ts). A REPEATABLE READ, READ ONLY transaction whose first
// statement takes ACCESS SHARE on the hot tier (log_hot, log_chunks and their partitions), before
// any SELECT fixes the snapshot: a seal's TRUNCATE is not MVCC-safe, and a snapshot taken before it
// would see the truncated hot rows as gone while their blocks are not yet visible to it. Holding
// the lock, a seal waits for the reader or deletes its rows instead (store/sealer.ts
// TRUNCATE_PATIENCE_MS). log_blocks too: a day rebuilt (store/rebuild.ts) after the snapshot is
// fixed would be a new table whose rows the snapshot cannot see. May touch: nothing but locks; the
// caller's statements read.
import type { Sql } from "./db";

/** Runs `work` in such a transaction, each statement cancelled after `timeoutMs` (57014). */
export async function inSnapshot<T>(sql: Sql, timeoutMs: number, work: (tx: Sql) => Promise<T>): Promise<T> {
  return (await sql.begin("isolation level repeatable read read only", async (tx) => {
    await tx.unsafe("lock table log_hot, log_chunks, log_blocks in access share mode");
    await tx`select set_config('statement_timeout', ${String(timeoutMs)}, true)`;
    return work(tx as unknown as Sql);
  })) as T;
}
