-- Storage v3 (hand-written: drizzle-kit cannot express partitioning, views or functions; the
-- snapshot next to it describes log_hot and log_blocks as src/store/schema.ts does).
-- Two tiers (docs/storage.md): COPY writes log_hot, partitioned by RANGE (id) in generations that
-- the sealer closes, seals into log_blocks and drops (src/store/sealer.ts); log_blocks holds
-- compressed, time-ordered blocks of one source, partitioned by day of max_dt. log_events becomes
-- a view over both tiers, so SQL keeps reading every event; log_events_between() skips blocks.
-- Upgrade in place: the dt-partitioned log_events of storage v2 becomes log_hot's first
-- generation (ids below the counter) with every row and partition it has; the sealer seals it.
ALTER TABLE "log_events" RENAME TO "log_hot_legacy";--> statement-breakpoint
ALTER INDEX "log_events_dt_brin" RENAME TO "log_hot_legacy_dt_brin";--> statement-breakpoint
ALTER INDEX "log_events_id_brin" RENAME TO "log_hot_legacy_id_brin";--> statement-breakpoint
CREATE TABLE "log_hot" (
	"id" bigint NOT NULL,
	"source_id" bigint NOT NULL,
	"dt" timestamp (6) with time zone NOT NULL,
	"raw" jsonb NOT NULL
) PARTITION BY RANGE ("id");
--> statement-breakpoint
CREATE INDEX "log_hot_dt_brin" ON "log_hot" USING brin ("dt");--> statement-breakpoint
CREATE INDEX "log_hot_id_brin" ON "log_hot" USING brin ("id");--> statement-breakpoint
DO $$
DECLARE
	next_id bigint := (SELECT "value" FROM "logpond_counters" WHERE "name" = 'event_id');
BEGIN
	-- Validates every legacy id below the counter (one scan of the old table, once).
	EXECUTE format('ALTER TABLE "log_hot" ATTACH PARTITION "log_hot_legacy" FOR VALUES FROM (MINVALUE) TO (%s)', next_id);
	EXECUTE format('CREATE TABLE "log_hot_g%s" PARTITION OF "log_hot" FOR VALUES FROM (%s) TO (%s)', next_id, next_id, next_id + 268435456);
END $$;--> statement-breakpoint
CREATE TABLE "log_hot_default" PARTITION OF "log_hot" DEFAULT;--> statement-breakpoint
CREATE TABLE "log_blocks" (
	"source_id" bigint NOT NULL,
	"min_dt" timestamp (6) with time zone NOT NULL,
	"max_dt" timestamp (6) with time zone NOT NULL,
	"min_id" bigint NOT NULL,
	"max_id" bigint NOT NULL,
	"n" integer NOT NULL,
	"ids" bigint[] NOT NULL,
	"dts" timestamp (6) with time zone[] NOT NULL,
	"body" text NOT NULL,
	"bloom" bytea,
	"hist_minutes" bigint[] NOT NULL,
	"hist_levels" text[] NOT NULL,
	"hist_counts" integer[] NOT NULL
) PARTITION BY RANGE ("max_dt");
--> statement-breakpoint
CREATE INDEX "log_blocks_source_id_max_dt_idx" ON "log_blocks" USING btree ("source_id", "max_dt");--> statement-breakpoint
CREATE INDEX "log_blocks_ids_idx" ON "log_blocks" USING gist (int8range("min_id", "max_id", '[]'));--> statement-breakpoint
CREATE TABLE "log_blocks_default" PARTITION OF "log_blocks" DEFAULT;--> statement-breakpoint
CREATE VIEW "log_events" AS
	SELECT "id", "source_id", "dt", "raw" FROM "log_hot"
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb
	FROM "log_blocks" b CROSS JOIN LATERAL unnest(b."ids", b."dts", string_to_array(b."body", E'\n')) AS e("id", "dt", "line");
--> statement-breakpoint
-- The events of some sources with from_dt <= dt <= to_dt, from both tiers: only blocks whose time
-- range meets the window and that hold an event in it (their dts, read without the body, tell;
-- blocks overlap in time after a backfill sent out of order) are opened, and only their lines in
-- the window are parsed. Besides raw, `line` is the event's JSON text: the query API sorts and
-- limits on (dt, id, line) and parses only the lines of its page (PostgreSQL computes only the
-- columns a caller uses). Inlined by the planner (one SELECT, STABLE), so a caller's WHERE, ORDER
-- BY and LIMIT apply inside it.
CREATE FUNCTION "logpond_events_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "log_hot" h
	WHERE h."source_id" = ANY(source_ids) AND h."dt" >= from_dt AND h."dt" <= to_dt
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb, e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL unnest(b."ids", b."dts", string_to_array(b."body", E'\n')) AS e("id", "dt", "line")
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt))
		AND e."dt" >= from_dt AND e."dt" <= to_dt
$$;--> statement-breakpoint
-- For SQL users: the same as log_events' columns.
CREATE FUNCTION "log_events_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT "id", "source_id", "dt", "raw" FROM "logpond_events_between"(source_ids, from_dt, to_dt)
$$;--> statement-breakpoint
-- The events with first_id <= id <= last_id (a batch's range, for the live tail), from both tiers.
CREATE FUNCTION "log_events_by_id"(first_id bigint, last_id bigint)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw" FROM "log_hot" h
	WHERE h."id" >= first_id AND h."id" <= last_id
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb
	FROM "log_blocks" b CROSS JOIN LATERAL unnest(b."ids", b."dts", string_to_array(b."body", E'\n')) AS e("id", "dt", "line")
	WHERE int8range(b."min_id", b."max_id", '[]') && int8range(first_id, last_id, '[]') AND e."id" >= first_id AND e."id" <= last_id
$$;--> statement-breakpoint
-- logpond_events_between, for a query: a block is opened only when its Bloom filter has every gram
-- in `grams` (store/blocks.ts: bit h mod size) and its text has every needle (lowered, as ILIKE
-- lowers in a C ctype); a line is parsed (raw) only when it has every needle, else raw is null.
-- Both are necessary conditions of the top-level AND of the query (query/prefilter.ts), whose
-- conjuncts are false or null on a null raw, so the caller's condition on raw still decides
-- exactly. The checks are scalar subqueries on purpose: a NOT EXISTS is pulled up into an anti
-- join above the lines, which lowered a block's whole text once per line.
CREATE FUNCTION "logpond_events_matching"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, grams bigint[], needles text[])
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "log_hot" h
	WHERE h."source_id" = ANY(source_ids) AND h."dt" >= from_dt AND h."dt" <= to_dt
	UNION ALL
	SELECT e."id", b."source_id", e."dt",
		CASE WHEN (SELECT count(*) FROM unnest(needles) n WHERE strpos(lower(e."line"), n) = 0) = 0 THEN e."line"::jsonb END,
		e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL unnest(b."ids", b."dts", string_to_array(b."body", E'\n')) AS e("id", "dt", "line")
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt))
		-- CASE fixes the order: the filter (a few bytes) before the text (the whole block, lowered).
		AND CASE WHEN b."bloom" IS NULL OR NOT EXISTS (
				SELECT 1 FROM unnest(grams) g WHERE get_bit(b."bloom", (g % (octet_length(b."bloom")::bigint * 8))::int) = 0)
			THEN (SELECT count(*) FROM unnest(needles) n WHERE strpos(lower(b."body"), n) = 0) = 0
			ELSE false END
		AND e."dt" >= from_dt AND e."dt" <= to_dt
$$;
