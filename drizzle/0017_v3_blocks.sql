-- The blocks sealed before storage v4 (no payload: a v3 block's lines are in `body`), by source and
-- time: a read with the scan threads asks whether its window has any (an index with no entries when
-- there are none), and skips PostgreSQL's filter probes for the v4 blocks the threads read
-- (logpond_events_matching_in, src/store/sql/functions.sql; src/query/read.ts, histogram.ts).
CREATE INDEX IF NOT EXISTS "log_blocks_v3_idx" ON "log_blocks" USING btree ("source_id","max_dt") WHERE "log_blocks"."payload" is null;
