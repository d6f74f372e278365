-- The chunk journal (generated from src/store/schema.ts, partitioning and comments added by hand like
-- 0005's): with HOT_TIER=chunks the flush writes a committed batch's events as one row per source
-- and CHUNK_EVENTS (src/store/chunks.ts), their payload framed as a block's (src/codec/pgp.ts), not a
-- jsonb row each in log_hot. Partitioned by first_id in the same generations as log_hot: every
-- log_hot_g<N> has its log_chunks_g<N>, made and dropped together by src/store/sealer.ts.
-- Idempotent (IF NOT EXISTS): its journal entry first had a time before 0014's, so a database
-- migrated past 0014 skipped it; one that ran it then runs it again under the corrected time.
CREATE TABLE IF NOT EXISTS "log_chunks" (
	"first_id" bigint NOT NULL,
	"last_id" bigint NOT NULL,
	"source_id" bigint NOT NULL,
	"min_dt" timestamp (6) with time zone NOT NULL,
	"max_dt" timestamp (6) with time zone NOT NULL,
	"n" integer NOT NULL,
	"payload" "bytea" NOT NULL
) PARTITION BY RANGE ("first_id");
--> statement-breakpoint
-- Compressed by logpond: pglz would only spend the backend's time on it.
ALTER TABLE "log_chunks" ALTER COLUMN "payload" SET STORAGE EXTERNAL;--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "log_chunks_default" PARTITION OF "log_chunks" DEFAULT;--> statement-breakpoint
DO $$
DECLARE
	g record;
BEGIN
	FOR g IN SELECT substring(c.relname FROM '^log_hot_g([0-9]+)$')::bigint AS start
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'log_hot'::regclass AND c.relname ~ '^log_hot_g[0-9]+$'
	LOOP
		EXECUTE format('CREATE TABLE IF NOT EXISTS "log_chunks_g%s" PARTITION OF "log_chunks" FOR VALUES FROM (%s) TO (%s)', g.start, g.start, g.start + 268435456);
	END LOOP;
END $$;--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "log_chunks_source_dt" ON "log_chunks" USING btree ("source_id","max_dt");--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "log_chunks_id_brin" ON "log_chunks" USING brin ("first_id");
