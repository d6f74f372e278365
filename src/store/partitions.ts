// log_blocks' daily range partitions by max_dt (UTC days, named log_blocks_pYYYYMMDD), created
// ahead by logpond; log_blocks_default takes any block outside them, so sealing never fails for a
// block's time. A day goes whole (dropPartition) when retention/sweep.ts finds every source has
// outlived it (a day mostly of deleted blocks is rebuilt: store/rebuild.ts). Invariants: idempotent
// and safe with several instances (advisory lock, existence re-checked under it); every DDL that
// locks log_blocks runs under a short lock_timeout so it never queues in front of a COPY or a seal
// for longer than that. Never decides which day goes, or which is rebuilt.
import type { Sql } from "./db";

export const DAY_MS = 86_400_000;
/** Taken by every instance that creates or drops partitions. */
export const PARTITION_LOCK = 73_615_402;
/** How long a DDL statement may wait for a lock (and so hold up a COPY queued behind it). */
export const DDL_LOCK_TIMEOUT = "20ms";
const NAME = /^log_blocks_p(\d{4})(\d{2})(\d{2})$/;
const UNDEFINED_TABLE = "42P01";

export interface Partition {
  name: string;
  /** [from, to): UTC midnight to the next. */
  from: Date;
  to: Date;
}

export function partitionFor(day: Date): Partition {
  const from = new Date(Math.floor(day.getTime() / DAY_MS) * DAY_MS);
  const iso = from.toISOString();
  return { name: `log_blocks_p${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}`, from, to: new Date(from.getTime() + DAY_MS) };
}

/** The daily partitions attached now, oldest first (tables of other names are not ours). */
export async function listPartitions(sql: Sql): Promise<Partition[]> {
  const rows = await sql<{ name: string }[]>`
    select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'log_blocks'::regclass`;
  const days: Partition[] = [];
  for (const { name } of rows) {
    const match = NAME.exec(name);
    if (match) days.push(partitionFor(new Date(`${match[1]}-${match[2]}-${match[3]}T00:00:00Z`)));
  }
  return days.sort((a, b) => a.from.getTime() - b.from.getTime());
}

/**
 * Makes sure a partition exists for every UTC day touching [from, to]. Returns the names created.
 * A day that cannot get its locks within DDL_LOCK_TIMEOUT is skipped (the next call retries);
 * its blocks meanwhile land in the default partition.
 */
export async function ensurePartitions(sql: Sql, from: Date, to: Date, log: (line: string) => void = () => {}): Promise<string[]> {
  const existing = new Set((await listPartitions(sql)).map((p) => p.name));
  const created: string[] = [];
  for (let day = partitionFor(from).from.getTime(); day <= to.getTime(); day += DAY_MS) {
    const partition = partitionFor(new Date(day));
    if (existing.has(partition.name)) continue;
    try {
      if (await createPartition(sql, partition)) created.push(partition.name);
    } catch (error) {
      if ((error as { code?: string }).code !== "55P03") throw error;
      log(`partitions: ${partition.name} not created this time (a lock was busy for ${DDL_LOCK_TIMEOUT}); will retry`);
    }
  }
  return created;
}

/**
 * One day: a standalone table, the default partition's blocks of that day moved into it, then
 * ATTACH (SHARE UPDATE EXCLUSIVE on log_blocks: sealing goes on). The default partition is locked
 * (ATTACH needs that anyway to re-check it) so no block of that day can slip in between.
 */
async function createPartition(sql: Sql, partition: Partition): Promise<boolean> {
  const { name, from, to } = partition;
  const range = `for values from ('${from.toISOString()}') to ('${to.toISOString()}')`;
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${PARTITION_LOCK})`;
    const [already] = await tx`select 1 from pg_class where relname = ${name} and relispartition`;
    if (already) return false;
    await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
    await tx.unsafe(`drop table if exists ${name}`); // a leftover of an interrupted attempt, never attached
    // ATTACH refuses a table that lacks a CHECK constraint of log_blocks or has a plain column where
    // log_blocks has a generated one: an operator's own would stop every new day.
    await tx.unsafe(
      `create table ${name} (like log_blocks including defaults including constraints including generated including storage including compression)`,
    );
    // Lets ATTACH skip scanning the new table; dropped once attached (the bound says the same).
    await tx.unsafe(`alter table ${name} add constraint ${name}_range check (max_dt >= '${from.toISOString()}' and max_dt < '${to.toISOString()}')`);
    await tx.unsafe(`lock table log_blocks_default in access exclusive mode`);
    const columns = await insertableColumns(tx);
    await tx.unsafe(`
      with moved as (
        delete from log_blocks_default where max_dt >= '${from.toISOString()}' and max_dt < '${to.toISOString()}' returning ${columns}
      ) insert into ${name} (${columns}) select ${columns} from moved`);
    await tx.unsafe(`alter table log_blocks attach partition ${name} ${range}`);
    await tx.unsafe(`alter table ${name} drop constraint ${name}_range`);
    return true;
  });
}

/** A daily partition's events (their blocks' n) and size on disk, as text (bigints). */
export async function partitionSize(sql: Sql, partition: Partition): Promise<{ rows: string; bytes: string } | undefined> {
  const [size] = await sql.unsafe<{ rows: string; bytes: string }[]>(
    `select (select coalesce(sum(n), 0) from ${partition.name})::text as rows, pg_total_relation_size('${partition.name}')::text as bytes`,
  );
  return size;
}

/**
 * DETACH (brief ACCESS EXCLUSIVE on log_blocks, waited for at most DDL_LOCK_TIMEOUT: 55P03 when
 * busy, the caller may retry) then DROP. 42P01 when the partition is no longer attached.
 */
export async function dropPartition(sql: Sql, partition: Partition): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${PARTITION_LOCK})`;
    const [attached] = await tx`select 1 from pg_class where relname = ${partition.name} and relispartition`;
    if (!attached) throw Object.assign(new Error(`${partition.name} is gone`), { code: UNDEFINED_TABLE });
    await tx.unsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`);
    await tx.unsafe(`alter table log_blocks detach partition ${partition.name}`);
  });
  await sql.unsafe(`drop table ${partition.name}`);
}

/** log_blocks' columns by name, without generated ones (PostgreSQL computes those; it refuses values for them). */
export async function insertableColumns(tx: Pick<Sql, "unsafe">): Promise<string> {
  const [{ columns } = { columns: "*" }] = await tx.unsafe<{ columns: string }[]>(
    `select string_agg(quote_ident(attname), ', ' order by attnum) as columns from pg_attribute
     where attrelid = 'log_blocks'::regclass and attnum > 0 and not attisdropped and attgenerated = ''`,
  );
  return columns;
}
