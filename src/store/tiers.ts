// The tiers as the query layer reads them (query/read.ts, context.ts, histogram.ts): SQL fragments
// over the sealed blocks, spliced into query/'s statements, so no file there names a tier table.
// May touch: log_blocks, read-only (the hot tier is read through store/sql/functions.sql's
// functions). Invariants: a staged block (generation not null, drizzle/0011) is never read (its
// events are still hot rows); a fragment's text is fixed by its arguments (the plans depend on it).
// Arguments are SQL texts: a time is a text value (cast here), a source a bigint (cast by the caller).

/**
 * A condition on block `b`: its time range meets [`lower`, `upper`], found by the GiST index on
 * (source_id, tstzrange(min_dt, max_dt)) (drizzle/0013). The plain bounds beside it let PostgreSQL
 * skip the other days' partitions (store/partitions.ts: by max_dt; a block holds one UTC day,
 * store/blocks.ts, so it ends before the day after `upper` begins).
 */
export const meets = (lower: string, upper: string) =>
  `tstzrange(b.min_dt, b.max_dt, '[]') && tstzrange(${lower}::text::timestamptz, ${upper}::text::timestamptz, '[]') ` +
  `and b.max_dt >= ${lower}::text::timestamptz and b.max_dt < (date_trunc('day', ${upper}::text::timestamptz, 'UTC') + interval '1 day') ` +
  `and b.min_dt <= ${upper}::text::timestamptz`;

/** Block `b`'s events per millisecond. */
export const DENSITY = "b.n / greatest(extract(epoch from b.max_dt - b.min_dt)::float8 * 1000, 1)";

/** Block `b` opened: its events (id, dt, line), whatever its version (store/sql/functions.sql). */
const OPENED = "logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload)";

/**
 * `columns` (aggregates over blocks `b`) of the blocks of `source` that meet `at` and whose ids may
 * hold event `id` (their id range, and a v3 block's ids array): one row when one may, none when none.
 * No block is opened.
 */
export const blocksMayHold = (columns: string, id: string, source: string, at: string) =>
  `select ${columns} from log_blocks b where b.source_id = ${source} and b.generation is null and ${meets(at, at)} ` +
  `having bool_or(int8range(b.min_id, b.max_id, '[]') @> ${id}::bigint and (b.ids is null or ${id}::bigint = any(b.ids)))`;

/** `columns` of event `id` of `source` as `u` in block `b`: only the blocks whose ids may hold it are opened. */
export const blockEventById = (columns: string, id: string, source: string) =>
  `select ${columns} from log_blocks b ` +
  `cross join lateral ${OPENED} as u ` +
  `where b.source_id = ${source} and b.generation is null and (b.ids is null or ${id}::bigint = any(b.ids)) and int8range(b.min_id, b.max_id, '[]') @> ${id}::bigint and u.id = ${id}::bigint`;

/**
 * The events (id, source_id, dt, line) of `source` with `lower` <= dt <= `upper` in blocks: only the
 * blocks that hold an event in that stretch are opened (their exact times are inside them: a v3
 * block's dts, a v4 block's minutes say whether to open it).
 */
export const blockEventsBetween = (source: string, lower: string, upper: string) =>
  "select e.id, b.source_id, e.dt, e.line from log_blocks b " +
  `cross join lateral ${OPENED} as e ` +
  `where b.source_id = ${source} and b.generation is null and ${meets(lower, upper)} ` +
  `and (b.min_dt >= ${lower}::text::timestamptz and b.max_dt <= ${upper}::text::timestamptz or exists (select 1 from unnest(b.dts) d where d >= ${lower}::text::timestamptz and d <= ${upper}::text::timestamptz) ` +
  `or b.dts is null and exists (select 1 from unnest(b.hist_minutes) m where m >= floor(extract(epoch from ${lower}::text::timestamptz) / 60) and m <= floor(extract(epoch from ${upper}::text::timestamptz) / 60))) ` +
  `and e.dt >= ${lower}::text::timestamptz and e.dt <= ${upper}::text::timestamptz`;

/** A scalar: the latest end of a block of `source` at or before `at` (null: none). */
export const latestBlockEndAtOrBefore = (source: string, at: string) =>
  `(select max(b.max_dt) from log_blocks b where b.source_id = ${source} and b.generation is null and b.max_dt <= ${at}::text::timestamptz)`;

/** A scalar: the earliest end of a block of `source` after `at` (null: none). */
export const earliestBlockEndAfter = (source: string, at: string) =>
  `(select min(b.max_dt) from log_blocks b where b.source_id = ${source} and b.generation is null and b.max_dt > ${at}::text::timestamptz)`;

/** A condition: a block of `source` spans `at` and ends after it. */
export const blockSpansPast = (source: string, at: string) =>
  `exists (select 1 from log_blocks b where b.source_id = ${source} and b.generation is null and ${meets(at, at)} and b.max_dt > ${at}::text::timestamptz)`;

/**
 * A query of one row, `newest`: the latest end of a block of `source` in [`from`, `to`] (null:
 * none). Per source, it is one entry of the (source_id, max_dt) index read backwards.
 */
export const newestBlockEndWithin = (source: string, from: string, to: string) =>
  `select max(max_dt) as newest from log_blocks where source_id = ${source} and generation is null and max_dt >= ${from}::text::timestamptz and max_dt <= ${to}::text::timestamptz`;

/** A query of one row, `newest`: the latest end of a block of `source` before `at` (null: none). */
export const newestBlockEndBefore = (source: string, at: string) =>
  `select max(b.max_dt) as newest from log_blocks b where b.source_id = ${source} and b.generation is null and b.max_dt < ${at}::text::timestamptz`;

/** A query of the rows `b.*` of the blocks of `source` that span `at` and begin before it (none opened). */
export const blocksAcross = (source: string, at: string) =>
  `select b.* from log_blocks b where b.source_id = ${source} and b.generation is null and ${meets(at, at)} and b.min_dt < ${at}::text::timestamptz`;

/** From-list items: block rows `b` (from blocksAcross) opened, their events as `alias`. */
export const openedAs = (alias: string) => `cross join lateral ${OPENED} ${alias}`;

/** A block of the window [`from`, `to`] (`upper`: `<=`, or `<` when `to` is left out) lies inside it. */
export const blockInside = (from: string, upper: string, to: string) => `b.min_dt >= ${from}::text::timestamptz and b.max_dt ${upper} ${to}::text::timestamptz`;

/**
 * From and where of the per-minute counts h(minute, level, n) of the blocks of `sources` (a
 * bigint[]) inside the window (blockInside): none is opened. `level` is the lowered text
 * (LEVEL_MAX_CHARS, store/blocks.ts); the caller adds its conditions after.
 */
export const blockMinutesInside = (sources: string, from: string, upper: string, to: string) =>
  "from log_blocks b " +
  "cross join lateral unnest(b.hist_minutes, b.hist_levels, b.hist_counts) as h(minute, level, n) " +
  `where b.source_id = any(${sources}) and b.generation is null and ${blockInside(from, upper, to)}`;

/**
 * From and where of the events `e` (id, dt, line) of the blocks of `sources` (a bigint[]) that meet
 * the window [`from`, `to`] (`upper` as blockInside's): each is opened. The caller adds its conditions after.
 */
export const blockEventsMeeting = (sources: string, from: string, upper: string, to: string) =>
  "from log_blocks b " +
  `cross join lateral ${OPENED} as e ` +
  `where b.source_id = any(${sources}) and b.generation is null and b.max_dt >= ${from}::text::timestamptz and b.min_dt ${upper} ${to}::text::timestamptz`;
