-- The live definitions of logpond's SQL view and functions over both tiers, applied with CREATE OR
-- REPLACE after the migrations at every start (store/db.ts runMigrations), so each has one home:
-- the migrations (drizzle/) keep their history, this file what runs now. Signatures and result
-- columns stay as the migrations created them (CREATE OR REPLACE cannot change them).
-- Every read of log_blocks takes only visible blocks (`generation IS NULL`): a staged block (the
-- sealer's memory path, drizzle/0011) holds events that are still hot (docs/storage.md).

-- A block's events (id, dt, line), from its payload or its v3 columns, decoded once per block: the
-- payload is opened by a function in FROM, whose one value the unnest reads (not in each
-- expression that names it; a subquery behind OFFSET 0 would do too, but a query holding one is
-- never run in parallel workers).
-- One unnest over both kinds' arrays (the other kind's are null: pgp_sym_decrypt and
-- string_to_array are strict), not a UNION of two: the callers inline it once per scan of
-- log_blocks, and each branch made their plans longer to build. STABLE, one SELECT: inlined.
CREATE OR REPLACE FUNCTION "logpond_block_events"(min_id bigint, min_dt timestamptz, ids bigint[], dts timestamptz[], body text, payload bytea)
RETURNS TABLE ("id" bigint, "dt" timestamptz, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT coalesce(u."id", min_id + u."id_offset"), coalesce(u."dt", min_dt + u."dt_offset" * interval '1 microsecond'), u."line"
	FROM string_to_array(pgp_sym_decrypt(payload, 'logpond'), E'\n') AS p("a")
	CROSS JOIN LATERAL unnest(ids, dts, p."a"[1]::bigint[], p."a"[2]::bigint[], coalesce(string_to_array(body, E'\n'), p."a"[3:]))
		AS u("id", "dt", "id_offset", "dt_offset", "line")
$$;
CREATE OR REPLACE VIEW "log_events" AS
	SELECT "id", "source_id", "dt", "raw" FROM "log_hot"
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."generation" IS NULL;

-- A block is opened when its time range is inside the window, or a v3 block's dts has an event in
-- it, or a v4 block's minutes (its histogram: its exact times are in the payload) meet the
-- window's; each event's dt is compared after.
CREATE OR REPLACE FUNCTION "logpond_events_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "log_hot" h
	WHERE h."source_id" = ANY(source_ids) AND h."dt" >= from_dt AND h."dt" <= to_dt
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb, e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."generation" IS NULL AND b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
			OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
		AND e."dt" >= from_dt AND e."dt" <= to_dt
$$;
CREATE OR REPLACE FUNCTION "log_events_by_id"(first_id bigint, last_id bigint)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw" FROM "log_hot" h
	WHERE h."id" >= first_id AND h."id" <= last_id
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."generation" IS NULL AND int8range(b."min_id", b."max_id", '[]') && int8range(first_id, last_id, '[]') AND e."id" >= first_id AND e."id" <= last_id
$$;
-- As drizzle/0007's, with the blocks' text from logpond_block_events: a v4 block's text is checked
-- against the needles after it is opened (its lines, not a `body`), so a block is opened only when
-- its filter passes, and a line is parsed only when it matches every needle.
CREATE OR REPLACE FUNCTION "logpond_events_matching"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, grams bigint[], nums bigint[], ilikes text[], likes text[])
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "log_hot" h
	WHERE h."source_id" = ANY(source_ids) AND h."dt" >= from_dt AND h."dt" <= to_dt
	UNION ALL
	-- Blocks of a filter group. The candidates (group, slot) first, behind OFFSET 0 so they are
	-- computed once per group (one substring per item) and never per block.
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
	CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."generation" IS NULL AND b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
			OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
		AND CASE WHEN c."slot" IS NOT NULL THEN b."body" IS NULL OR b."body" LIKE ALL (likes) AND b."body" ILIKE ALL (ilikes) END
		AND e."dt" >= from_dt AND e."dt" <= to_dt
	UNION ALL
	-- Blocks with a filter of their own (sealed before 0007) or none (nothing to index).
	SELECT e."id", b."source_id", e."dt",
		CASE WHEN e."line" LIKE ALL (likes) AND e."line" ILIKE ALL (ilikes) THEN e."line"::jsonb END,
		e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."generation" IS NULL AND b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."filter_id" IS NULL
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
			OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
		-- CASE fixes the order: the filter (a few bytes) before the text (the whole block).
		AND CASE WHEN b."bloom" IS NULL OR NOT EXISTS (
				SELECT 1 FROM unnest(grams) g, LATERAL (SELECT g % (octet_length(b."bloom")::bigint * 8) AS bit) p
				WHERE get_bit(substring(b."bloom" FROM (p.bit / 8)::int + 1 FOR 1), (p.bit % 8)::int) = 0)
			THEN b."body" IS NULL OR b."body" LIKE ALL (likes) AND b."body" ILIKE ALL (ilikes)
			ELSE false END
		AND e."dt" >= from_dt AND e."dt" <= to_dt
$$;

-- For SQL users: the same as log_events' columns.
CREATE OR REPLACE FUNCTION "log_events_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT "id", "source_id", "dt", "raw" FROM "logpond_events_between"(source_ids, from_dt, to_dt)
$$;
