-- The view log_events and the functions that read both tiers: their live definitions, applied
-- with CREATE OR REPLACE by src/store/db.ts after the drizzle migrations at every start (when this
-- file changed since it was last applied: logpond_sql keeps its digest). The migrations under
-- drizzle/ keep the history of how they came to be (0005, 0006, 0007, 0010); a change is made here.
-- CREATE OR REPLACE keeps a function's result columns and a view's columns: a change to those needs
-- a migration that drops the old definition first.
--
-- Staged blocks (drizzle/0011): a block whose `generation` is not null holds events that are still
-- hot rows of log_hot_g<generation>; every reader of log_blocks here asks `generation IS NULL`, so
-- an event is read once, from its row until the seal of its generation, from its block after.

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
-- logpond_block_events of a block whose text holds every needle pattern, else nothing: a search
-- (logpond_events_matching) checks the needles once on the opened payload's whole text before it
-- splits it into lines, so a block its filter let through by chance is not unnested line by line
-- (half its cost: 2.7 of 4.8 ms per realistic 1,000-event block, at 20 M events). Exact: a line
-- that holds a needle is part of the text, and the caller still checks every line. A v3 block
-- (no payload) was checked on its `body` already.
CREATE OR REPLACE FUNCTION "logpond_block_events_holding"(min_id bigint, min_dt timestamptz, ids bigint[], dts timestamptz[], body text, payload bytea, likes text[], ilikes text[])
RETURNS TABLE ("id" bigint, "dt" timestamptz, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT coalesce(u."id", min_id + u."id_offset"), coalesce(u."dt", min_dt + u."dt_offset" * interval '1 microsecond'), u."line"
	FROM pgp_sym_decrypt(payload, 'logpond') AS t("text")
	CROSS JOIN LATERAL string_to_array(t."text", E'\n') AS p("a")
	CROSS JOIN LATERAL unnest(ids, dts, p."a"[1]::bigint[], p."a"[2]::bigint[], coalesce(string_to_array(body, E'\n'), p."a"[3:]))
		AS u("id", "dt", "id_offset", "dt_offset", "line")
	WHERE t."text" IS NULL OR t."text" LIKE ALL (likes) AND t."text" ILIKE ALL (ilikes)
$$;
-- The hot tier's events of some sources with from_dt <= dt <= to_dt: log_hot's rows, and the
-- events of log_chunks' chunks (drizzle/0015, HOT_TIER=chunks) that meet the window, opened like a
-- block's payload; a chunk's lines are the JSON as it was sent, made jsonb here as COPY makes a
-- row's. The readers of the hot tier ask this function, logpond_hot_by_id, logpond_hot_newest or
-- logpond_hot_oldest (or the view log_events), never the tables. logpond_hot_uncounted gives them
-- too, but with `minutes` true it leaves out the chunks that logpond_hot_minutes counts: those that
-- lie inside the window and carry their per-minute counts (drizzle/0016). The level histogram reads
-- both (src/query/histogram.ts), so a hot chunk is counted without being opened, as a block is.
CREATE OR REPLACE FUNCTION "logpond_hot_uncounted"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, minutes boolean)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw" FROM "log_hot" h
	WHERE h."source_id" = ANY(source_ids) AND h."dt" >= from_dt AND h."dt" <= to_dt
	UNION ALL
	SELECT e."id", c."source_id", e."dt", e."line"::jsonb
	FROM "log_chunks" c CROSS JOIN LATERAL "logpond_block_events"(c."first_id", c."min_dt", NULL, NULL, NULL, c."payload") e
	WHERE c."source_id" = ANY(source_ids) AND c."max_dt" >= from_dt AND c."min_dt" <= to_dt AND e."dt" >= from_dt AND e."dt" <= to_dt
		AND NOT (minutes AND c."hist_minutes" IS NOT NULL AND c."min_dt" >= from_dt AND c."max_dt" <= to_dt)
$$;
CREATE OR REPLACE FUNCTION "logpond_hot_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT * FROM "logpond_hot_uncounted"(source_ids, from_dt, to_dt, false)
$$;
-- Events per (minute since the epoch, level) of the chunks logpond_hot_uncounted leaves out with
-- `minutes` true; the level is nullif(lower(left(raw->>'level', 40)), ''), as in log_blocks' counts.
CREATE OR REPLACE FUNCTION "logpond_hot_minutes"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("minute" bigint, "level" text, "n" integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."minute", h."level", h."n"
	FROM "log_chunks" c CROSS JOIN LATERAL unnest(c."hist_minutes", c."hist_levels", c."hist_counts") AS h("minute", "level", "n")
	WHERE c."source_id" = ANY(source_ids) AND c."hist_minutes" IS NOT NULL AND c."min_dt" >= from_dt AND c."max_dt" <= to_dt
$$;
-- A time at or after which at least `events` events of some sources at or before `upper` lie, hot
-- or sealed: the latest min_dt such that the chunks and visible blocks (generation IS NULL)
-- beginning at or after it hold that many (null: none does). The query API's newest page cuts a
-- slice there (src/query/read.ts), so a burst whose events all share the last seconds, hot or
-- sealed within seconds, is not opened whole for a page of 100. Any chunks and blocks that hold
-- that many give a true bound; a seal that moves events meanwhile moves them, not their times.
-- Counted from each chunk's or block's own start, so a sparse source's block that spans minutes
-- does not pull the bound back over the dense ones' (the least min_dt of the newest that held the
-- events did: a `timeout` page opened 30 blocks at 20 M, 219 ms). Only the newest events / 250 + 16
-- of each source and tier are looked at (null when they hold fewer: no bound, a slower read, never
-- a wrong one): a LIMIT of `events` read every block of a day for the 10,000-page step (33 ms of a
-- needle's 160 at 20 M events). Replaces logpond_hot_newest_holding and logpond_blocks_newest_holding.
DROP FUNCTION IF EXISTS "logpond_hot_newest_holding"(bigint[], timestamptz, integer);
DROP FUNCTION IF EXISTS "logpond_blocks_newest_holding"(bigint[], timestamptz, integer);
CREATE OR REPLACE FUNCTION "logpond_newest_holding"(source_ids bigint[], upper timestamptz, events integer)
RETURNS TABLE ("dt" timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT max(q."min_dt")
	FROM (
		SELECT t."min_dt", sum(t."n") OVER (ORDER BY t."min_dt" DESC ROWS UNBOUNDED PRECEDING) AS "through"
		FROM unnest(source_ids) s("id")
		CROSS JOIN LATERAL (
			(SELECT c."min_dt", c."n" FROM "log_chunks" c
			WHERE c."source_id" = s."id" AND c."max_dt" <= upper ORDER BY c."max_dt" DESC LIMIT least(events, events / 250 + 16))
			UNION ALL
			(SELECT b."min_dt", b."n" FROM "log_blocks" b
			WHERE b."source_id" = s."id" AND b."generation" IS NULL AND b."max_dt" <= upper ORDER BY b."max_dt" DESC LIMIT least(events, events / 250 + 16))
		) t
	) q
	WHERE q."through" >= events
$$;
-- The hot tier's events with first_id <= id <= last_id (a batch's range; one event's id twice).
-- (Not named first_id and last_id: in SQL, log_chunks' columns of those names would take precedence.)
CREATE OR REPLACE FUNCTION "logpond_hot_by_id"(from_id bigint, to_id bigint)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw" FROM "log_hot" h
	WHERE h."id" >= from_id AND h."id" <= to_id
	UNION ALL
	SELECT e."id", c."source_id", e."dt", e."line"::jsonb
	FROM "log_chunks" c CROSS JOIN LATERAL "logpond_block_events"(c."first_id", c."min_dt", NULL, NULL, NULL, c."payload") e
	WHERE c."first_id" <= to_id AND c."last_id" >= from_id AND e."id" >= from_id AND e."id" <= to_id
$$;
-- The newest dt of the hot tier's events of some sources before `before` (one row; null: none): a
-- chunk that ends before it counts by its max_dt; only one that spans it is opened. A table, not a
-- scalar, so that the planner inlines it: a scalar function with subqueries would lock the tables
-- after its caller's snapshot, and see neither tier's copy of an event a seal moves meanwhile
-- (store/sealer.ts, TRUNCATE; test/integration/chunk-review.test.ts).
DROP FUNCTION IF EXISTS "logpond_hot_newest_before"(bigint[], timestamptz);
DROP FUNCTION IF EXISTS "logpond_hot_oldest_after"(bigint[], timestamptz);
CREATE OR REPLACE FUNCTION "logpond_hot_newest"(source_ids bigint[], before timestamptz)
RETURNS TABLE ("dt" timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT greatest(
		(SELECT max(h."dt") FROM "log_hot" h WHERE h."source_id" = ANY(source_ids) AND h."dt" < before),
		(SELECT max(c."max_dt") FROM "log_chunks" c WHERE c."source_id" = ANY(source_ids) AND c."max_dt" < before),
		(SELECT max(e."dt") FROM "log_chunks" c CROSS JOIN LATERAL "logpond_block_events"(c."first_id", c."min_dt", NULL, NULL, NULL, c."payload") e
			WHERE c."source_id" = ANY(source_ids) AND c."max_dt" >= before AND c."min_dt" < before AND e."dt" < before))
$$;
-- The oldest dt of the hot tier's events of some sources after `after` (one row; null: none).
CREATE OR REPLACE FUNCTION "logpond_hot_oldest"(source_ids bigint[], after timestamptz)
RETURNS TABLE ("dt" timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT least(
		(SELECT min(h."dt") FROM "log_hot" h WHERE h."source_id" = ANY(source_ids) AND h."dt" > after),
		(SELECT min(c."min_dt") FROM "log_chunks" c WHERE c."source_id" = ANY(source_ids) AND c."min_dt" > after),
		(SELECT min(e."dt") FROM "log_chunks" c CROSS JOIN LATERAL "logpond_block_events"(c."first_id", c."min_dt", NULL, NULL, NULL, c."payload") e
			WHERE c."source_id" = ANY(source_ids) AND c."min_dt" <= after AND c."max_dt" > after AND e."dt" > after))
$$;
CREATE OR REPLACE VIEW "log_events" AS
	SELECT "id", "source_id", "dt", "raw" FROM "log_hot"
	UNION ALL
	SELECT e."id", c."source_id", e."dt", e."line"::jsonb
	FROM "log_chunks" c CROSS JOIN LATERAL "logpond_block_events"(c."first_id", c."min_dt", NULL, NULL, NULL, c."payload") e
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."generation" IS NULL;

-- Whether a block is counted from its field summary (drizzle/0012, src/store/summary.ts) rather than
-- opened: it lies inside the window (and inside one bucket of `bucket_seconds`, when given), and its
-- summary knows every one of `paths` — none is opaque, none is at or below an array (`prefixes`:
-- every path's prefixes and itself), and each is counted or the summary tracked every path. Null
-- (no summary): opened. One expression, STABLE as extract(epoch FROM timestamptz) is: inlined into
-- its callers (declared IMMUTABLE, it would be called once per block instead).
CREATE OR REPLACE FUNCTION "logpond_block_counted"(fields jsonb, min_dt timestamptz, max_dt timestamptz, from_dt timestamptz, to_dt timestamptz, paths text[], prefixes text[], bucket_seconds numeric)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT min_dt >= from_dt AND max_dt <= to_dt
		AND (bucket_seconds IS NULL OR floor(extract(epoch FROM min_dt) / bucket_seconds) = floor(extract(epoch FROM max_dt) / bucket_seconds))
		AND NOT (fields->'a' ?| prefixes) AND NOT (fields->'o' ?| paths) AND (fields->'c' ?& paths OR NOT fields ? 'x')
$$;
-- The events of some sources with from_dt <= dt <= to_dt, from both tiers, but for the blocks
-- logpond_block_counted counts for `paths` (query/aggregate.ts counts those from their summaries;
-- null paths: none, every event: logpond_events_between). A block is opened when its time range is
-- inside the window, or a v3 block's dts has an event in it, or a v4 block's minutes (its
-- histogram: its exact times are in the payload) meet the window's (blocks overlap in time after a
-- backfill sent out of order); each event's dt is compared after. Besides raw, `line` is the
-- event's JSON text: the query API sorts and limits on (dt, id, line) and parses only the lines of
-- its page (PostgreSQL computes only the columns a caller uses). Inlined by the planner (one
-- SELECT, STABLE), so a caller's WHERE, ORDER BY and LIMIT apply inside it.
CREATE OR REPLACE FUNCTION "logpond_events_uncounted"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, paths text[], prefixes text[], bucket_seconds numeric)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "logpond_hot_between"(source_ids, from_dt, to_dt) h
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb, e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."generation" IS NULL
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
			OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
		AND NOT coalesce("logpond_block_counted"(b."fields", b."min_dt", b."max_dt", from_dt, to_dt, paths, prefixes, bucket_seconds), false)
		AND e."dt" >= from_dt AND e."dt" <= to_dt
$$;
-- Every event of some sources with from_dt <= dt <= to_dt, from both tiers (the query API's reads).
CREATE OR REPLACE FUNCTION "logpond_events_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT * FROM "logpond_events_uncounted"(source_ids, from_dt, to_dt, NULL, NULL, NULL)
$$;
-- The blocks logpond_events_uncounted leaves out: their event count, the counts of `paths`' values
-- (the summary's `c`, only those paths) and their first event's time.
CREATE OR REPLACE FUNCTION "logpond_block_summaries"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, paths text[], prefixes text[], bucket_seconds numeric)
RETURNS TABLE ("n" integer, "counts" jsonb, "min_dt" timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT b."n", (SELECT coalesce(jsonb_object_agg(p, b."fields"->'c'->p), '{}') FROM unnest(paths) p WHERE b."fields"->'c' ? p), b."min_dt"
	FROM "log_blocks" b
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."generation" IS NULL
		AND "logpond_block_counted"(b."fields", b."min_dt", b."max_dt", from_dt, to_dt, paths, prefixes, bucket_seconds)
$$;
-- For SQL users: the same as log_events' columns.
CREATE OR REPLACE FUNCTION "log_events_between"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT "id", "source_id", "dt", "raw" FROM "logpond_events_between"(source_ids, from_dt, to_dt)
$$;
-- The events with first_id <= id <= last_id (a batch's range, for the live tail), from both tiers.
CREATE OR REPLACE FUNCTION "log_events_by_id"(first_id bigint, last_id bigint)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw" FROM "logpond_hot_by_id"(first_id, last_id) h
	UNION ALL
	SELECT e."id", b."source_id", e."dt", e."line"::jsonb
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE int8range(b."min_id", b."max_id", '[]') && int8range(first_id, last_id, '[]') AND b."generation" IS NULL AND e."id" >= first_id AND e."id" <= last_id
$$;
-- The slots of a filter group (a log_filters row, drizzle/0007) whose filters hold every item of
-- `items`: the items are probed one at a time, each reading only the bytes of `slices` its
-- position's bits lie in (stored uncompressed out of line: one TOAST chunk), and the probe stops at
-- the first item no slot still holds. Each absent item passes about half the slots
-- (codec/grams.ts BITS_PER_ITEM), so a group is mostly ruled out after a few items instead of
-- reading all of them (up to 16, query/prefilter.ts MAX_GRAMS). The slots still possible are kept
-- as bigint masks of 48 slots each; an item's 48 bits (and the up to 7 before them in their first
-- byte) are read as 7 bytes, bit i of byte j being position 8j + i as get_bit counts.
CREATE OR REPLACE FUNCTION "logpond_filter_slots"(slices bytea, bits integer, blocks integer, items bigint[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
	windows integer := (blocks + 47) / 48;
	masks bigint[] := array_fill((1::bigint << 48) - 1, ARRAY[windows]);
	item bigint;
	at bigint;
	piece bytea;
	size integer;
	first integer;
	word bigint;
	live boolean;
	w integer;
	j integer;
BEGIN
	masks[windows] := (1::bigint << (blocks - 48 * (windows - 1))) - 1;
	FOREACH item IN ARRAY coalesce(items, '{}') LOOP
		at := (item % bits) * blocks;
		piece := substring(slices FROM (at / 8 + 1)::integer FOR ((at + blocks - 1) / 8 - at / 8 + 1)::integer);
		size := length(piece);
		live := false;
		FOR w IN 1 .. windows LOOP
			IF masks[w] <> 0 THEN
				first := (at % 8)::integer + 48 * (w - 1);
				word := 0;
				FOR j IN 0 .. least(6, size - 1 - first / 8) LOOP
					word := word | (get_byte(piece, first / 8 + j)::bigint << (8 * j));
				END LOOP;
				masks[w] := masks[w] & (word >> (first % 8));
				live := live OR masks[w] <> 0;
			END IF;
		END LOOP;
		IF NOT live THEN
			RETURN '{}';
		END IF;
	END LOOP;
	RETURN ARRAY(SELECT k FROM generate_series(0, blocks - 1) k WHERE (masks[k / 48 + 1] >> (k % 48)) & 1 = 1);
END
$$;
-- logpond_events_between for a query: a sealed block is opened only when its filter holds every
-- item hash in `grams` (its grams) and `nums` (its numbers; per-block filters sealed before
-- drizzle/0007 hold grams only) and its text matches every needle pattern; a line is parsed (raw)
-- only when it matches them too, else raw is null. All are necessary conditions of the query's
-- top-level AND (query/prefilter.ts), whose conjuncts are false or null on a null raw, so the
-- caller's condition on raw still decides exactly. A v4 block's text is checked against the
-- needles after it is opened (its lines, not a `body`), so a block is opened only when its filter
-- passes, and a line is parsed only when it matches every needle.
CREATE OR REPLACE FUNCTION "logpond_events_matching_in"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, grams bigint[], nums bigint[], ilikes text[], likes text[], payloads boolean)
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT h."id", h."source_id", h."dt", h."raw", h."raw"::text FROM "logpond_hot_between"(source_ids, from_dt, to_dt) h
	UNION ALL
	-- Blocks of a filter group. The candidates (group, slot) first, behind OFFSET 0 so they are
	-- computed once per group (logpond_filter_slots) and never per block.
	SELECT e."id", b."source_id", e."dt",
		CASE WHEN e."line" LIKE ALL (likes) AND e."line" ILIKE ALL (ilikes) THEN e."line"::jsonb END,
		e."line"
	FROM (
		SELECT f."id", k."slot"
		FROM "log_filters" f
		CROSS JOIN LATERAL unnest("logpond_filter_slots"(f."slices", f."bits", f."blocks", grams || nums)) k("slot")
		WHERE f."source_id" = ANY(source_ids) AND f."max_dt" >= from_dt AND f."min_dt" <= to_dt
			-- Without payloads, only v3 blocks are read: no probe at all when the window has none
			-- (drizzle/0017's partial index, once per statement).
			AND (payloads OR EXISTS (SELECT 1 FROM "log_blocks" v WHERE v."payload" IS NULL AND v."source_id" = ANY(source_ids) AND v."max_dt" >= from_dt AND v."min_dt" <= to_dt))
		OFFSET 0
	) c
	-- Each candidate's block looked up by (filter_id, filter_slot), in a LATERAL subquery behind
	-- OFFSET 0 (not flattened into a join PostgreSQL may reorder), so that no plan opens blocks
	-- before it joins them to the candidates: PostgreSQL prices opening a block like any function
	-- call, and with some statistics it hashed every block of the window, opened, to join them to a
	-- few candidates (5-10 s at 2 M events instead of 80 ms; bench/scale.ts).
	CROSS JOIN LATERAL (
		SELECT b.* FROM "log_blocks" b
		WHERE b."filter_id" = c."id" AND b."filter_slot" = c."slot"
			AND b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."generation" IS NULL
			AND (payloads OR b."payload" IS NULL)
			AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
				OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
			AND CASE WHEN c."slot" IS NOT NULL THEN b."body" IS NULL OR b."body" LIKE ALL (likes) AND b."body" ILIKE ALL (ilikes) END
		OFFSET 0
	) b
	CROSS JOIN LATERAL "logpond_block_events_holding"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload", likes, ilikes) e
	WHERE e."dt" >= from_dt AND e."dt" <= to_dt
	UNION ALL
	-- Blocks with a filter of their own (sealed before 0007) or none (nothing to index).
	SELECT e."id", b."source_id", e."dt",
		CASE WHEN e."line" LIKE ALL (likes) AND e."line" ILIKE ALL (ilikes) THEN e."line"::jsonb END,
		e."line"
	FROM "log_blocks" b CROSS JOIN LATERAL "logpond_block_events"(b."min_id", b."min_dt", b."ids", b."dts", b."body", b."payload") e
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."filter_id" IS NULL AND b."generation" IS NULL
		AND (payloads OR b."payload" IS NULL)
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
-- With `payloads` false, logpond_events_matching_in leaves out the blocks that have a payload (v4):
-- the histogram opens those in the application (logpond_blocks_matching, src/query/scan.ts).
CREATE OR REPLACE FUNCTION "logpond_events_matching"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, grams bigint[], nums bigint[], ilikes text[], likes text[])
RETURNS TABLE ("id" bigint, "source_id" bigint, "dt" timestamptz, "raw" jsonb, "line" text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT * FROM "logpond_events_matching_in"(source_ids, from_dt, to_dt, grams, nums, ilikes, likes, true)
$$;
-- The blocks with a payload that logpond_events_matching_in opens for a query (their filter holds
-- `grams` and `nums`, their time range meets the window), as the application opens them
-- (src/query/scan.ts): their source, first id, first event's time in microseconds since the Unix
-- epoch, and payload. Their text is not checked here: the application checks the needles once it
-- has opened them. Dropped first: its result columns changed once (nothing depends on it).
DROP FUNCTION IF EXISTS "logpond_blocks_matching"(bigint[], timestamptz, timestamptz, bigint[], bigint[]);
CREATE FUNCTION "logpond_blocks_matching"(source_ids bigint[], from_dt timestamptz, to_dt timestamptz, grams bigint[], nums bigint[])
RETURNS TABLE ("source_id" bigint, "min_id" bigint, "min_us" bigint, "payload" bytea)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT b."source_id", b."min_id", (extract(epoch FROM b."min_dt") * 1000000)::bigint, b."payload"
	FROM (
		SELECT f."id", k."slot"
		FROM "log_filters" f
		CROSS JOIN LATERAL unnest("logpond_filter_slots"(f."slices", f."bits", f."blocks", grams || nums)) k("slot")
		WHERE f."source_id" = ANY(source_ids) AND f."max_dt" >= from_dt AND f."min_dt" <= to_dt
		OFFSET 0
	) c
	CROSS JOIN LATERAL (
		SELECT b.* FROM "log_blocks" b
		WHERE b."filter_id" = c."id" AND b."filter_slot" = c."slot" AND b."payload" IS NOT NULL
			AND b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."generation" IS NULL
			AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
				OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
		OFFSET 0
	) b
	UNION ALL
	SELECT b."source_id", b."min_id", (extract(epoch FROM b."min_dt") * 1000000)::bigint, b."payload"
	FROM "log_blocks" b
	WHERE b."source_id" = ANY(source_ids) AND b."max_dt" >= from_dt AND b."min_dt" <= to_dt AND b."filter_id" IS NULL AND b."generation" IS NULL
		AND b."payload" IS NOT NULL
		AND (b."min_dt" >= from_dt AND b."max_dt" <= to_dt OR EXISTS (SELECT 1 FROM unnest(b."dts") d WHERE d >= from_dt AND d <= to_dt)
			OR b."dts" IS NULL AND EXISTS (SELECT 1 FROM unnest(b."hist_minutes") m WHERE m >= floor(extract(epoch FROM from_dt) / 60) AND m <= floor(extract(epoch FROM to_dt) / 60)))
		AND (b."bloom" IS NULL OR NOT EXISTS (
			SELECT 1 FROM unnest(grams) g, LATERAL (SELECT g % (octet_length(b."bloom")::bigint * 8) AS bit) p
			WHERE get_bit(substring(b."bloom" FROM (p.bit / 8)::int + 1 FOR 1), (p.bit % 8)::int) = 0))
$$;
