// The drizzle schema: the only description of the tables. Migrations under drizzle/ are generated
// from it (`npm run db:generate`) and applied at start. `log_events` (a view over log_hot and
// log_blocks, drizzle/0005) is part of the public contract: id, source_id, dt and raw keep their
// names and types.
import { sql } from "drizzle-orm";
import { bigint, boolean, customType, index, integer, jsonb, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

const bytea = customType<{ data: Uint8Array }>({ dataType: () => "bytea" });

export const sources = pgTable("sources", {
  id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  name: text("name").notNull(),
  platform: text("platform").notNull(),
  tableName: text("table_name").notNull().unique(),
  token: text("token").notNull().unique(),
  ingestingPaused: boolean("ingesting_paused").notNull().default(false),
  logsRetention: integer("logs_retention").notNull().default(30),
  liveTailPattern: text("live_tail_pattern").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  updatedAt: timestamp("updated_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
});

/**
 * The hot tier: one row per event, as COPY writes it (drizzle/0005_sealed_blocks.sql). In
 * PostgreSQL it is PARTITION BY RANGE (id) in generations (log_hot_g<first id>) and a DEFAULT
 * partition; store/sealer.ts closes a generation, moves its rows into log_blocks and drops it.
 * drizzle-kit cannot express that, so this is the parent's shape only. `id` comes from blocks the
 * flusher reserves (logpond_counters 'event_id'); no unique index (unique by construction).
 * Users read `log_events`, a view over both tiers, never this table.
 */
export const logHot = pgTable(
  "log_hot",
  {
    id: bigint("id", { mode: "number" }).notNull(),
    sourceId: bigint("source_id", { mode: "number" }).notNull(),
    dt: timestamp("dt", { withTimezone: true, precision: 6 }).notNull(),
    raw: jsonb("raw").notNull(),
  },
  // BRIN only (bench/storage.ts, docs/storage.md): a btree on (source_id, dt) cost 35% of
  // COPY speed; BRIN on dt and on id cost ~5% together, since rows arrive in dt and id order.
  (table) => [index("log_hot_dt_brin").using("brin", table.dt), index("log_hot_id_brin").using("brin", table.id)],
);

/**
 * The hot tier's journal since drizzle/0015 (HOT_TIER=chunks): a committed batch's events of one
 * source, up to CHUNK_EVENTS of them, in one row written by the flush (store/chunks.ts), instead of
 * one `log_hot` row each. `payload` is a block's payload (codec/pgp.ts: ids and times as offsets from
 * first_id and min_dt, then the JSON lines as they were sent), so logpond_block_events reads it in
 * SQL. Partitioned like log_hot, generation by generation (log_chunks_g<first id> beside
 * log_hot_g<first id>, and a DEFAULT partition); the sealer makes a closed generation's chunks into
 * blocks and drops them with it. Users read `log_events`, never this table.
 */
export const logChunks = pgTable(
  "log_chunks",
  {
    firstId: bigint("first_id", { mode: "number" }).notNull(),
    lastId: bigint("last_id", { mode: "number" }).notNull(),
    sourceId: bigint("source_id", { mode: "number" }).notNull(),
    minDt: timestamp("min_dt", { withTimezone: true, precision: 6 }).notNull(),
    maxDt: timestamp("max_dt", { withTimezone: true, precision: 6 }).notNull(),
    n: integer("n").notNull(),
    payload: bytea("payload").notNull(),
    /** Events per (minute since the epoch, level), as log_blocks' (drizzle/0016); null in chunks written before it. */
    histMinutes: bigint("hist_minutes", { mode: "number" }).array(),
    histLevels: text("hist_levels").array(),
    histCounts: integer("hist_counts").array(),
  },
  (table) => [
    index("log_chunks_source_dt").on(table.sourceId, table.maxDt),
    index("log_chunks_id_brin").using("brin", table.firstId),
    // A range of ids (the tail's batches, the context's anchor): the chunks that end at or after its start.
    index("log_chunks_last_id").on(table.lastId),
  ],
);

/**
 * The sealed tier: up to BLOCK_EVENTS events of one source and one UTC day, time-ordered across
 * blocks, in one row (store/blocks.ts): their ids, times and JSON texts in `payload`, or, sealed
 * before drizzle/0010, in `ids`, `dts` and `body`. PARTITION BY RANGE (max_dt), daily
 * (store/partitions.ts).
 */
export const logBlocks = pgTable(
  "log_blocks",
  {
    sourceId: bigint("source_id", { mode: "number" }).notNull(),
    minDt: timestamp("min_dt", { withTimezone: true, precision: 6 }).notNull(),
    maxDt: timestamp("max_dt", { withTimezone: true, precision: 6 }).notNull(),
    minId: bigint("min_id", { mode: "number" }).notNull(),
    maxId: bigint("max_id", { mode: "number" }).notNull(),
    n: integer("n").notNull(),
    /** Blocks sealed before drizzle/0010 (storage v3): line i's id and dt, and the lines (TOAST-compressed by PostgreSQL); null since. */
    ids: bigint("ids", { mode: "number" }).array(),
    dts: timestamp("dts", { withTimezone: true, precision: 6 }).array(),
    body: text("body"),
    /** Since drizzle/0010: ids, times and lines deflated by logpond, framed for pgcrypto (codec/pgp.ts); STORAGE EXTERNAL. */
    payload: bytea("payload"),
    /** Blocks sealed before drizzle/0007: a Bloom filter of the lines' grams (codec/grams.ts); null: none. */
    bloom: bytea("bloom"),
    /** The log_filters row holding this block's filter, and its slot there; null: see `bloom` (store/blocks.ts). */
    filterId: bigint("filter_id", { mode: "number" }),
    filterSlot: integer("filter_slot"),
    /** Events per (minute since the epoch, level), for the histogram without opening the block. */
    histMinutes: bigint("hist_minutes", { mode: "number" }).array().notNull(),
    histLevels: text("hist_levels").array().notNull(),
    histCounts: integer("hist_counts").array().notNull(),
    /**
     * Null: visible. Else a staged block (drizzle/0011): built while its events are still hot rows
     * of log_hot_g<generation>, and read by nobody until the seal of that generation sets this to
     * null and empties that partition in one transaction (a reader of both would see them twice).
     */
    generation: bigint("generation", { mode: "number" }),
    /**
     * Since drizzle/0012: the counts of the block's few-valued fields' values (store/summary.ts), so
     * an aggregation counts a field without opening the block; null: sealed before, always opened.
     */
    fields: jsonb("fields"),
  },
  (table) => [
    index("log_blocks_source_id_max_dt_idx").on(table.sourceId, table.maxDt),
    // Context finds the few blocks of a source that meet a stretch of time (query/context.ts),
    // however many blocks its day holds: btree_gist gives GiST the source_id (drizzle/0013).
    index("log_blocks_source_span_idx").using("gist", table.sourceId, sql`tstzrange(${table.minDt}, ${table.maxDt}, '[]')`),
    // The live tail's resume reads blocks by id range (log_events_by_id).
    index("log_blocks_ids_idx").using("gist", sql`int8range(${table.minId}, ${table.maxId}, '[]')`),
    index("log_blocks_filter_idx").on(table.filterId, table.filterSlot),
    // The seal of a generation finds its staged blocks (few: only the ones not yet made visible).
    index("log_blocks_generation_idx").on(table.generation).where(sql`${table.generation} is not null`),
    // Whether a window has v3 blocks (no payload) at all: a read with the scan threads skips
    // PostgreSQL's filter probes when it has none (logpond_events_matching_in, drizzle/0017).
    index("log_blocks_v3_idx").on(table.sourceId, table.maxDt).where(sql`${table.payload} is null`),
  ],
);

/**
 * The search index: the Bloom filters of consecutive blocks of one source and day, bit-sliced
 * (bit p × blocks + k of `slices` is position p of slot k's filter; codec/grams.ts), stored
 * uncompressed out of line so a search reads a few bytes per item and group (drizzle/0007).
 * A row goes once none of its blocks is left (retention/sweep.ts).
 */
export const logFilters = pgTable(
  "log_filters",
  {
    id: bigint("id", { mode: "number" }).primaryKey(),
    sourceId: bigint("source_id", { mode: "number" }).notNull(),
    minDt: timestamp("min_dt", { withTimezone: true, precision: 6 }).notNull(),
    maxDt: timestamp("max_dt", { withTimezone: true, precision: 6 }).notNull(),
    blocks: integer("blocks").notNull(),
    bits: integer("bits").notNull(),
    slices: bytea("slices").notNull(),
  },
  (table) => [index("log_filters_source_id_max_dt_idx").on(table.sourceId, table.maxDt)],
);

/**
 * Tokens made through /api/v1/tokens (tokens/service.ts). Only the SHA-256 digest of each secret
 * is kept: the secret is shown once, in the answer that creates it. `source_ids` null means every
 * source; `scope` is `read` (the only scope so far).
 */
export const apiTokens = pgTable("api_tokens", {
  id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  name: text("name").notNull(),
  scope: text("scope").notNull(),
  sourceIds: bigint("source_ids", { mode: "number" }).array(),
  digest: bytea("digest").notNull().unique(),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  lastUsedAt: timestamp("last_used_at", { withTimezone: true, precision: 3 }),
});

/**
 * Saved views of the page (/api/v2/views, src/views/): sources, query, range and columns under a
 * name. The range is kept as written: `now-24h`/`now` or RFC 3339 instants; `range_to` null is a
 * live view. Deleting a source leaves its id in the views that name it (the page skips it).
 */
export const savedViews = pgTable("saved_views", {
  id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  name: text("name").notNull(),
  sourceIds: bigint("source_ids", { mode: "number" }).array().notNull(),
  query: text("query").notNull().default(""),
  rangeFrom: text("range_from").notNull(),
  rangeTo: text("range_to"),
  columns: text("columns").array().notNull().default(sql`'{}'::text[]`),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  updatedAt: timestamp("updated_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
});

/**
 * The SQL files of store/sql/ (the view log_events and the functions that read the tiers) as last
 * applied: name and SHA-256 of the text. store/db.ts applies a file at start only when its digest
 * differs, so a start does not take the view's exclusive lock while readers hold it.
 */
export const logpondSql = pgTable("logpond_sql", {
  name: text("name").primaryKey(),
  digest: text("digest").notNull(),
});

/**
 * Counters updated in place: 'event_id' (next free event id; a batch reserves a block with one
 * update) and 'commit_seq' (taken inside each batch transaction just before COMMIT, so its row
 * lock orders commits: a batch that commits later has a larger seq).
 */
export const logpondCounters = pgTable("logpond_counters", {
  name: text("name").primaryKey(),
  value: bigint("value", { mode: "number" }).notNull(),
});

/** Deleted sources (tombstones): their events and dead letters are removed by every retention sweep for a grace period (late arrivals), retention/sweep.ts. */
export const sourceDeletions = pgTable("source_deletions", {
  sourceId: bigint("source_id", { mode: "number" }).primaryKey(),
  deletedAt: timestamp("deleted_at", { withTimezone: true, precision: 3 }).notNull().default(sql`now()`),
});

/**
 * One row per committed flush, written in the flush's own transaction: when a COMMIT's answer is
 * lost, the batch id says whether it happened, so a retry never stores a batch twice.
 */
export const flushBatches = pgTable(
  "flush_batches",
  {
    id: uuid("id").primaryKey(),
    /** Commit order of batches that stored log_events rows (null for dead letters). */
    seq: bigint("seq", { mode: "number" }),
    firstId: bigint("first_id", { mode: "number" }),
    lastId: bigint("last_id", { mode: "number" }),
    committedAt: timestamp("committed_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
  },
  (table) => [
    // The live tail and retention ask "batches committed after seq N" (a day of batches is ~1M rows).
    index("flush_batches_seq_idx").on(table.seq),
    // The seal of a generation asks which committed batches hold its ids (first_id in its range).
    index("flush_batches_first_id_idx").on(table.firstId).where(sql`${table.seq} is not null`),
  ],
);

/**
 * The order each stored event's keys were sent in (store/key-orders.ts, codec/key-order.ts): one row
 * per committed write of events with any object not in jsonb's order, covering ids first_id..last_id;
 * `orders` the distinct key orders, `slots` one entry per id (0: none, else 1 + its place in
 * orders). Read only to show events; every tier keeps jsonb's text (drizzle/0014).
 */
export const logKeyOrders = pgTable("log_key_orders", {
  firstId: bigint("first_id", { mode: "number" }).primaryKey(),
  lastId: bigint("last_id", { mode: "number" }).notNull(),
  orders: jsonb("orders").notNull(),
  slots: bytea("slots").notNull(),
  committedAt: timestamp("committed_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
});

/**
 * Events PostgreSQL refused for their data (SQLSTATE classes 22, 23, 54), isolated from their
 * batch so the rest was stored. `raw` is the event's JSON text as logpond tried to store it.
 */
export const deadLetters = pgTable("dead_letters", {
  id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  sourceId: bigint("source_id", { mode: "number" }).notNull(),
  dt: text("dt").notNull(),
  raw: text("raw").notNull(),
  sqlstate: text("sqlstate").notNull(),
  error: text("error").notNull(),
  failedAt: timestamp("failed_at", { withTimezone: true, precision: 3 }).notNull().defaultNow(),
});
