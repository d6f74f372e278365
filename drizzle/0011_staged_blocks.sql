-- Storage v4, step 2 (hand-written): the sealer's memory path (src/store/staging.ts) INSERTs blocks
-- while their events are still hot, tagged with their hot generation (the first id of its
-- log_hot_g<N> partition): `generation` set = staged, invisible to every reader; the generation's
-- seal sets it to NULL in the transaction that TRUNCATEs the partition. NULL for every block sealed
-- before. The view and functions that read log_blocks live in src/store/sql/functions.sql.
ALTER TABLE "log_blocks" ADD COLUMN "generation" bigint;--> statement-breakpoint
CREATE INDEX "log_blocks_generation_idx" ON "log_blocks" ("generation") WHERE "generation" IS NOT NULL;--> statement-breakpoint
-- The seal's check: which batches committed into a generation's id range.
CREATE INDEX "flush_batches_first_id_idx" ON "flush_batches" ("first_id") WHERE "seq" IS NOT NULL;
