-- Each chunk's events per (minute since the epoch, level), as log_blocks' hist_* (0005), written by
-- the flush (src/store/chunks.ts): the level histogram counts a chunk that lies inside its window
-- from them, without opening it (src/query/histogram.ts). Null in chunks written before this
-- migration: those are opened, as before.
ALTER TABLE "log_chunks" ADD COLUMN IF NOT EXISTS "hist_minutes" bigint[];--> statement-breakpoint
ALTER TABLE "log_chunks" ADD COLUMN IF NOT EXISTS "hist_levels" text[];--> statement-breakpoint
ALTER TABLE "log_chunks" ADD COLUMN IF NOT EXISTS "hist_counts" integer[];
