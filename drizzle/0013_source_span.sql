-- Blocks found by their source and time range (generated from src/store/schema.ts, comments added by
-- hand like 0010's): context (src/query/context.ts) asks for the few blocks of one source that meet a
-- stretch of seconds. The (source_id, max_dt) B-tree answers that only by reading every block of the
-- day that ends after the stretch starts (about 20,000 for a source of 18 M events a day); a GiST on
-- the range answers it directly. btree_gist lets a GiST index hold source_id beside the range; like
-- pgcrypto (0010) it ships with PostgreSQL's contrib modules and is trusted (a database owner may
-- create it).
CREATE EXTENSION IF NOT EXISTS btree_gist;--> statement-breakpoint
CREATE INDEX "log_blocks_source_span_idx" ON "log_blocks" USING gist ("source_id",tstzrange("min_dt", "max_dt", '[]'));
