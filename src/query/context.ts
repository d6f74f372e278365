// The query API's context read: one source's events around one event (the anchor), in (dt, id)
// order, whichever tier holds them. First the anchor: from its id alone, a hot one by its id
// (logpond_hot_by_id, store/sql/functions.sql), a sealed one through the blocks' GiST index on
// their id range, then only the ids array of the blocks of this source that cover it (a block is
// opened to learn the dt); with the row's `dt` given too, the hot row by id, or for a sealed one
// only the blocks' rows that span that dt (none is opened: the anchor is checked in the answer,
// below). Then each side is read outwards from the anchor in time slices (the first sized from the
// events per second of the anchor's blocks, then 10 s, 1 min, 5 min, …), one statement per slice
// over both tiers of this one source, keyset on (dt, id): slices are contiguous and each is one
// snapshot, so an event the sealer moves meanwhile is read once. The first slices of both sides
// are one statement, so a block that spans the anchor (the first slices always open it) is opened
// once. A slice's blocks are found by the GiST index on (source_id, their time range)
// (drizzle/0013): the few that meet the slice, however many blocks the day holds. An empty slice
// is followed by a probe for the nearest event time beyond it, so a gap of days costs one
// statement, not a scan of what lies past it. The blocks' SQL is store/tiers.ts's.
import { eventTime } from "../codec/time";
import { AppError } from "../errors";
import type { Sql } from "../store/db";
import { showInSentOrder } from "../store/key-orders";
import { blockEventById, blockEventsBetween, blockSpansPast, blocksMayHold, DENSITY, earliestBlockEndAfter, latestBlockEndAtOrBefore } from "../store/tiers";
import { DT_TEXT, queryTimeout, timed } from "./read";
import { micros, refuseUnknown, single } from "./request";

/** Neighbours per side when not asked for, and at most. */
export const CONTEXT_DEFAULT = 50;
export const CONTEXT_MAX = 500;

export interface ContextRequest {
  sourceId: number;
  /** The anchor's id, digits. */
  id: string;
  /** The anchor's dt as rows show it (µs), when the client sent it: makes a sealed anchor cheap to find. */
  dt: string | undefined;
  before: number;
  after: number;
}

export interface Context {
  /** Each row's JSON text, oldest first; the anchor is rows[anchorIndex]. */
  rows: string[];
  anchorIndex: number;
  /** Positions of the first and last row, and whether more events lie beyond each. */
  first: { id: string; dt: string };
  last: { id: string; dt: string };
  moreBefore: boolean;
  moreAfter: boolean;
}

interface Row {
  id: string;
  dt: string;
  row: string;
}

/** Slice widths away from the anchor, after the first; the last repeats. */
const SLICE_MS = [10_000, 60_000, 300_000, 1_800_000, 10_800_000, 86_400_000, 604_800_000, 2_592_000_000];
/** The first slice is wide enough for this many times the events wanted at the anchor's block's density, within these bounds. */
const FIRST_SLACK = 2;
const FIRST_MIN_MS = 1_000;
/** The times eventTime reads (codec/time.ts): years 0001–9999. */
const EARLIEST = "0001-01-01T00:00:00.000000Z";
const LATEST = "9999-12-31T23:59:59.999999Z";
const msOf = (dt: string) => Date.parse(`${dt.slice(0, 23)}Z`);
const textOf = (ms: number) => micros(new Date(ms).toISOString());

/**
 * The anchor's dt (none: no event of this source has that id, and that dt when given), and for a
 * sealed one the events per millisecond around it: how wide a first slice holds the neighbours.
 * With the dt given, a sealed anchor is not looked for inside its block: the blocks that span the
 * dt and whose ids may hold it (their range, and a v3 block's ids array) say it may be there, and
 * the answer's first row after it is the anchor or the read is a 404 (readContext). Their densities
 * add up: blocks may overlap in time. Here and below a staged block (generation not null,
 * drizzle/0011) is skipped (store/tiers.ts): its events are still hot rows.
 */
const LOOKUP = (withDt: boolean) =>
  withDt
    ? `select ${DT_TEXT} as dt, density from (` +
      "select h.dt, null::float8 as density, 0 as tier from logpond_hot_by_id($1::bigint, $1::bigint) h where h.source_id = $2::bigint and h.dt = $3::text::timestamptz " +
      "union all " +
      blocksMayHold(`$3::text::timestamptz, sum(${DENSITY}), 1`, "$1", "$2::bigint", "$3") +
      ") anchor order by tier limit 1"
    : `select ${DT_TEXT} as dt, density from (` +
      "select h.dt, null::float8 as density from logpond_hot_by_id($1::bigint, $1::bigint) h where h.source_id = $2::bigint " +
      "union all " +
      blockEventById(`u.dt, ${DENSITY}`, "$1", "$2::bigint") +
      ") anchor limit 1";

/**
 * The source's events with `lower` <= dt <= `upper` (SQL texts; $1 the source): hot rows, and the
 * lines of the blocks that hold an event in that stretch (their exact times are inside them: a v3
 * block's dts, a v4 block's minutes say whether to open it).
 */
const EVENTS = (lower: string, upper: string) =>
  `select h.id, h.source_id, h.dt, h.raw::text as line from logpond_hot_between(array[$1::bigint], ${lower}::text::timestamptz, ${upper}::text::timestamptz) h ` +
  "union all " +
  blockEventsBetween("$1::bigint", lower, upper);

/** A page's columns of the rows of EVENTS: the row text is built for the page only, after the sort. */
const ROW = `id::text as id, ${DT_TEXT} as dt, (line::jsonb || jsonb_build_object('dt', ${DT_TEXT}, 'source_id', source_id::text, 'id', id::text))::text as row`;

/**
 * One slice of one side: $1 source, $2/$3 the slice's bounds (compared with `lowerOp`/`upperOp`),
 * $4/$5 the anchor's (dt, id), $6 the limit.
 */
const SLICE = (side: "before" | "after", lowerOp: string, upperOp: string) => {
  const direction = side === "before" ? "desc" : "asc";
  const keyset = side === "before" ? "<" : ">=";
  return (
    `select ${ROW} from (select id, source_id, dt, line from (${EVENTS("$2", "$3")}) events ` +
    `where dt ${lowerOp} $2::text::timestamptz and dt ${upperOp} $3::text::timestamptz and (dt, id) ${keyset} ($4::text::timestamptz, $5::bigint) ` +
    `order by dt ${direction}, id ${direction} limit $6) page order by page.dt ${direction}, page.id ${direction}`
  );
};

/**
 * The first slice of both sides in one statement, each block that meets them opened once: $1
 * source, $2 the before side's far bound (compared with `farOp`), $3 the after side's (<=), $4/$5
 * the anchor's (dt, id), $6/$7 the limits. `side` 0 is before (newest first), 1 after (oldest first).
 */
const FIRST = (farOp: string) =>
  `with events as materialized (${EVENTS("$2", "$3")}) ` +
  `select side, ${ROW} from (` +
  `(select 0 as side, id, source_id, dt, line from events where dt ${farOp} $2::text::timestamptz and dt <= $4::text::timestamptz and (dt, id) < ($4::text::timestamptz, $5::bigint) order by dt desc, id desc limit $6) ` +
  "union all " +
  "(select 1, id, source_id, dt, line from events where dt >= $4::text::timestamptz and dt <= $3::text::timestamptz and (dt, id) >= ($4::text::timestamptz, $5::bigint) order by dt, id limit $7)" +
  ") page order by side, case when side = 0 then page.dt end desc, case when side = 0 then page.id end desc, page.dt, page.id";

/**
 * Past an unfilled slice, a time the next event beyond `$2` may have, nearest first (null: none):
 * before the anchor, the latest end of a block or hot row at or before it, or `$2` itself while a
 * block spans it; after it, the earliest end of a block or hot row past it (the next event is at or
 * before that end).
 */
const PROBE = {
  before:
    "select to_char(greatest(" +
    `${latestBlockEndAtOrBefore("$1::bigint", "$2")}, ` +
    "(select h.dt from logpond_hot_newest(array[$1::bigint], $2::text::timestamptz + interval '1 microsecond') h), " +
    `(select $2::text::timestamptz where ${blockSpansPast("$1::bigint", "$2")})` +
    `) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt`,
  after:
    "select to_char(least(" +
    `${earliestBlockEndAfter("$1::bigint", "$2")}, ` +
    "(select h.dt from logpond_hot_oldest(array[$1::bigint], $2::text::timestamptz) h)" +
    `) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt`,
};

/** The anchor and its neighbours, or undefined when the source has no event with that id (and dt). */
export async function readContext(sql: Sql, request: ContextRequest, timeoutMs: number): Promise<Context | undefined> {
  const deadline = performance.now() + timeoutMs;
  // One transaction, read committed: each statement takes its own snapshot after its locks, as the
  // query API's do; the budget left is set before each.
  return timed(sql, timeoutMs, async (tx) => {
    // The budget's remainder goes with each statement in one round trip (postgres.js pipelines
    // what a transaction is given before the answers come).
    const run = async <T>(text: string, params: unknown[]): Promise<T[]> => {
      const left = Math.floor(deadline - performance.now());
      if (left < 1) throw queryTimeout(timeoutMs);
      const [, rows] = await Promise.all([tx`select set_config('statement_timeout', ${String(left)}, true)`, tx.unsafe<T[]>(text, params as never[])]);
      return rows;
    };
    const params = request.dt === undefined ? [request.id, request.sourceId] : [request.id, request.sourceId, request.dt];
    const [found] = await run<{ dt: string; density: number | null }>(LOOKUP(request.dt !== undefined), params);
    if (!found) return undefined;
    const anchor = { dt: found.dt, id: request.id };

    // The density around a sealed anchor tells how wide a first slice holds a side (most reads are
    // that one slice a side); around a hot one the first is 10 s.
    const firstWidth = (wanted: number) =>
      found.density ? Math.min(Math.max(Math.ceil((wanted * FIRST_SLACK) / found.density), FIRST_MIN_MS), SLICE_MS[5]!) : SLICE_MS[0]!;
    /** The far end of the slice `width` away from `from`, as its text; whether it is the end of time. */
    const farFrom = (which: "before" | "after", from: string, width: number) => {
      const farMs = which === "before" ? msOf(from) - width : msOf(from) + width;
      const far = which === "before" ? (farMs <= msOf(EARLIEST) ? EARLIEST : textOf(farMs)) : farMs >= msOf(LATEST) ? LATEST : textOf(farMs);
      return { far, last: far === EARLIEST || far === LATEST };
    };
    const wanted = { before: request.before + 1, after: request.after + 2 }; // after: the anchor, `after` rows, one more to tell
    const width = Math.max(firstWidth(wanted.before), firstWidth(wanted.after));
    const firstFar = { before: farFrom("before", anchor.dt, width), after: farFrom("after", anchor.dt, width) };
    const firstRows = await run<Row & { side: number }>(FIRST(firstFar.before.last ? ">=" : ">"), [
      request.sourceId,
      firstFar.before.far,
      firstFar.after.far,
      anchor.dt,
      anchor.id,
      wanted.before,
      wanted.after,
    ]);

    const side = async (which: "before" | "after"): Promise<Row[]> => {
      const rows: Row[] = firstRows.filter((row) => row.side === (which === "before" ? 0 : 1));
      const widths = [width, ...SLICE_MS.filter((w) => w > width)];
      // Before: slices (lower, upper] stepping back from the anchor's dt; after: [lower, upper], then (lower, upper].
      let { far, last } = firstFar[which];
      let got = rows.length; // the last slice's rows
      for (let k = 1; rows.length < wanted[which] && !last; k++) {
        let from = far; // where the next slice's width is measured from
        const [near, nearOp] = [far, which === "before" ? "<=" : ">"];
        if (got === 0) {
          // An empty slice may be the start of a gap: go on from the nearest event time beyond it.
          const [probe] = await run<{ dt: string | null }>(PROBE[which], [request.sourceId, far]);
          if (!probe?.dt) break; // nothing beyond
          from = probe.dt;
        }
        ({ far, last } = farFrom(which, from, widths[Math.min(k, widths.length - 1)]!));
        const farOp = which === "before" ? (last ? ">=" : ">") : "<=";
        const [lower, lowerOp, upper, upperOp] = which === "before" ? [far, farOp, near, nearOp] : [near, nearOp, far, farOp];
        const slice = await run<Row>(SLICE(which, lowerOp, upperOp), [request.sourceId, lower, upper, anchor.dt, anchor.id, wanted[which] - rows.length]);
        rows.push(...slice);
        got = slice.length;
      }
      return rows;
    };
    // Both sides at once, on this transaction's one connection: their statements are pipelined.
    const [older, newer] = await Promise.all([side("before"), side("after")]);
    // Removed (retention, a deleted source) since it was found, or (with the dt given) not in the
    // blocks that may hold it, or there at another dt.
    if (newer[0]?.id !== anchor.id || newer[0].dt !== anchor.dt) return undefined;
    const moreBefore = older.length > request.before;
    const moreAfter = newer.length > request.after + 1;
    const rows = [...older.slice(0, request.before).reverse(), ...newer.slice(0, request.after + 1)];
    const anchorIndex = Math.min(older.length, request.before);
    // The rows' text is jsonb's; each event's keys go back into the order they were sent (while
    // the budget lasts: past it they keep jsonb's order).
    const left = Math.floor(deadline - performance.now());
    if (left >= 1) await Promise.all([tx`select set_config('statement_timeout', ${String(left)}, true)`, showInSentOrder(tx, rows, "row")]);
    return {
      rows: rows.map((r) => r.row),
      anchorIndex,
      first: { id: rows[0]!.id, dt: rows[0]!.dt },
      last: { id: rows[rows.length - 1]!.id, dt: rows[rows.length - 1]!.dt },
      moreBefore,
      moreAfter,
    };
  });
}

/** The request's parameters: 400 naming the one that is wrong. Source access is the caller's. */
export function readContextRequest(url: URL): ContextRequest & { sourceText: string } {
  const bad = (message: string) => new AppError("bad_request", message);
  // Context is every event around the anchor: a query or a window would be silently ignored.
  refuseUnknown(url, "context", ["source_id", "id", "dt", "before", "after"], " (every event of the source around the anchor, whatever its fields)");
  const sourceText = single(url, "source_id")?.trim() ?? "";
  if (sourceText === "") throw bad("source_id is required: the id of the event's source, e.g. source_id=12");
  const id = single(url, "id")?.trim() ?? "";
  if (id === "") throw bad("id is required: the event's id as rows show it, e.g. id=4711");
  if (!/^[0-9]{1,19}$/.test(id) || BigInt(id) > 9223372036854775807n) {
    throw bad(`id must be an event id: digits, as rows show it (got ${JSON.stringify(id.slice(0, 32))})`);
  }
  const dtText = single(url, "dt")?.trim();
  let dt: string | undefined;
  if (dtText !== undefined && dtText !== "") {
    dt = /^\d{4}-\d{2}-\d{2}/.test(dtText) ? eventTime(dtText) : undefined;
    if (dt === undefined) throw bad(`dt must be the event's dt as rows show it, e.g. 2026-11-22T10:00:00.123456Z (got ${JSON.stringify(dtText.slice(0, 64))})`);
    dt = micros(dt);
  }
  const count = (name: "before" | "after"): number => {
    const raw = single(url, name);
    if (raw === null || raw === "") return CONTEXT_DEFAULT;
    if (!/^[0-9]{1,4}$/.test(raw) || Number(raw) > CONTEXT_MAX) {
      throw bad(`${name} must be a whole number from 0 to ${CONTEXT_MAX} (got ${JSON.stringify(raw.slice(0, 32))})`);
    }
    return Number(raw);
  };
  const sourceId = /^[0-9]{1,15}$/.test(sourceText) && Number(sourceText) > 0 ? Number(sourceText) : 0;
  return { sourceId, sourceText, id: String(BigInt(id)), dt, before: count("before"), after: count("after") };
}
