-- Each chunk's events per (minute since the epoch, level), as log_blocks' hist_* (0005), written by
-- the flush (src/store/chunks.ts): the level histogram counts a chunk that lies inside its window
-- from them, without opening it (src/query/histogram.ts). Null in chunks written before this
-- migration: those are opened, as before.
ALTER TABLE "log_chunks" ADD COLUMN IF NOT EXISTS "hist_minutes" bigint[];--> statement-breakpoint
ALTER TABLE "log_chunks" ADD COLUMN IF NOT EXISTS "hist_levels" text[];--> statement-breakpoint
ALTER TABLE "log_chunks" ADD COLUMN IF NOT EXISTS "hist_counts" integer[];--> statement-breakpoint
-- And the chunks of a range of ids (logpond_hot_by_id: the tail's batches, the context's anchor):
-- BRIN on first_id bounds them from above only, so every chunk before the range was read.
CREATE INDEX IF NOT EXISTS "log_chunks_last_id" ON "log_chunks" USING btree ("last_id");
