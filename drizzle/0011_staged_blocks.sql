-- Staged blocks (generated from src/store/schema.ts, comments added by hand like 0010's). The
-- sealer may build a block from what the flusher holds while its events are still hot rows of
-- log_hot_g<N>: such a block is INSERTed with `generation` = N (that partition's first id) and no
-- reader sees it (every reader of log_blocks asks `generation IS NULL`: src/store/sql/), until the
-- seal of generation N sets it to null and TRUNCATEs log_hot_g<N> in one transaction — a reader
-- that saw both the rows and the block would return those events twice. Null: visible (every block
-- sealed before this migration, and every block once its generation is sealed). Adding a column
-- without a default rewrites nothing.
ALTER TABLE "log_blocks" ADD COLUMN "generation" bigint;--> statement-breakpoint
-- The seal finds a generation's staged blocks; partial: the visible ones (nearly all) are not in it.
CREATE INDEX "log_blocks_generation_idx" ON "log_blocks" USING btree ("generation") WHERE "log_blocks"."generation" is not null;--> statement-breakpoint
-- The seal asks which committed batches hold a generation's ids (`seq is not null and first_id in
-- its range`); dead letters' rows (seq null) are never asked for.
CREATE INDEX "flush_batches_first_id_idx" ON "flush_batches" USING btree ("first_id") WHERE "flush_batches"."seq" is not null;--> statement-breakpoint
-- The files of src/store/sql/ (the view log_events and the functions reading the tiers) as last
-- applied, by SHA-256: src/store/db.ts applies them after the migrations at every start, and
-- replaces a definition only when its file changed (CREATE OR REPLACE VIEW takes an exclusive lock
-- that would wait behind every long reader of log_events).
CREATE TABLE "logpond_sql" (
	"name" text PRIMARY KEY NOT NULL,
	"digest" text NOT NULL
);
