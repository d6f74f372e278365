-- Search index, bit-sliced (hand-written: drizzle-kit cannot express functions). A Bloom filter
-- per block is read block by block — one TOAST chunk per gram per block, ~600 ms for a needle over
-- 21,000 blocks (20 M events) before a single line is read. So the filters of consecutive blocks of one source and day go into one log_filters row,
-- bit-sliced (codec/grams.ts: bit p × blocks + k is position p of slot k's filter), so a search
-- reads per group and per item the few bytes of one position and learns which of the group's
-- blocks may match. Number items (JSON numbers, canonical; strings that are canonical numbers) sit
-- beside the grams, NUMBER_PROBES positions each, so `field=123457` skips blocks although a
-- 6-digit number is only one gram. Blocks sealed before this migration keep their own `bloom`
-- (grams only) and are searched by it.
CREATE TABLE "log_filters" (
	"id" bigint PRIMARY KEY NOT NULL,
	"source_id" bigint NOT NULL,
	"min_dt" timestamp (6) with time zone NOT NULL,
	"max_dt" timestamp (6) with time zone NOT NULL,
	"blocks" integer NOT NULL,
	"bits" integer NOT NULL,
	"slices" bytea NOT NULL
);
--> statement-breakpoint
-- Random bits do not compress: stored out of line as they are, so a substring fetches one chunk.
ALTER TABLE "log_filters" ALTER COLUMN "slices" SET STORAGE EXTERNAL;--> statement-breakpoint
CREATE INDEX "log_filters_source_id_max_dt_idx" ON "log_filters" USING btree ("source_id", "max_dt");--> statement-breakpoint
ALTER TABLE "log_blocks" ADD COLUMN "filter_id" bigint;--> statement-breakpoint
ALTER TABLE "log_blocks" ADD COLUMN "filter_slot" integer;--> statement-breakpoint
CREATE INDEX "log_blocks_filter_idx" ON "log_blocks" USING btree ("filter_id", "filter_slot");--> statement-breakpoint
DROP FUNCTION "logpond_events_matching"(bigint[], timestamptz, timestamptz, bigint[], text[], text[]);--> statement-breakpoint
-- logpond_events_between for a query: a sealed block is opened only when its filter holds every
-- item hash in `grams` (its grams) and `nums` (its numbers; legacy per-block filters hold grams
-- only) and its text matches every needle pattern; a line is parsed (raw) only when it matches
-- them too, else raw is null. All are necessary conditions of the query's top-level AND
-- (query/prefilter.ts), whose conjuncts are false or null on a null raw, so the caller's condition
-- on raw still decides exactly.
CREATE FUNCTION "logpond_events_matching"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, grams bigint[], nums bigint[], ilikes text[], likes text[])
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "log_hot" h
	WHERE h."source_id" = ANY(source_ids) AND h."dt" >= from_dt AND h."dt" <= to_dt
	UNION ALL
	-- Blocks of a filter group. The candidates (group, slot) first, behind OFFSET 0 so they are
	-- computed once per group (one substring per item) and never per block; the text is checked
	-- only after the join (it names c), never on every block of the window.
	SELECT e."id", b."source_id", e."dt",
		CASE WHEN e."line" LIKE ALL (likes) AND e."line" ILIKE ALL (ilikes) THEN e."line"::jsonb END,
		e."line"
	FROM (
		SELECT f."id", k."slot"
		FROM "log_filters" f
		CROSS JOIN LATERAL (
			SELECT array_agg(substring(f."slices" FROM (q."at" / 8 + 1)::int FOR ((q."at" + f."blocks" - 1) / 8 - q."at" / 8 + 1)::int)) AS "bytes",
				array_agg((q."at" % 8)::int) AS "offs"
			FROM (SELECT (g % f."bits") * f."blocks" AS "at" FROM unnest(grams || nums) g) q
		) p
		CROSS JOIN LATERAL generate_series(0, f."blocks" - 1) k("slot")
		WHERE f."source_id" = ANY(source_ids) AND f."max_dt" >= from_dt AND f."min_dt" <= to_dt
			AND NOT EXISTS (SELECT 1 FROM unnest(p."bytes", p."offs") x("bytes", "off") WHERE get_bit(x."bytes", x."off" + k."slot") = 0)
		OFFSET 0
	) c
	JOIN "log_blocks" b ON b."filter_id" = c."id" AND b."filter_slot" = c."slot"
	CROSS JOIN LATERAL unnest(b."ids", b."dts", string_to_array(b."body", E'\n')) AS e("id", "dt", "line")
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt))
		AND CASE WHEN c."slot" IS NOT NULL THEN b."body" LIKE ALL (likes) AND b."body" ILIKE ALL (ilikes) END
		AND e."dt" >= from_dt AND e."dt" <= to_dt
	UNION ALL
	-- Blocks with a filter of their own (sealed before 0007) or none (nothing to index): as before.
	SELECT e."id", b."source_id", e."dt",
		CASE WHEN e."line" LIKE ALL (likes) AND e."line" ILIKE ALL (ilikes) THEN e."line"::jsonb END,
		e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL unnest(b."ids", b."dts", string_to_array(b."body", E'\n')) AS e("id", "dt", "line")
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."filter_id" IS NULL
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt))
		-- CASE fixes the order: the filter (a few bytes) before the text (the whole block).
		AND CASE WHEN b."bloom" IS NULL OR NOT EXISTS (
				SELECT 1 FROM unnest(grams) g, LATERAL (SELECT g % (octet_length(b."bloom")::bigint * 8) AS bit) p
				WHERE get_bit(substring(b."bloom" FROM (p.bit / 8)::int + 1 FOR 1), (p.bit % 8)::int) = 0)
			THEN b."body" LIKE ALL (likes) AND b."body" ILIKE ALL (ilikes)
			ELSE false END
		AND e."dt" >= from_dt AND e."dt" <= to_dt
$$;
