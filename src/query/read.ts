// Reads pages of stored events and dead letters for the query API. Keyset paging on (dt, id), so
// a page costs the same however deep the cursor is and equal dts are ordered by id.
// Rows are built as JSON text by PostgreSQL and spliced into the body unparsed. Every statement
// runs under its own statement_timeout; only the management pool is used, never a flush connection.
import { unixMicros } from "../codec/time";
import { AppError } from "../errors";
import type { Sql } from "../store/db";
import { deadLettersPage } from "../store/dead-letters";
import { showInSentOrder } from "../store/key-orders";
import { inSnapshot } from "../store/snapshot";
import { blocksAcross, newestBlockEndBefore, newestBlockEndWithin, openedAs } from "../store/tiers";
import { micros, type Position, type ReadRequest } from "./request";
import type { Node } from "./parse";
import { prefilter } from "./prefilter";
import type { BlockBatch, Found } from "./scan";
import type { ScanPool } from "./scan-pool";
import { compileQuery } from "./sql";
import { within as atMost } from "../timers";

/** Event time as rows show it: RFC 3339 UTC, six fraction digits. */
export const DT_TEXT = `to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

export interface Page {
  /** Each row's JSON text. */
  rows: string[];
  /** Position of the last row, when there are more after it. */
  next: Position | undefined;
}

/**
 * What a test injects into readEvents to decide which half of a split slice settles first: `half`
 * runs each half (`which`: 0 the nearer, 1 the farther) and may delay it or fail it instead.
 */
export interface ReadSeams {
  half?<T>(which: 0 | 1, run: () => Promise<T>): Promise<T>;
  /** With the scan threads, read short slices with them too (they read only slices to be split otherwise). */
  scanShort?: boolean;
}

export async function readEvents(sql: Sql, request: ReadRequest, timeoutMs: number, seams: ReadSeams = {}, scans?: ScanPool): Promise<Page> {
  const newest = request.order === "newest_first";
  const params: unknown[] = ["", "", 0];
  const conditions: string[] = [];
  if (request.after) {
    params.push(request.after.dt, request.after.id);
    // The plain dt bound lets the dt index skip what is behind the cursor; the row comparison
    // breaks ties between equal dts by id.
    conditions.push(
      newest
        ? "dt <= $4::text::timestamptz and (dt, id) < ($4::text::timestamptz, $5::bigint)"
        : "dt >= $4::text::timestamptz and (dt, id) > ($4::text::timestamptz, $5::bigint)",
    );
  }
  if (request.query) {
    const condition = compileQuery(request.query, params.length + 1, "line");
    params.push(...condition.params);
    conditions.push(condition.text);
  }
  params.push(request.sourceIds);
  const sources = `$${params.length}::bigint[]`;
  conditions.push(`source_id = any(${sources})`);
  // With a query and the scan threads, a long slice's v4 blocks are opened and matched by them
  // (readScanned, below) and PostgreSQL reads the hot tier and v3 blocks (`beside`).
  const scanned = request.query !== undefined && scans !== undefined;
  const besideParams = [...params];
  const beside = scanned ? besideScans(besideParams, sources, "$1::text::timestamptz", "$2::text::timestamptz", request.query!) : "";
  const events = tiers(params, sources, "$1::text::timestamptz", "$2::text::timestamptz", request.query);
  const direction = newest ? "desc" : "asc";
  // The row text is built outside the ordered, limited subquery: PostgreSQL computes a select
  // list before the sort, so inline it was built for every row of the window (a newest page over
  // 600,000 rows ran past 5 s; bench/read.ts). ORDER BY names the table's columns: bare `id` and
  // `dt` would be the text outputs. Both tiers are read (tiers() below).
  // The page's rows carry their JSON text (`line`), not jsonb: a block's lines are parsed only for
  // the query's condition, if any, and for the page itself (logpond_events_between's header).
  const pageOf = (events: string) =>
    `select id::text as id, ${DT_TEXT} as dt, (line::jsonb || jsonb_build_object('dt', ${DT_TEXT}, 'source_id', source_id::text, 'id', id::text))::text as row ` +
    `from (select id, source_id, dt, line from ${events} where dt >= $1::text::timestamptz and dt <= $2::text::timestamptz and ${conditions.join(" and ")} ` +
    `order by dt ${direction}, id ${direction} limit $3) page order by page.dt ${direction}, page.id ${direction}`;
  const query = pageOf(events);
  const besideQuery = pageOf(beside);

  const wanted = request.batch + 1;
  const rows: { id: string; dt: string; row: string }[] = [];
  // Each statement in a transaction of its own, under what is left of one QUERY_TIMEOUT_MS, and
  // holding no connection while it waits for another (two halves at once, below: a transaction
  // waiting for a second connection could wait for ever once every pooled one did the same).
  const deadline = performance.now() + timeoutMs;
  const within = async <T>(work: (tx: Sql) => Promise<T>): Promise<T> => {
    const left = Math.floor(deadline - performance.now());
    if (left <= 0) throw queryTimeout(timeoutMs);
    try {
      return await timed(sql, left, work);
    } catch (error) {
      throw error instanceof AppError && error.reason === "query_timeout" ? queryTimeout(timeoutMs) : error;
    }
  };
  // Newest first: the newest block's end at or before the page's start (the blocks' index). What
  // lies between it and the start is hot or in a block that straddles it: one slice; the slices
  // below grow from it, so a source whose newest event is hours old does not sort hours of blocks.
  // A staged block (generation not null, drizzle/0011) is not one yet: its events are hot rows.
  // The hot chunks and the blocks say more: the newest of them that hold so many events start at or
  // after a time (logpond_newest_holding), and each such time cuts a slice too (a burst of millions
  // of events within the last seconds: bench/read.ts).
  // Without a query, a page's worth; with one, 10, 100, 1,000 and 10,000 pages' worth, so a query
  // that matches one event in ten opens about ten pages' events, and one that matches less opens
  // ten times more at each step, not the burst.
  const anchors: string[] = [];
  if (newest) {
    const upper = request.after && request.after.dt < request.to ? request.after.dt : request.to;
    const steps = request.query ? HOT_STEPS_WITH_QUERY : [1];
    const holding = steps.map(
      (step) =>
        `(select to_char((h.dt - interval '1 microsecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') from logpond_newest_holding($1::bigint[], $4::text::timestamptz, $5::integer * ${step}) h)`,
    );
    const [newestBlock] = await within((tx) =>
      tx.unsafe<{ dt: string | null; hot: (string | null)[] }[]>(
        // Per source, so each is one entry of the (source_id, max_dt) index read backwards: over
        // `= any(…)` PostgreSQL read every block of the window (25-44 ms at 20 M events).
        `select to_char(max(newest) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt, array[${holding.join(", ")}]::text[] as hot ` +
          `from unnest($1::bigint[]) s(id), lateral (
         ${newestBlockEndWithin("s.id", "$2", "$3")}) n`,
        // A cursor's own dt is left out of the chunks counted: its page holds only what lies before the cursor.
        [request.sourceIds, request.from, upper, request.after && request.after.dt < request.to ? shiftMicros(upper, -1) : upper, wanted] as never[],
      ),
    );
    for (const dt of [newestBlock?.dt, ...(newestBlock?.hot ?? [])]) if (dt) anchors.push(dt);
  }
  // An open bound is passed closed, a microsecond in (dt has microseconds): the tiers' function
  // then leaves out a block that only touches it, as the newest block does the slice above the
  // anchor (opened for nothing: 25 ms of a 2 M database's newest page).
  const read = (tx: Sql, slice: Slice, limit: number) => {
    const own = [...params];
    own[0] = slice.lowerOp === ">" ? shiftMicros(slice.lower, 1) : slice.lower;
    own[1] = slice.upperOp === "<" ? shiftMicros(slice.upper, -1) : slice.upper;
    own[2] = limit;
    return tx.unsafe<{ id: string; dt: string; row: string }[]>(query, own as never[]);
  };
  // Slices from the page's start outwards (10 s, 1 min, 5 min, …): the next page is found in the
  // newest (or oldest) slice without sorting the whole window, which a dt-ordered index cannot
  // spare a BRIN-indexed, source-mixed table. Slices are contiguous, so order and keyset hold.
  // A long slice (a search that has found little so far) is read as two halves at once, on two
  // connections: a scan is one core per statement. Each event is in one half and each half is one
  // statement over both tiers, so each is read once whatever the sealer moves meanwhile; the
  // farther half is cancelled when the nearer one fills the page.
  const half = <T>(which: 0 | 1, run: () => Promise<T>): Promise<T> => (seams.half ? seams.half(which, run) : run());
  // A slice read with the scan threads: one snapshot (store/snapshot.ts) for the hot tier's rows
  // (PostgreSQL) and the blocks' (the threads), so a seal or a merge meanwhile moves no event out of
  // the page or into it twice.
  const readScanned = async (slice: Slice, limit: number, abandoned: () => boolean = () => false) => {
    const own = [...besideParams];
    own[0] = slice.lowerOp === ">" ? shiftMicros(slice.lower, 1) : slice.lower;
    own[1] = slice.upperOp === "<" ? shiftMicros(slice.upper, -1) : slice.upper;
    own[2] = limit;
    const left = Math.floor(deadline - performance.now());
    if (left <= 0) throw queryTimeout(timeoutMs);
    try {
      return await inSnapshot(sql, left, async (tx) => {
        const hot = await tx.unsafe<{ id: string; dt: string; row: string }[]>(besideQuery, own as never[]);
        const found = await scanBlocks(tx, scans!, {
          sourceIds: request.sourceIds,
          lower: own[0] as string,
          upper: own[1] as string,
          after: request.after,
          newest,
          limit,
          query: request.query!,
          deadline,
          timeoutMs,
          abandoned,
        });
        return mergePage(tx, hot, found, newest, limit);
      });
    } catch (error) {
      if ((error as { code?: string }).code === "57014") throw queryTimeout(timeoutMs);
      throw error;
    }
  };
  for (const slice of slices(request, newest, anchors)) {
    const limit = wanted - rows.length;
    const halves = split(slice, newest);
    if (scanned && (halves || seams.scanShort)) {
      // A long slice with the scan threads (a short one holds a few blocks: one statement reads it
      // sooner), as two halves at once, each in a snapshot of its own: PostgreSQL's filter probes
      // are one core per statement. An event is in one half by its dt, so each is read once
      // whatever a seal moves between the two snapshots. The farther half stops between its
      // batches once the nearer one has filled the page.
      if (!halves) {
        rows.push(...(await readScanned(slice, limit)));
        if (rows.length >= wanted) break;
        continue;
      }
      let filled = false;
      const farther: Promise<Half> = readScanned(halves[1], limit, () => filled).then(
        (found) => ({ found }),
        (error: unknown) => ({ error }),
      );
      try {
        rows.push(...(await readScanned(halves[0], limit)));
      } catch (error) {
        filled = true;
        await farther; // no statement outlives its request
        throw error;
      }
      if (rows.length >= wanted) filled = true;
      const outcome = await farther;
      if (rows.length >= wanted) break;
      if ("error" in outcome) throw outcome.error;
      rows.push(...outcome.found.slice(0, wanted - rows.length));
      if (rows.length >= wanted) break;
      continue;
    }
    if (!halves) {
      rows.push(...(await within((tx) => read(tx, slice, limit))));
    } else {
      let farther: { cancel(): unknown } | undefined;
      let cancelled = false;
      let fartherEnded = false;
      let cancelling: Promise<unknown> | undefined;
      // A cancel reaches the connection's backend, not the statement: one that lands after the
      // statement ended cancels whatever that connection runs next, another request's read (seen
      // as a 503 long before QUERY_TIMEOUT_MS with twelve searches on eight connections). So it is
      // sent only while the statement runs, and the farther half keeps its connection until
      // PostgreSQL has taken the cancel (postgres.js's cancel() returns that promise: patches/).
      const cancel = () => {
        cancelled = true;
        if (farther && !fartherEnded) cancelling = Promise.resolve(farther.cancel()).catch(() => {});
      };
      // The farther half's outcome is taken as a value as soon as it settles: it may fail while the
      // nearer half still reads, and a rejection nothing handles yet ends the process. Its error
      // counts only if the page needs that half.
      const second: Promise<Half> = half(1, () =>
        within(async (tx) => {
          if (cancelled) return []; // the nearer half filled the page before this one began
          const statement = read(tx, halves[1], limit);
          farther = statement;
          try {
            return await statement;
          } finally {
            fartherEnded = true;
            if (cancelling) await atMost(cancelling, CANCEL_DELIVERY_MS);
          }
        }),
      ).then(
        (found) => ({ found }),
        (error: unknown) => ({ error }),
      );
      try {
        rows.push(...(await half(0, () => within((tx) => read(tx, halves[0], limit)))));
      } catch (error) {
        cancel();
        await second; // no statement outlives its request
        throw error;
      }
      if (rows.length >= wanted) {
        cancel();
        await second;
        break;
      }
      const outcome = await second;
      if ("error" in outcome) throw outcome.error;
      rows.push(...outcome.found.slice(0, wanted - rows.length));
    }
    if (rows.length >= wanted) break;
  }
  const more = rows.length > request.batch;
  const kept = more ? rows.slice(0, request.batch) : rows;
  const last = kept[kept.length - 1];
  // The rows' text is jsonb's; each event's keys go back into the order they were sent. A page
  // whose read used up QUERY_TIMEOUT_MS keeps jsonb's order rather than fail.
  await within((tx) => showInSentOrder(tx, kept, "row")).catch((error: unknown) => {
    if (!(error instanceof AppError && error.reason === "query_timeout")) throw error;
  });
  return { rows: kept.map((r) => r.row), next: more && last ? { dt: last.dt, id: last.id } : undefined };
}

/** `dt` (YYYY-MM-DDTHH:MM:SS.ffffffZ) `delta` (±1) microseconds later. */
export function shiftMicros(dt: string, delta: 1 | -1): string {
  const micro = Number(dt.slice(20, 26)) + delta;
  if (micro >= 0 && micro <= 999_999) return `${dt.slice(0, 20)}${String(micro).padStart(6, "0")}Z`;
  const second = new Date(Date.parse(`${dt.slice(0, 19)}Z`) + delta * 1000).toISOString().slice(0, 19);
  return `${second}.${delta > 0 ? "000000" : "999999"}Z`;
}

/** A half's rows, or what it failed with. */
type Half = { found: { id: string; dt: string; row: string }[] } | { error: unknown };

/** How long a cancelled half keeps its connection for PostgreSQL to take the cancel (a connect and one message). */
const CANCEL_DELIVERY_MS = 1_000;

/** With a query, the newest hot chunks holding this many pages' events each cut a slice (readEvents). */
const HOT_STEPS_WITH_QUERY = [10, 100, 1_000, 10_000];

const SLICE_MS = [10_000, 60_000, 300_000, 1_800_000, 10_800_000, 86_400_000, 604_800_000];
/** A slice at least this long is read as two halves at once (readEvents). */
export const SPLIT_FROM_MS = 3_600_000;

export interface Slice {
  lower: string;
  lowerOp: ">=" | ">";
  upper: string;
  upperOp: "<=" | "<";
}

/** `slice` as its nearer and farther halves (from the page's start), or undefined when shorter than SPLIT_FROM_MS. */
export function split(slice: Slice, newest: boolean): [Slice, Slice] | undefined {
  const ms = (dt: string) => Date.parse(`${dt.slice(0, 23)}Z`);
  const lower = ms(slice.lower),
    upper = ms(slice.upper);
  if (upper - lower < SPLIT_FROM_MS) return undefined;
  const mid = micros(new Date(Math.floor((lower + upper) / 2)).toISOString());
  // Newest first the halves meet as (mid, upper] and [lower, mid]; oldest first as [lower, mid) and [mid, upper].
  const older: Slice = { lower: slice.lower, lowerOp: slice.lowerOp, upper: mid, upperOp: newest ? "<=" : "<" };
  const newer: Slice = { lower: mid, lowerOp: newest ? ">" : ">=", upper: slice.upper, upperOp: slice.upperOp };
  return newest ? [newer, older] : [older, newer];
}

/**
 * Contiguous sub-windows of [from, to], starting where the page starts and growing away from it.
 * Newest first, `anchors` (dts inside the window, before the page's start, in any order) cut the
 * first ones there, newest first, and the growing ones start from the oldest of them.
 */
export function* slices(request: Pick<ReadRequest, "from" | "to" | "after">, newest: boolean, anchors: readonly string[] = []): Generator<Slice> {
  const at = (ms: number) => micros(new Date(ms).toISOString());
  const ms = (dt: string) => Date.parse(`${dt.slice(0, 23)}Z`);
  if (newest) {
    let upper = request.after && request.after.dt < request.to ? request.after.dt : request.to;
    let upperOp: "<=" | "<" = "<=";
    // PostgreSQL's texts of years 0001-9999: ordered as text as in time.
    for (const anchor of [...anchors].sort().reverse()) {
      if (anchor <= request.from || anchor >= upper) continue;
      yield { lower: anchor, lowerOp: ">", upper, upperOp };
      [upper, upperOp] = [anchor, "<="];
    }
    for (const width of SLICE_MS) {
      // Compared as milliseconds: past years 0001–9999 an ISO text no longer sorts as its time.
      if (ms(upper) - width <= ms(request.from)) break;
      const lower = at(ms(upper) - width);
      yield { lower, lowerOp: ">", upper, upperOp };
      [upper, upperOp] = [lower, "<="];
    }
    yield { lower: request.from, lowerOp: ">=", upper, upperOp };
  } else {
    let lower = request.after && request.after.dt > request.from ? request.after.dt : request.from;
    let lowerOp: ">=" | ">" = ">=";
    for (const width of SLICE_MS) {
      // Compared as milliseconds: a slice past 9999-12-31 ("+010000-…" sorts before "9999-…" as
      // text) is no time PostgreSQL reads.
      if (ms(lower) + width >= ms(request.to)) break;
      const upper = at(ms(lower) + width);
      yield { lower, lowerOp, upper, upperOp: "<" };
      [lower, lowerOp] = [upper, ">="];
    }
    yield { lower, lowerOp, upper: request.to, upperOp: "<=" };
  }
}

export async function readDeadLetters(
  sql: Sql,
  request: { sourceIds: number[]; batch: number; order: "newest_first" | "oldest_first"; afterId: string | undefined },
  timeoutMs: number,
): Promise<{ rows: string[]; nextId: string | undefined }> {
  const newest = request.order === "newest_first";
  const params: unknown[] = [request.sourceIds, request.batch + 1];
  if (request.afterId !== undefined) params.push(request.afterId);
  const text = deadLettersPage(newest, request.afterId !== undefined);
  const rows = await timed(sql, timeoutMs, (tx) => tx.unsafe<{ id: string; row: string }[]>(text, params as never[]));
  const more = rows.length > request.batch;
  const kept = more ? rows.slice(0, request.batch) : rows;
  return { rows: kept.map((r) => r.row), nextId: more ? kept[kept.length - 1]?.id : undefined };
}

/** The earliest time an event may have (codec/time.ts reads years 0001–9999). */
const EARLIEST_EVENT_MS = Date.parse("0001-01-01T00:00:00.000Z");

/** Probed before `from`, nearest first: most windows with older data find it in the first slice. */
const OLDER_SLICE_MS = [3_600_000, 86_400_000, 604_800_000, 2_592_000_000];

/**
 * Without a query, the newest event before $1 of the sources $2 from the blocks' rows, opening only
 * the blocks that span $1 (the GiST on (source_id, time range), drizzle/0013): the latest end of a
 * source's blocks that end before it (the (source_id, max_dt) B-tree, backwards, one entry per
 * source), the events before it in a block that spans it, and the hot rows. Opening every block of
 * the hour before `from` to find its newest event took 4.4 s at 20 M events (docs/storage.md).
 */
const NEWEST_BEFORE =
  "select to_char(greatest(" +
  `(select max(newest) from unnest($2::bigint[]) s(id), lateral (${newestBlockEndBefore("s.id", "$1")}) n), ` +
  `(select max(e.dt) from unnest($2::bigint[]) s(id), lateral (${blocksAcross("s.id", "$1")} offset 0) b ` +
  `${openedAs("e")} where e.dt < $1::text::timestamptz), ` +
  "(select h.dt from logpond_hot_newest($2::bigint[], $1::text::timestamptz) h)" +
  `) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt`;

/**
 * An empty page's "is there older data?": the dt of the newest event before `from` that the
 * request would match, or null when there is none. Slices step back from `from` (1 h, 1 d, 7 d,
 * 30 d, then the rest), so the common case scans one short slice; the worst case (nothing older
 * matches) is a scan of everything before `from`, cancelled at `timeoutMs` → undefined (unknown).
 */
export async function newestBefore(sql: Sql, request: ReadRequest, timeoutMs: number): Promise<string | null | undefined> {
  if (timeoutMs < 1) return undefined; // statement_timeout 0 would mean none
  if (!request.query) {
    try {
      return await timed(sql, timeoutMs, async (tx) => {
        const [row] = await tx.unsafe<{ dt: string | null }[]>(NEWEST_BEFORE, [request.from, request.sourceIds] as never[]);
        return row?.dt ?? null;
      });
    } catch (error) {
      if (error instanceof AppError && error.reason === "query_timeout") return undefined;
      throw error;
    }
  }
  const params: unknown[] = ["", "", request.sourceIds];
  const conditions = ["source_id = any($3::bigint[])"];
  if (request.query) {
    const condition = compileQuery(request.query, params.length + 1, "line");
    params.push(...condition.params);
    conditions.push(condition.text);
  }
  const events = tiers(params, "$3::bigint[]", "$2::text::timestamptz", "$1::text::timestamptz", request.query);
  const from = Date.parse(`${request.from.slice(0, 23)}Z`);
  // None before year 0001: PostgreSQL reads no year 0 (what toISOString writes there).
  const bounds = [
    ...OLDER_SLICE_MS.filter((width) => from - width > EARLIEST_EVENT_MS).map((width) => micros(new Date(from - width).toISOString())),
    undefined,
  ];
  try {
    const deadline = performance.now() + timeoutMs;
    return await timed(sql, timeoutMs, async (tx) => {
      let upper = request.from;
      for (const lower of bounds) {
        const left = Math.floor(deadline - performance.now());
        if (left < 1) return undefined;
        await tx`select set_config('statement_timeout', ${String(left)}, true)`;
        params[0] = upper;
        params[1] = lower ?? "-infinity";
        const found = await tx.unsafe<{ dt: string }[]>(
          `select ${DT_TEXT} as dt from ${events} e where dt < $1::text::timestamptz and dt >= $2::text::timestamptz ` +
            `and ${conditions.join(" and ")} order by e.dt desc limit 1`,
          params as never[],
        );
        if (found[0]) return found[0].dt;
        if (lower === undefined) break;
        upper = lower;
      }
      return null;
    });
  } catch (error) {
    if (error instanceof AppError && error.reason === "query_timeout") return undefined;
    throw error;
  }
}

/** Blocks per call to a scan thread: a few MB of text to open, and a deadline checked between calls. */
export const SCAN_BATCH_BLOCKS = 8;

/**
 * The events of the v4 blocks that may hold matches (logpond_blocks_matching, read by a cursor)
 * matched on the scan threads inside [lower, upper] (closed) and past the cursor: the `limit`
 * nearest the page's start, in its order. QUERY_TIMEOUT_MS is checked between the batches (opening
 * is no statement: statement_timeout does not see it).
 */
async function scanBlocks(
  tx: Sql,
  scans: ScanPool,
  read: {
    sourceIds: number[];
    lower: string;
    upper: string;
    after: Position | undefined;
    newest: boolean;
    limit: number;
    query: Node;
    deadline: number;
    timeoutMs: number;
    /** True once the page no longer needs this read: it stops between batches. */
    abandoned: () => boolean;
  },
): Promise<Found[]> {
  const order = read.newest ? -1 : 1;
  let best: Found[] = [];
  await scans.spread(
    candidateBlocks(tx, read.sourceIds, read.lower, read.upper, read.query),
    (batch) =>
      scans.match({
        ...blockBatch(batch),
        lowerUs: String(unixMicros(read.lower)),
        upperUs: String(unixMicros(read.upper)),
        after: read.after && { us: String(unixMicros(read.after.dt)), id: read.after.id },
        newest: read.newest,
        limit: read.limit,
        query: read.query,
      }),
    (found) => {
      best = [...best, ...found].sort((a, b) => order * compareEvents(a, b)).slice(0, read.limit);
    },
    () => {
      if (read.abandoned()) throw new Error("the page was filled by the nearer half");
      if (performance.now() >= read.deadline) throw queryTimeout(read.timeoutMs);
    },
  );
  return best;
}

/**
 * The v4 blocks that may hold matches of `query` in [lower, upper] (closed), as the scan threads
 * open them (logpond_blocks_matching), by a cursor of SCAN_BATCH_BLOCKS. In binary format
 * (postgres.js's binary(), patches/postgres+3.4.9.patch): a payload comes as its bytes, not as hex
 * text this thread would decode (0.6 ms of 1,000-event block, on the one thread that answers HTTP);
 * each is copied out of the socket's buffer, which a view would send whole to a scan thread.
 */
export async function* candidateBlocks(tx: Sql, sourceIds: number[], lower: string, upper: string, query: Node | undefined): AsyncGenerator<Candidate[]> {
  const needs = prefilter(query);
  const cursor = tx
    .unsafe(
      "select source_id::text as source_id, min_id::text as min_id, min_us::text as min_us, payload " +
        "from logpond_blocks_matching($1::bigint[], $2::text::timestamptz, $3::text::timestamptz, $4::bigint[], $5::bigint[])",
      [sourceIds, lower, upper, needs.grams, needs.nums] as never[],
    )
    .binary()
    .cursor(SCAN_BATCH_BLOCKS);
  for await (const rows of cursor) {
    yield rows.map(([source, minId, minUs, payload]) => ({
      source_id: source!.toString("latin1"),
      min_id: minId!.toString("latin1"),
      min_us: minUs!.toString("latin1"),
      payload: Buffer.from(payload!),
    }));
  }
}

/** (dt, id) ascending; dts as DT_TEXT prints them (fixed width: ordered as text for years 0001-9999). */
const compareEvents = (a: { dt: string; id: string }, b: { dt: string; id: string }) => (a.dt === b.dt ? Number(a.id) - Number(b.id) : a.dt < b.dt ? -1 : 1);

/**
 * The hot tier's rows of a slice (with their row text) and the blocks' events the threads found,
 * as the `limit` nearest the page's start in its order; the blocks' rows are built by PostgreSQL
 * as the page's query builds a row (so their text is the same to the byte).
 */
async function mergePage(tx: Sql, hot: { id: string; dt: string; row: string }[], found: Found[], newest: boolean, limit: number) {
  const order = newest ? -1 : 1;
  const page = [...hot.map((row) => ({ ...row, found: undefined })), ...found.map((event) => ({ id: event.id, dt: event.dt, row: "", found: event }))]
    .sort((a, b) => order * compareEvents(a, b))
    .slice(0, limit);
  const built = page.filter((entry) => entry.found !== undefined);
  if (built.length > 0) {
    const rows = await tx.unsafe<{ row: string }[]>(
      `select (e.line::jsonb || jsonb_build_object('dt', ${DT_TEXT}, 'source_id', e.source_id::text, 'id', e.id::text))::text as row ` +
        "from unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) with ordinality e(id, source_id, dt_text, line, n) " +
        "cross join lateral (select e.dt_text::timestamptz as dt) t order by e.n",
      [
        built.map((entry) => entry.id),
        built.map((entry) => entry.found!.source),
        built.map((entry) => entry.dt),
        built.map((entry) => entry.found!.line),
      ] as never[],
    );
    built.forEach((entry, i) => {
      entry.row = rows[i]!.row;
    });
  }
  return page.map(({ id, dt, row }) => ({ id, dt, row }));
}

/**
 * A read of both tiers in one snapshot (store/snapshot.ts), so that a seal or a merge between its
 * statements moves nothing out of its sight or into it twice: the v4 blocks that may hold matches
 * of `window.query` in [from, to] (candidateBlocks) go to the scan threads by `call`, each answer
 * to `take`; then `rest` reads the other tiers (besideScans) in the same snapshot. QUERY_TIMEOUT_MS
 * is checked between the batches and bounds `rest`'s statements; a timeout is a query_timeout.
 */
export async function scanThenRest<A, T>(
  sql: Sql,
  window: { sourceIds: number[]; from: string; to: string; query: Node | undefined },
  timeoutMs: number,
  scans: ScanPool,
  call: (batch: Candidate[]) => Promise<A>,
  take: (answer: A) => void,
  rest: (tx: Sql) => Promise<T>,
  /** True once no more blocks are needed (ScanPool.spread's `done`). */
  done?: () => boolean,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  const left = () => {
    const ms = Math.floor(deadline - performance.now());
    if (ms < 1) throw queryTimeout(timeoutMs);
    return String(ms);
  };
  try {
    return await inSnapshot(sql, Number(left()), async (tx) => {
      await scans.spread(candidateBlocks(tx, window.sourceIds, window.from, window.to, window.query), call, take, left, done);
      await tx`select set_config('statement_timeout', ${left()}, true)`;
      return rest(tx);
    });
  } catch (error) {
    if ((error as { code?: string }).code === "57014") throw queryTimeout(timeoutMs);
    throw error;
  }
}

/** A v4 block candidateBlocks gives: its source, first id, first event's time (µs since the Unix epoch, decimal text) and payload. */
export interface Candidate {
  source_id: string;
  min_id: string;
  min_us: string;
  payload: Buffer;
}

/** Candidates as a scan thread's call carries them (query/scan.ts). */
export function blockBatch(batch: Candidate[]): BlockBatch {
  return {
    payloads: batch.map((block) => block.payload),
    minUs: batch.map((block) => block.min_us),
    minIds: batch.map((block) => block.min_id),
    sources: batch.map((block) => block.source_id),
  };
}

/**
 * tiers() beside the scan threads: the same events less those of v4 blocks (the threads read
 * those): logpond_events_matching_in with `payloads` false, whatever the query's needles. Adds its parameters.
 */
export function besideScans(params: unknown[], sources: string, from: string, to: string, query: Node | undefined): string {
  const needs = prefilter(query);
  params.push(needs.grams, needs.nums, needs.ilikes, needs.likes);
  const n = params.length;
  return `logpond_events_matching_in(${sources}, ${from}, ${to}, $${n - 3}::bigint[], $${n - 2}::bigint[], $${n - 1}::text[], $${n}::text[], false)`;
}

/**
 * The set-returning function that reads both tiers for these sources and window: hot rows, and the
 * lines of the blocks whose time range meets it; with a query, only blocks (and lines) that hold
 * what the query needs (query/prefilter.ts; drizzle/0005_sealed_blocks.sql, 0007). Adds its parameters.
 */
export function tiers(params: unknown[], sources: string, from: string, to: string, query: Node | undefined): string {
  const needs = prefilter(query);
  if (needs.needles.length === 0) return `logpond_events_between(${sources}, ${from}, ${to})`;
  params.push(needs.grams, needs.nums, needs.ilikes, needs.likes);
  const n = params.length;
  return `logpond_events_matching(${sources}, ${from}, ${to}, $${n - 3}::bigint[], $${n - 2}::bigint[], $${n - 1}::text[], $${n}::text[])`;
}

/** Runs `work` in a transaction whose statements are cancelled after `timeoutMs`. */
export async function timed<T>(sql: Sql, timeoutMs: number, work: (tx: Sql) => Promise<T>): Promise<T> {
  try {
    return (await sql.begin(async (tx) => {
      await tx`select set_config('statement_timeout', ${String(timeoutMs)}, true)`;
      return work(tx as unknown as Sql);
    })) as T;
  } catch (error) {
    if ((error as { code?: string }).code === "57014") throw queryTimeout(timeoutMs);
    throw error;
  }
}

/** What is left of `timeoutMs` since `started` (performance.now()); a query_timeout when nothing is. */
export function leftOf(timeoutMs: number, started: number): number {
  const left = Math.floor(timeoutMs - (performance.now() - started));
  if (left < 1) throw queryTimeout(timeoutMs);
  return left;
}

/** The 503 of a read cancelled at `timeoutMs` (QUERY_TIMEOUT_MS). */
export function queryTimeout(timeoutMs: number): AppError {
  return new AppError(
    "query_timeout",
    `the query took longer than ${timeoutMs} ms (QUERY_TIMEOUT_MS) and was cancelled; narrow from/to, the sources or the query`,
  );
}
