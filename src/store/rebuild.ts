// A past day's log_blocks partition rebuilt without its deleted blocks, for retention/sweep.ts,
// which decides which day (partitionSpace). PostgreSQL gives a table's free space back to the
// disk only from its end (VACUUM truncates trailing empty pages) and a past day gets hardly any new
// blocks to reuse it, so the day's live blocks are copied as stored into a new table that takes
// its place. May touch: one day's partition (log_blocks_pYYYYMMDD), its replacement
// (…_rebuilt) and the one it replaced (…_old), log_blocks' partition bounds.
// Invariants: one transaction does the copy and the swap (a failure changes nothing); readers never
// wait on it longer than DDL_LOCK_TIMEOUT at a time; a writer of the day never waits for it past
// PostgreSQL's deadlock_timeout (it gives way); a REPEATABLE READ reader of log_blocks locks the
// table first (store/snapshot.ts), so no snapshot predates a swap it then reads across.
import type { TransactionSql } from "postgres";
import type { Sql } from "./db";
import { DDL_LOCK_TIMEOUT, insertableColumns, PARTITION_LOCK, type Partition } from "./partitions";

/** How long a rebuild waits for the day's writers to finish, and a replaced day's DROP for a VACUUM of it. */
const REBUILD_LOCK_TIMEOUT = "2s";
/** A block row's fixed columns, tuple header and entries in the day's six indexes, about (partitionSpace). */
const ROW_BYTES = 200;

/**
 * A daily partition's size on disk, and what its blocks take: their out-of-line values' stored
 * size (pg_column_size reads it from the pointer: nothing is fetched; only the table's main file
 * is scanned, one row per block), their other columns and ROW_BYTES each. Undefined, without the
 * scan, when the day takes less than `minTotal` on disk.
 */
export async function partitionSpace(sql: Sql, partition: Partition, minTotal = 0): Promise<{ total: number; live: number } | undefined> {
  const [size] = await sql.unsafe<{ total: number }[]>(`select pg_total_relation_size('${partition.name}')::float8 as total`);
  const total = size?.total ?? 0;
  if (total < minTotal) return undefined;
  const columns = ["payload", "body", "ids", "dts", "bloom", "fields", "hist_minutes", "hist_levels", "hist_counts"];
  const [blocks] = await sql.unsafe<{ live: number }[]>(
    `select coalesce(sum(${ROW_BYTES} + ${columns.map((c) => `coalesce(pg_column_size(${c}), 0)`).join(" + ")}), 0)::float8 as live from ${partition.name}`,
  );
  return { total, live: blocks?.live ?? 0 };
}

/**
 * The day's blocks copied into a new table, which takes its place. The day is locked SHARE while
 * it is copied (reads go on; a seal, merge or DELETE of that day waits), then log_blocks ACCESS
 * EXCLUSIVE for the swap (DETACH the old, ATTACH the new with its indexes built and analysed, the
 * old renamed …_old, the new renamed to the day's name), waited for at most DDL_LOCK_TIMEOUT,
 * `tries` times, and not at all once a writer waits for the day. Values are copied as stored (a
 * payload is not inflated or deflated again), and so are the tables' storage parameters. The old
 * table is dropped after the commit, holding nothing on log_blocks (a VACUUM of its TOAST table,
 * which autovacuum starts after the sweep's DELETEs, holds it for a while; a later rebuild or sweep
 * drops what is left: dropReplaced). 55P03 when a lock stayed busy or a writer came: nothing changed.
 * False when the day is no longer attached.
 */
export async function rebuildPartition(sql: Sql, partition: Partition, tries: number): Promise<boolean> {
  const { name, from, to } = partition;
  const next = `${name}_rebuilt`;
  const old = `${name}_old`;
  const range = `for values from ('${from.toISOString()}') to ('${to.toISOString()}')`;
  // A day replaced before and still held (its DROP waited past REBUILD_LOCK_TIMEOUT): the rename below would fail.
  if (!(await dropDetached(sql, old))) throw Object.assign(new Error(`${old} is still held`), { code: "55P03" });
  const swapped = await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${PARTITION_LOCK})`;
    const [attached] = await tx`select 1 from pg_class where relname = ${name} and relispartition`;
    if (!attached) return false;
    // Only writers of that day queue behind this wait (a seal of late events, a merge, the sweep's
    // DELETE), never a COPY or a read; an autovacuum of the day gives way to it after deadlock_timeout.
    await tx.unsafe(`set local lock_timeout = '${REBUILD_LOCK_TIMEOUT}'`);
    await tx.unsafe(`lock table ${name} in share mode`);
    await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
    await tx.unsafe(`drop table if exists ${next}`); // a leftover of an interrupted attempt, never attached
    // Its indexes made before ATTACH, which then adopts them instead of building them under its lock.
    await tx.unsafe(
      `create table ${next} (like log_blocks including defaults including constraints including generated including storage including compression including indexes)`,
    );
    await copyStorageParameters(tx, name, next);
    await tx.unsafe(`alter table ${next} add constraint ${next}_range check (max_dt >= '${from.toISOString()}' and max_dt < '${to.toISOString()}')`);
    const columns = await insertableColumns(tx);
    await tx.unsafe(`insert into ${next} (${columns}) select ${columns} from ${name}`);
    // The planner's statistics of the day, as the old table had them (autoanalyze would come later).
    await tx.unsafe(`analyze ${next}`);
    // A writer waiting for the day (behind the SHARE lock) holds log_blocks, which DETACH waits
    // for: the two would deadlock, and PostgreSQL might end the writer (a seal). The rebuild gives
    // way instead, before each try (a try waits DDL_LOCK_TIMEOUT, far below deadlock_timeout).
    const writerWaits = async () => {
      const [row] = await tx.unsafe<{ waits: boolean }[]>(
        `select exists (select 1 from pg_locks where locktype = 'relation' and relation = '${name}'::regclass and not granted) as waits`,
      );
      return row?.waits === true;
    };
    await patiently(tx, `alter table log_blocks detach partition ${name}`, tries, writerWaits);
    await patiently(tx, `alter table log_blocks attach partition ${next} ${range}`, tries);
    // Renamed, not dropped: a DROP would wait for a VACUUM of its TOAST table, under the lock on log_blocks.
    await tx.unsafe(`alter table ${name} rename to ${old}`);
    await tx.unsafe(`alter table ${next} rename to ${name}`);
    await tx.unsafe(`alter table ${name} drop constraint ${next}_range`);
    return true;
  });
  if (swapped) await dropDetached(sql, old);
  return swapped;
}

/** Days a rebuild replaced and could not drop at once (store/rebuild.ts rebuildPartition), dropped now where they can be. */
export async function dropReplaced(sql: Sql): Promise<void> {
  const left = await sql<{ name: string }[]>`
    select relname as name from pg_class where relname ~ '^log_blocks_p[0-9]{8}_old$' and relkind = 'r' and not relispartition`;
  for (const { name } of left) await dropDetached(sql, name);
}

/**
 * DROP of a detached table, waiting REBUILD_LOCK_TIMEOUT at most (autovacuum gives way after
 * deadlock_timeout); false when its lock stayed busy (left for later).
 */
async function dropDetached(sql: Sql, table: string): Promise<boolean> {
  return sql
    .begin(async (tx) => {
      await tx.unsafe(`set local lock_timeout = '${REBUILD_LOCK_TIMEOUT}'`);
      await tx.unsafe(`drop table if exists ${table}`);
      return true;
    })
    .catch((error: { code?: string }) => {
      if (error.code !== "55P03") throw error;
      return false;
    });
}

/** The old table's storage parameters (fillfactor, autovacuum settings, its TOAST table's) on the new one. */
async function copyStorageParameters(tx: TransactionSql, from: string, to: string): Promise<void> {
  const [options] = await tx<{ own: string[] | null; toast: string[] | null }[]>`
    select c.reloptions as own, t.reloptions as toast from pg_class c left join pg_class t on t.oid = c.reltoastrelid
    where c.oid = ${from}::regclass`;
  const settings = [...(options?.own ?? []), ...(options?.toast ?? []).map((option) => `toast.${option}`)];
  if (settings.length === 0) return;
  // name=value as pg_class keeps them: the value quoted as a literal.
  const list = settings.map((setting) => {
    const at = setting.indexOf("=");
    return `${setting.slice(0, at)} = '${setting.slice(at + 1).replaceAll("'", "''")}'`;
  });
  await tx.unsafe(`alter table ${to} set (${list.join(", ")})`);
}

/**
 * A DDL statement under DDL_LOCK_TIMEOUT, tried again after a short rest when its lock was busy
 * (up to `tries` times, then its 55P03), inside the caller's transaction: each try in a savepoint
 * (postgres.js fails the whole transaction on an error caught outside one). A 55P03 at once when
 * `giveWay` says so before a try.
 */
async function patiently(tx: TransactionSql, statement: string, tries: number, giveWay?: () => Promise<boolean>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    if (await giveWay?.()) throw Object.assign(new Error(`gave way before: ${statement}`), { code: "55P03" });
    try {
      await tx.savepoint((point) => point.unsafe(statement));
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== "55P03" || attempt >= tries) throw error;
      // Readers hold log_blocks: wait for a gap rather than queue in front of them.
      await Bun.sleep(50 + Math.random() * 100);
    }
  }
}
