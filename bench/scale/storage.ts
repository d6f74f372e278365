// bench/scale.ts's view of storage: what both tiers hold, the sealer's progress (its counters,
// its statements sampled in pg_stat_activity), the hot tier's rows over time, and the sizes and
// WAL the figures are made of. Reads only; never holds log_hot's lock for long (the sealer waits on it).
import type postgres from "postgres";
import { waitFor } from "../../test/helpers/wait";
import { cpuSeconds } from "../lib";
import type { Source } from "./service";

/** How often the sealer's statements are looked for in pg_stat_activity (its busy time is counted in these). */
export const SAMPLE_MS = 250;

/** The bench's events in both tiers, in one snapshot (one statement): a move between them counts once; a staged block (its events still hot) not at all. */
export async function stored(sql: postgres.Sql, sources: Source[]): Promise<number> {
  const ids = sources.map((s) => s.id);
  const rows = await sql`
    select (select count(*) from log_hot where source_id = any(${ids}::bigint[]))
      + (select coalesce(sum(n), 0) from log_chunks where source_id = any(${ids}::bigint[]))
      + (select coalesce(sum(n), 0) from log_blocks where source_id = any(${ids}::bigint[]) and generation is null) as n`;
  return Number(rows[0]!.n);
}

export async function metrics(apiUrl: string): Promise<string> {
  return (await fetch(`${apiUrl}/metrics`)).text();
}

export const counter = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)`, "m").exec(text)?.[1] ?? 0);

/**
 * Waits until logpond has committed all `n` events (its flushed count, cheap to poll) and returns
 * when it saw that (performance.now()), then checks that both tiers hold exactly `n`.
 */
export async function waitForStored(sql: postgres.Sql, sources: Source[], n: number, since: Date): Promise<number> {
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    // From flush_batches (a few thousand rows) rather than /metrics: with INGEST_WORKERS the
    // flushes are the workers', not the scraped process's.
    const flushed = await committedSince(sql, since);
    if (flushed !== last) [last, lastChange] = [flushed, Date.now()];
    if (flushed >= n) break;
    if (Date.now() - lastChange > 120_000) throw new Error(`storage stalled: ${flushed} of ${n} events flushed, no progress for 120 s`);
    await Bun.sleep(250);
  }
  const at = performance.now();
  const count = await stored(sql, sources);
  if (count !== n) throw new Error(`log_hot and log_blocks hold ${count} events of the bench's sources, ${n} were sent`);
  return at;
}

/** PostgreSQL's clock: where a run's commits start (`committedSince`). */
export async function databaseNow(sql: postgres.Sql): Promise<Date> {
  return (await sql<{ now: Date }[]>`select now()`)[0]!.now;
}

/** Events of the batches committed since `since` (every writer's: the database must be the bench's alone). */
export async function committedSince(sql: postgres.Sql, since: Date): Promise<number> {
  const [row] = await sql`select coalesce(sum(last_id - first_id + 1), 0)::bigint as n from flush_batches where seq is not null and committed_at >= ${since}`;
  return Number(row!.n);
}

/**
 * Events in the hot tier: log_hot's rows as PostgreSQL's statistics count them (live rows; current
 * within a second or so), and the chunk journal's counts (a few thousand rows: read, not estimated).
 */
export async function hotEstimate(sql: postgres.Sql): Promise<number> {
  const rows = await sql`select (select coalesce(sum(n_live_tup), 0) from pg_stat_user_tables where relname like 'log\\_hot\\_%')
    + (select coalesce(sum(n), 0) from log_chunks) as n`;
  return Number(rows[0]!.n);
}

export async function hotExact(sql: postgres.Sql): Promise<number> {
  return Number((await sql`select (select count(*) from log_hot) + (select coalesce(sum(n), 0) from log_chunks) as n`)[0]!.n);
}

export interface Sample {
  /** performance.now() */
  at: number;
  /** A seal of the sealer was running (its transaction holds a hot table in SHARE mode). */
  sealing: boolean;
  /** An autovacuum worker was processing a log_hot partition (it holds a lock the sealer's drop waits for). */
  vacuuming: boolean;
  /** log_hot's live rows (statistics), every 8th sample. */
  hot?: number;
}

/**
 * Every SAMPLE_MS: is one of the sealer's seals running (a transaction holding a log_hot partition
 * in SHARE mode, store/sealer.ts)? Their count × SAMPLE_MS is the sealer's busy time; every 2 s
 * also log_hot's rows.
 */
export function startSampler(sql: postgres.Sql): { samples: Sample[]; sealerCpu: () => number; stop: () => Promise<void> } {
  const samples: Sample[] = [];
  /** The backends seen running a move, with their CPU seconds when first seen. */
  const sealers = new Map<number, number>();
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const next = performance.now() + SAMPLE_MS;
      const [row] = await sql`
        select array(select distinct l.pid from pg_locks l join pg_class c on c.oid = l.relation
                     where l.mode = 'ShareLock' and l.granted and c.relname like 'log\_hot\_%') as sealing,
          exists (select 1 from pg_stat_activity where backend_type = 'autovacuum worker' and query like '%log\_hot\_%') as vacuuming`;
      const pids = row!.sealing as number[];
      for (const pid of pids) if (!sealers.has(pid)) sealers.set(pid, cpuSeconds(pid));
      const sample: Sample = { at: performance.now(), sealing: pids.length > 0, vacuuming: row!.vacuuming as boolean };
      if (i % 8 === 0) sample.hot = await hotEstimate(sql);
      samples.push(sample);
      await Bun.sleep(Math.max(0, next - performance.now()));
    }
  })();
  return {
    samples,
    /** CPU seconds the sealer's backends used since first seen moving (PostgreSQL's side of sealing). */
    sealerCpu: () => [...sealers].reduce((sum, [pid, first]) => sum + cpuSeconds(pid) - first, 0),
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

export const busySeconds = (samples: Sample[], from: number, to: number, what: "sealing" | "vacuuming" = "sealing") =>
  (samples.filter((s) => s.at >= from && s.at <= to && s[what]).length * SAMPLE_MS) / 1000;

/**
 * Waits until the sealer's counters account for all `n` events (added when a pass ends, after its
 * last move); returns when (performance.now()) and the /metrics text. Never counts log_hot meanwhile:
 * a count holds its lock for seconds, and a sealer that cannot lock log_hot keeps emptied partitions.
 */
export async function waitForSealed(apiUrl: string, n: number, sealIntervalMs: number): Promise<{ at: number; text: string }> {
  let seen = 0;
  const { text, at } = await waitFor(
    `the sealer's counters to show all ${n} events sealed or dropped`,
    async () => ({ text: await metrics(apiUrl), at: performance.now() }),
    // A tick, a pass, then ≥ 1,000 events/s.
    {
      timeoutMs: 2 * sealIntervalMs + 120_000 + n,
      intervalMs: 250,
      until: ({ text }) => (seen = counter(text, "logpond_sealer_events_sealed_total") + counter(text, "logpond_sealer_events_dropped_total")) >= n,
    },
  ).catch(() => {
    throw new Error(`sealing stalled: the sealer's counters show ${seen} of ${n} events sealed or dropped`);
  });
  return { at, text };
}

/** What the merges did after the seal (store/merge.ts's counters), and when they settled. */
export interface Merges {
  /** performance.now() when a whole pass that began after the seal merged nothing; undefined: not within the wait. */
  settledAt: number | undefined;
  events: number;
  blocksMerged: number;
  blocksWritten: number;
  passes: number;
}

/**
 * Waits until the background merges have nothing left to do: a merge pass that began after the
 * call (two passes counted since) ended without merging a block. At most `waitMs`.
 */
export async function waitForMerges(apiUrl: string, waitMs: number): Promise<Merges> {
  const read = async () => {
    const text = await metrics(apiUrl);
    return {
      passes: counter(text, "logpond_merge_passes_total"),
      merged: counter(text, "logpond_merge_blocks_merged_total"),
      written: counter(text, "logpond_merge_blocks_written_total"),
      events: counter(text, "logpond_merge_events_total"),
    };
  };
  const first = await read();
  let last = first;
  let mergedAtLastPass = first.merged;
  const deadline = performance.now() + waitMs;
  let settledAt: number | undefined;
  while (performance.now() < deadline) {
    await Bun.sleep(1_000);
    const now = await read();
    if (now.passes > last.passes) {
      if (now.passes >= first.passes + 2 && now.merged === mergedAtLastPass) {
        settledAt = performance.now();
        last = now;
        break;
      }
      mergedAtLastPass = now.merged;
    }
    last = now;
  }
  return {
    settledAt,
    events: last.events - first.events,
    blocksMerged: last.merged - first.merged,
    blocksWritten: last.written - first.written,
    passes: last.passes - first.passes,
  };
}

/**
 * log_hot's partitions besides the open generation and the default one: 0 once every sealed
 * partition is dropped. Catalog only (a vacuum may have cut an emptied one to 0 bytes meanwhile).
 */
export async function hotSealedPartitions(sql: postgres.Sql): Promise<number> {
  const rows = await sql`
    select count(*)::int - 1 as n from pg_partition_tree('log_hot') t join pg_class c on c.oid = t.relid
    where t.isleaf and c.relname like 'log\_hot\_g%'`;
  return rows[0]!.n as number;
}

/**
 * Waits until the sealer has dropped the partitions it emptied (its next pass retries a drop whose
 * lock was busy): performance.now() then, or undefined when they are still there after two ticks.
 */
export async function waitForHotDropped(sql: postgres.Sql, sealIntervalMs: number): Promise<number | undefined> {
  return waitFor("the sealed hot partitions to be dropped", () => hotSealedPartitions(sql), {
    timeoutMs: 2 * sealIntervalMs + 60_000,
    intervalMs: 500,
    until: (n) => n === 0,
  }).then(
    () => performance.now(),
    () => undefined,
  );
}

export async function databaseSize(sql: postgres.Sql): Promise<number> {
  return Number((await sql`select pg_database_size(current_database())::bigint as b`)[0]!.b);
}

export async function walPosition(sql: postgres.Sql): Promise<string> {
  return (await sql`select pg_current_wal_lsn()::text as l`)[0]!.l as string;
}

export async function walBytesSince(sql: postgres.Sql, from: string): Promise<number> {
  return Number((await sql`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from}::pg_lsn)::bigint as b`)[0]!.b);
}

/** Full-page images written since the server's statistics were reset (pg_stat_wal). */
export async function walFullPages(sql: postgres.Sql): Promise<number> {
  return Number((await sql`select wal_fpi::bigint as n from pg_stat_wal`)[0]!.n);
}

/**
 * What the WAL since `from` is made of, by record type (pg_walinspect's pg_get_wal_stats: records,
 * their bytes, the full-page images' bytes), the largest first; null when the extension cannot be
 * created or the segments are already recycled (a long run past max_wal_size).
 */
export async function walBreakdown(sql: postgres.Sql, from: string, top = 8): Promise<string | null> {
  try {
    await sql`create extension if not exists pg_walinspect`;
    const rows = await sql<{ kind: string; n: string; records: string; fpi: string }[]>`
      select "resource_manager/record_type" as kind, count::text as n, record_size::text as records, fpi_size::text as fpi
      from pg_get_wal_stats(${from}::pg_lsn, pg_current_wal_lsn(), true) order by combined_size desc limit ${top}`;
    return rows
      .map(
        (row) =>
          `${row.kind} ${Number(row.n).toLocaleString("en-US")} records, ${Math.round(Number(row.records) / 1048576)} MiB + full pages ${Math.round(Number(row.fpi) / 1048576)} MiB`,
      )
      .join("; ");
  } catch (error) {
    return null;
  }
}

export interface TierSize {
  /** pg_table_size without TOAST: main fork, free space map, visibility map. */
  heap: number;
  /** The TOAST table and its index. */
  toast: number;
  indexes: number;
  partitions: number;
}

/** One table's leaf partitions (log_hot, the chunk journal or log_blocks). */
/** A table's size: a partitioned one's leaves, or a plain table itself (pg_partition_tree lists none for it). */
export async function tierSize(sql: postgres.Sql, tier: "log_hot" | "log_chunks" | "log_blocks" | "log_filters" | "log_key_orders"): Promise<TierSize> {
  const [row] = await sql`
    select coalesce(sum(pg_table_size(c.oid) - coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)), 0)::bigint as heap,
      coalesce(sum(coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)), 0)::bigint as toast,
      coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint as indexes, count(*)::int as partitions
    from pg_class c where c.oid in (select t.relid from pg_partition_tree(${tier}::regclass) t where t.isleaf)
      or c.oid = ${tier}::regclass and c.relkind = 'r'`;
  return { heap: Number(row!.heap), toast: Number(row!.toast), indexes: Number(row!.indexes), partitions: row!.partitions as number };
}

export const tierTotal = (t: TierSize) => t.heap + t.toast + t.indexes;

/** Two tables' sizes as one (the hot tier: log_hot and log_chunks). */
export const sumSizes = (a: TierSize, b: TierSize): TierSize => ({
  heap: a.heap + b.heap,
  toast: a.toast + b.toast,
  indexes: a.indexes + b.indexes,
  partitions: a.partitions + b.partitions,
});

/** The blocks' columns as stored (pg_column_size: compressed, without reading TOAST) and their number; `body` is a v4 block's payload (its ids and dts inside). */
export async function blockColumns(sql: postgres.Sql, sources: Source[]): Promise<{ blocks: number; body: number; ids: number; dts: number }> {
  const [row] = await sql`
    select count(*)::bigint as blocks, coalesce(sum(coalesce(pg_column_size(body), pg_column_size(payload))), 0)::bigint as body,
      coalesce(sum(pg_column_size(ids)), 0)::bigint as ids, coalesce(sum(pg_column_size(dts)), 0)::bigint as dts
    from log_blocks where source_id = any(${sources.map((s) => s.id)}::bigint[])`;
  return { blocks: Number(row!.blocks), body: Number(row!.body), ids: Number(row!.ids), dts: Number(row!.dts) };
}
