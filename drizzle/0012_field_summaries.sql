-- Field summaries (generated from src/store/schema.ts, comments added by hand like 0010's): each
-- block built from now on carries the counts of its few-valued fields' values (src/store/summary.ts),
-- so the query API's aggregation counts a field over whole blocks without opening them
-- (src/query/aggregate.ts). Null: a block sealed before, opened as before. Adding a column without
-- a default rewrites nothing; merges (src/store/merge.ts) give old blocks a summary as they rewrite them.
ALTER TABLE "log_blocks" ADD COLUMN "fields" jsonb;--> statement-breakpoint
-- A few hundred bytes per block, stored as they are: no pglz on any column of a block (0010).
ALTER TABLE "log_blocks" ALTER COLUMN "fields" SET STORAGE EXTERNAL;
