// GET /api/v2/query/aggregate: counts and statistics over the events of some sources that match a
// query in a window, read as the histogram reads them (both tiers through query/read.ts `tiers`,
// the query compiled by query/sql.ts, one QUERY_TIMEOUT_MS): the top N values of one field or of a
// pair (the rest summed as "other"), the top values of several fields each on its own (`facets`:
// the page's field sidebar), a count of distinct values, min/max/avg/percentiles of a numeric field;
// `by`, the count and the statistics optionally per histogram bucket. One statement: the window's
// events are read once. `level` is counted by severity through the one table of level names, as
// search and the histogram do.
import { unixMicros } from "../codec/time";
import { AppError } from "../errors";
import { LEVEL_MAX_CHARS } from "../store/blocks";
import type { Sql } from "../store/db";
import { BUCKETS_MAX, bucketSeconds } from "./histogram";
import { aliasObject } from "./levels";
import type { Node } from "./parse";
import { besideScans, blockBatch, type Candidate, leftOf, queryTimeout, scanThenRest, tiers, timed } from "./read";
import { FIELD_PATH, FIELD_PATH_MAX_CHARS, listParam, micros, readQuery, readSourceIds, readWindow, refuseUnknown, single } from "./request";
import { type Tallies, TallyTotals, TooManyTallies, VALUE_MAX_CHARS } from "./scan";
import type { ScanPool } from "./scan-pool";
import { compileQuery } from "./sql";

export const TOP_DEFAULT = 10;
export const TOP_MAX = 100;
export const FACETS_MAX = 10;
/** The most a caller may cap the events counted at (`max_events`). */
export const MAX_EVENTS_MAX = 100_000_000;
export const PERCENTILES = [0.5, 0.9, 0.95, 0.99] as const;

export interface AggregateRequest {
  sourceIds: number[];
  malformed: string[];
  query: Node | undefined;
  from: string;
  to: string;
  by: string[];
  facets: string[];
  distinct: string | undefined;
  field: string | undefined;
  top: number;
  buckets: number | undefined;
  /** Count at most this many matching events (the first read); past it the answer is marked partial. */
  maxEvents: number | undefined;
  /**
   * Per bucket, also count apart the events that have none of the `by` fields and whose null is not
   * in `by.top` (`missing`; they stay in `other` too). Not a parameter: the histogram by a field
   * (query/histogram-by.ts) draws them in the bucket's count only.
   */
  missing?: boolean;
}

const bad = (message: string) => new AppError("bad_request", message);

/** What the route takes: anything else is a 400 (query/request.ts, refuseUnknown). */
const PARAMETERS = ["source_ids", "query", "from", "to", "by", "facets", "distinct", "field", "top", "buckets", "max_events"] as const;

/** Field paths, comma-separated; `by` and `facets` over repeats too (`by=a&by=b` is `by=a,b`), `distinct` and `field` sent once. */
function readPaths(url: URL, name: string, max: number): string[] {
  const raw = max === 1 ? single(url, name) : listParam(url, name);
  if (raw === null || raw === "") return [];
  const paths = raw.split(",").map((path) => path.trim());
  const wrong = paths.filter((path) => path.length > FIELD_PATH_MAX_CHARS || !FIELD_PATH.test(path));
  if (wrong.length) throw bad(`${name} must be field paths such as level or http.status, comma-separated (got ${JSON.stringify(wrong[0]!.slice(0, 64))})`);
  if (paths.length > max) throw bad(`${name} takes at most ${max} field${max === 1 ? "" : "s"} (got ${paths.length})`);
  return paths;
}

function readWhole(url: URL, name: string, max: number): number | undefined {
  const raw = single(url, name);
  if (raw === null || raw === "") return undefined;
  if (!/^[0-9]{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
    throw bad(`${name} must be a whole number from 1 to ${max} (got ${JSON.stringify(raw.slice(0, 32))})`);
  return Number(raw);
}

export function readAggregateRequest(url: URL, now: () => Date = () => new Date()): AggregateRequest {
  refuseUnknown(url, "aggregate", PARAMETERS);
  const { ids, malformed } = readSourceIds(url);
  const query = readQuery(url);
  const by = readPaths(url, "by", 2);
  const facets = readPaths(url, "facets", FACETS_MAX);
  const [distinct] = readPaths(url, "distinct", 1);
  const [field] = readPaths(url, "field", 1);
  const topGiven = readWhole(url, "top", TOP_MAX);
  const top = topGiven ?? TOP_DEFAULT;
  const buckets = readWhole(url, "buckets", BUCKETS_MAX);
  const rawMax = single(url, "max_events");
  let maxEvents: number | undefined;
  if (rawMax !== null && rawMax !== "") {
    if (!/^[0-9]{1,9}$/.test(rawMax) || Number(rawMax) < 1 || Number(rawMax) > MAX_EVENTS_MAX)
      throw bad(`max_events must be a whole number from 1 to ${MAX_EVENTS_MAX} (got ${JSON.stringify(rawMax.slice(0, 32))})`);
    maxEvents = Number(rawMax);
  }
  if (!by.length && !facets.length && !distinct && !field && !buckets) {
    throw bad(
      "say what to aggregate: by=<field>[,<field>] (top values), facets=<field>,… (top values of each), distinct=<field>, field=<numeric field> (min, max, avg, percentiles), or buckets=<n> (counts over time)",
    );
  }
  // A top that nothing lists would be silently dropped: the caller meant a ranking it did not ask for.
  if (topGiven !== undefined && !by.length && !facets.length) throw bad("top applies to by= and facets= (the values ranked); add one, or leave top out");
  const { from, to } = readWindow(url, now());
  return { sourceIds: ids, malformed, query, from, to, by, facets, distinct, field, top, buckets, maxEvents };
}

export interface Stats {
  count: number;
  min: number | null;
  max: number | null;
  avg: number | null;
  p50: number | null;
  p90: number | null;
  p95: number | null;
  p99: number | null;
}

export interface Aggregate {
  data: {
    count: number;
    by?: { fields: string[]; top: { values: (string | null)[]; count: number }[]; other: number; groups: number };
    facets?: { field: string; present: number; distinct: number; top: { value: string; count: number }[]; other: number }[];
    distinct?: { field: string; count: number };
    stats?: Stats & { field: string };
    buckets?: { from: string; to: string; count: number; top?: number[]; other?: number; missing?: number; stats?: Stats }[];
  };
  meta: {
    from: string;
    to: string;
    bucket_seconds: number | null;
    /** false: not every matching event of the window was counted, and `partial` says why. */
    complete: boolean;
    partial?: { reason: "max_events"; max_events: number };
  };
}

/** The statement's answer: one row of JSON texts (postgres.js would parse json; text keeps bigints exact). */
type Row = { more: boolean; total: string; by: string | null; facets: string | null; distinct: string | null; stats: string | null; buckets: string | null };

export async function readAggregate(sql: Sql, request: AggregateRequest, timeoutMs: number, scans?: ScanPool): Promise<Aggregate> {
  const paths = countedPaths(request);
  if (paths) return readCounted(sql, request, paths, timeoutMs);
  // The v4 blocks (those the query's filters let through) are tallied on the scan threads
  // (query/scan.ts tallyBlocks) and the statement reads the other tiers, the threads' tallies added
  // as weighted rows. A cap counts the first events in storage order: the blocks' in the order the
  // threads are given them, then the hot tier's and v3 blocks' (capped below).
  const threads = scans;
  const params: unknown[] = [request.from, request.to, request.sourceIds];
  let filter = "";
  if (request.query) {
    const condition = compileQuery(request.query, params.length + 1, "line");
    params.push(...condition.params);
    filter = ` and ${condition.text}`;
  }
  const window = ["$3::bigint[]", "$1::text::timestamptz", "$2::text::timestamptz"] as const;
  const events = threads ? besideScans(params, ...window, request.query) : tiers(params, ...window, request.query);
  const { param, value, threaded } = expressions(params);
  // An integer past a double's range (kept exact as numeric) is left out, as a non-number is:
  // casting it would fail the whole statement.
  const number = (text: string, isNumber: string) =>
    `case when ${isNumber} then case when abs((${text})::numeric) < 1e308 then (${text})::float8 end when (${text}) ~ '^\\s*-?[0-9]{1,30}(\\.[0-9]{1,30})?\\s*$' then (${text})::float8 end`;
  const size = request.buckets ? bucketSeconds(request.from, request.to, request.buckets) : null;
  // Each row of `e` stands for `n` events (1 for an event read here, a tally's events for the
  // threads'); a facet's values are each their own weighted rows (w_f<i>), the threads' apart.
  const at = (path: string) => param(path.split("."), "text[]");
  const rest = [
    ...request.by.map((path, i) => `${value(path)} as b${i}`),
    ...request.facets.map((path, i) => `${value(path)} as f${i}`),
    ...(request.distinct ? [`${value(request.distinct)} as d`] : []),
    ...(request.field ? [`${number(`raw #>> ${at(request.field)}`, `jsonb_typeof(raw #> ${at(request.field)}) = 'number'`)} as x`] : []),
    ...(size ? [`floor(extract(epoch from dt) / ${size})::bigint as bucket`] : []),
    "1::bigint as n",
  ];
  const read = `select ${rest.join(", ")} from ${events} where dt >= $1::text::timestamptz and dt <= $2::text::timestamptz and source_id = any($3::bigint[])${filter}`;
  const tallies = threads ? new TallyTotals(request.by.length, request.facets.length, threads.maxTallies) : undefined;
  /** The threads' rows, made once their tallies are in (their arrays are the statement's last parameters). */
  const fromThreads = () => {
    if (!tallies) return { joint: "", facets: request.facets.map(() => "") };
    const { joint, facets } = tallies.totals;
    const array = (values: unknown[], type: string) => param(values, `${type}[]`);
    const columns = [
      ...request.by.map((path, i) => `${threaded(path, `j.b${i}`)} as b${i}`),
      ...request.facets.map((_, i) => `null::text as f${i}`),
      ...(request.distinct ? [`${threaded(request.distinct, "j.d")} as d`] : []),
      ...(request.field ? [`${number("j.x", "j.number::boolean")} as x`] : []),
      ...(size ? ["j.bucket"] : []),
      "j.n",
    ];
    const unnest = [
      `${array(joint.buckets, "bigint")}`,
      ...joint.by.map((values) => array(values, "text")),
      array(joint.distinct, "text"),
      array(joint.field, "text"),
      // As text: postgres.js sends a JS array of booleans as one boolean.
      array(
        joint.numbers.map((yes) => (yes ? "t" : "f")),
        "text",
      ),
      array(joint.counts, "bigint"),
    ];
    const names = ["bucket", ...request.by.map((_, i) => `b${i}`), "d", "x", "number", "n"];
    return {
      joint: ` union all select ${columns.join(", ")} from unnest(${unnest.join(", ")}) j(${names.join(", ")})`,
      facets: facets.map(
        (facet, i) =>
          ` union all select ${threaded(request.facets[i]!, "v.value")}, v.n from unnest(${array(facet.values, "text")}, ${array(facet.counts, "bigint")}) v(value, n)`,
      ),
    };
  };
  /** With a cap: the matches the threads tallied, and whether they saw one past the cap. */
  const capped = { taken: 0, more: false };
  const statement = () => {
    const added = fromThreads();
    // With a cap, one event more than what is left of it is read, to tell "exactly the cap" from
    // "more than it"; the counts are of the first `maxEvents` (storage order: no sort of the
    // whole window first).
    const left = request.maxEvents === undefined ? 0 : request.maxEvents - capped.taken;
    const ctes =
      request.maxEvents === undefined
        ? [`e as materialized (${read}${added.joint})`]
        : [
            `capped as materialized (${read} limit ${param(left + 1, "bigint")})`,
            `e as materialized ((select * from capped limit ${param(left, "bigint")})${added.joint})`,
          ];
    request.facets.forEach((_, i) => ctes.push(`w_f${i} as (select v, n from (select f${i} as v, n from e${added.facets[i]}) w where v is not null)`));
    // Statistics over each event's value once: a weighted row's value n times.
    if (request.field) ctes.push(`xs as (select x${size ? ", bucket" : ""} from e cross join lateral generate_series(1, e.n) where x is not null)`);
    const top = request.by.length || request.facets.length ? param(request.top, "int") : "";
    const byCols = request.by.map((_, i) => `b${i}`);
    const same = (a: string, b: string) => byCols.map((c) => `${a}.${c} is not distinct from ${b}.${c}`).join(" and ");
    if (request.by.length) {
      ctes.push(`g as (select ${byCols.join(", ")}, sum(n) as n from e group by ${byCols.join(", ")})`);
      ctes.push(
        `t as (select ${byCols.join(", ")}, n, row_number() over (order by n desc, ${byCols.map((c) => `${c} nulls last`).join(", ")}) - 1 as rank from g order by n desc, ${byCols.map((c) => `${c} nulls last`).join(", ")} limit ${top})`,
      );
    }
    const total = "(select coalesce(sum(n), 0) from e)";
    // avg in numeric: float8's avg also sums the squares, which overflow past 1e154 (a 500).
    const stats =
      `json_build_object('count', count(x), 'min', min(x), 'max', max(x), 'avg', avg(x::numeric)::float8, ` +
      `'p', percentile_cont(array[${PERCENTILES.join(", ")}]::float8[]) within group (order by x))`;
    const selects = [
      `${request.maxEvents === undefined ? "false" : capped.more ? "true" : `(select count(*) from capped) > ${left}`} as more`,
      `${total}::text as total`,
      request.by.length ? bySelect(byCols, total) : "null as by",
      request.facets.length
        ? facetsSelect(
            request.facets.map((_, i) => `w_f${i}`),
            top,
          )
        : "null as facets",
      request.distinct ? "(select count(distinct d) from e)::text as distinct" : "null as distinct",
      request.field ? `(select ${stats} from xs)::text as stats` : "null as stats",
      size
        ? `(select json_agg(json_build_array(bc.bucket, bc.n, ${request.by.length ? "bb.ranks" : "null"}, ${request.field ? "bs.stats" : "null"}) order by bc.bucket)::text ` +
          `from (select bucket, sum(n) as n from e group by bucket) bc` +
          (request.by.length
            ? ` left join (select gb.bucket, json_agg(json_build_array(coalesce(t.rank, case when ${byCols.map((c) => `gb.${c} is null`).join(" and ")} then -2 else -1 end), gb.c)) as ranks from ` +
              `(select bucket, ${byCols.join(", ")}, sum(n) as c from e group by bucket, ${byCols.join(", ")}) gb left join t on ${same("gb", "t")} group by gb.bucket) bb using (bucket)`
            : "") +
          (request.field ? ` left join (select bucket, ${stats} as stats from xs group by bucket) bs using (bucket)` : "") +
          ") as buckets"
        : "null as buckets",
    ];
    return `with ${ctes.join(", ")} select ${selects.join(", ")}`;
  };
  if (!threads) {
    const text = statement();
    const [row] = await timed(sql, timeoutMs, (tx) => tx.unsafe<Row[]>(text, params as never[]));
    return shape(request, row!, size);
  }
  const fromUs = String(unixMicros(request.from));
  const toUs = String(unixMicros(request.to));
  const tally = (batch: Candidate[], limit?: number) =>
    threads.tally({
      ...blockBatch(batch),
      fromUs,
      toUs,
      bucketSeconds: size,
      query: request.query,
      by: request.by,
      distinct: request.distinct,
      field: request.field,
      facets: request.facets,
      limit,
    });
  const cap = request.maxEvents === undefined ? undefined : inOrder(request.maxEvents, capped, tally, (answer) => tallies!.add(answer));
  const started = performance.now();
  const rows = await scanThenRest(
    sql,
    { sourceIds: request.sourceIds, from: request.from, to: request.to, query: request.query },
    timeoutMs,
    threads,
    cap ? cap.call : (batch) => tally(batch).then((answer) => ({ index: 0, answer })),
    cap ? cap.take : ({ answer }) => tallies!.add(answer),
    async (tx) => {
      await cap?.finish();
      return tx.unsafe<Row[]>(statement(), params as never[]);
    },
    cap?.done,
  ).catch((error: unknown) => {
    if (!(error instanceof TooManyTallies)) throw error;
    return undefined;
  });
  if (rows === undefined) {
    // Too many values to add up here: PostgreSQL reads every match, in what is left of the time.
    try {
      return await readAggregate(sql, request, leftOf(timeoutMs, started));
    } catch (error) {
      throw error instanceof AppError && error.reason === "query_timeout" ? queryTimeout(timeoutMs) : error;
    }
  }
  return shape(request, rows[0]!, size);
}

/**
 * A capped count's batches taken in the order they were given to the threads, whatever order the
 * threads answer in, until `max` matches are taken: each call tallies at most one match more than
 * was left when it went (so a batch that holds more than is left says so); the batch that crosses
 * the cap is tallied again, after the others, up to what is left of it (`finish`). `state.more`:
 * a match past the cap was seen. Batches past the cap are not read (`done`).
 */
function inOrder(
  max: number,
  state: { taken: number; more: boolean },
  tally: (batch: Candidate[], limit: number) => Promise<Tallies>,
  add: (answer: Tallies) => void,
) {
  const batches: (Candidate[] | undefined)[] = [];
  const answers: (Tallies | undefined)[] = [];
  let next = 0;
  let cut: { batch: Candidate[]; limit: number } | undefined;
  return {
    call: (batch: Candidate[]) => {
      const index = batches.push(batch) - 1;
      return tally(batch, max - state.taken + 1).then((answer) => ({ index, answer }));
    },
    take: ({ index, answer }: { index: number; answer: Tallies }) => {
      answers[index] = answer;
      for (; answers[next] !== undefined; next++) {
        const { matched } = answers[next]!;
        if (!state.more && state.taken + matched <= max) {
          add(answers[next]!);
          state.taken += matched;
        } else if (!state.more) {
          state.more = true;
          if (state.taken < max) cut = { batch: batches[next]!, limit: max - state.taken };
        }
        answers[next] = undefined;
        batches[next] = undefined;
      }
    },
    done: () => state.more,
    async finish() {
      if (!cut) return;
      const answer = await tally(cut.batch, cut.limit);
      add(answer);
      state.taken += answer.matched;
      cut = undefined;
    },
  };
}

/** The `by` answer's column: the ranked groups of `t` (columns `cols`, weight `n`), the total, and how many groups `g` holds. */
const bySelect = (cols: string[], total: string) =>
  `(select json_build_object('top', (select coalesce(json_agg(json_build_array(json_build_array(${cols.join(", ")}), n) order by rank), '[]') from t), ` +
  `'total', ${total}, 'groups', (select count(*) from g))::text) as by`;

/** The `facets` answer's column: for each facet's weighted values (tables of `v`, `n`), the events with a value, its distinct values and its top ones. */
const facetsSelect = (streams: string[], top: string) =>
  `(select json_agg(json_build_object('i', i, 'present', present, 'distinct', distinct_n, 'top', top) order by i)::text from (${streams
    .map(
      (w, i) =>
        `select ${i} as i, (select coalesce(sum(n), 0) from ${w} where v is not null) as present, (select count(distinct v) from ${w}) as distinct_n, ` +
        `(select coalesce(json_agg(json_build_array(v, n) order by n desc, v), '[]') from (select v, sum(n) as n from ${w} where v is not null group by 1 order by 2 desc, 1 limit ${top}) s) as top`,
    )
    .join(" union all ")}) f) as facets`;

/** Parameters added as a part uses them (PostgreSQL refuses one it cannot type), and a field's value as text (also query/histogram-by.ts). */
export function expressions(params: unknown[]) {
  const param = (value: unknown, cast: string) => {
    params.push(value);
    return `$${params.length}::${cast}`;
  };
  let aliasParam: string | undefined;
  const aliases = () => (aliasParam ??= param(JSON.stringify(aliasObject()), "jsonb"));
  // A field's value from its text (`raw #>> path`): `level` by severity (as search and the
  // histogram count it), others as PostgreSQL prints them (objects and arrays as JSON), cut to
  // VALUE_MAX_CHARS. A block summary's values are that text too (store/summary.ts).
  const fromText = (path: string, text: string) => {
    if (path === "level") {
      const lowered = `nullif(lower(left(${text}, ${LEVEL_MAX_CHARS})), '')`;
      return `coalesce(${aliases()} ->> ${lowered}, ${lowered})`;
    }
    return `left(${text}, ${VALUE_MAX_CHARS})`;
  };
  const value = (path: string) => {
    // A row's source_id, id and dt are logpond's (they replace sent fields of those names in the
    // query API's rows), so they are counted from the columns, as the rows show them.
    if (path === "source_id" || path === "id") return `${path}::text`;
    if (path === "dt") return `to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
    return fromText(path, path === "level" ? "raw->>'level'" : `raw #>> ${param(path.split("."), "text[]")}`);
  };
  /** A field's value from the scan threads' text (query/scan.ts fieldValue) in `column`: made as `value` makes PostgreSQL's. */
  const threaded = (path: string, column: string) => (path === "source_id" || path === "id" || path === "dt" ? column : fromText(path, column));
  return { param, value, fromText, threaded };
}

/**
 * The fields an aggregation can count from block summaries (store/summary.ts), or undefined when
 * it must read every event: a query (its matches are per event), a cap (the first events in
 * storage order), a pair (summaries count each field alone), distinct values or statistics.
 */
function countedPaths(request: AggregateRequest): string[] | undefined {
  if (request.query || request.maxEvents !== undefined || request.distinct || request.field || request.by.length > 1) return undefined;
  const paths = [...new Set([...request.by, ...request.facets])];
  if (paths.length === 0 || paths.some((path) => path === "source_id" || path === "id" || path === "dt")) return undefined;
  return paths;
}

/**
 * readAggregate without a query: a block that lies inside the window (and one bucket) and whose
 * summary knows every field asked is counted from its summary; the rest — hot rows, the window's
 * edges, blocks whose values are too many — is read as readAggregate reads it. Each field's counts
 * are one weighted stream (value, events, bucket) of both, so the answer is the one reading every
 * event would give.
 */
async function readCounted(sql: Sql, request: AggregateRequest, paths: string[], timeoutMs: number): Promise<Aggregate> {
  const params: unknown[] = [request.from, request.to, request.sourceIds];
  const { param, fromText, value } = expressions(params);
  const size = request.buckets ? bucketSeconds(request.from, request.to, request.buckets) : null;
  const prefixes = [...new Set(paths.flatMap((path) => path.split(".").map((_, i, parts) => parts.slice(0, i + 1).join("."))))];
  const args = `$3::bigint[], $1::text::timestamptz, $2::text::timestamptz, ${param(paths, "text[]")}, ${param(prefixes, "text[]")}, ${size ? param(size, "numeric") : "null::numeric"}`;
  const bucketOf = (dt: string) => (size ? `floor(extract(epoch from ${dt}) / ${size})::bigint` : "null::bigint");
  const dims = [...request.by.map((path, i) => ({ path, col: `b${i}` })), ...request.facets.map((path, i) => ({ path, col: `f${i}` }))];
  const ctes = [
    `e as materialized (select ${["dt", ...dims.map((d) => `${value(d.path)} as ${d.col}`), `${bucketOf("dt")} as bucket`].join(", ")} ` +
      `from logpond_events_uncounted(${args}) where dt >= $1::text::timestamptz and dt <= $2::text::timestamptz and source_id = any($3::bigint[]))`,
    `s as materialized (select n, counts, ${bucketOf("min_dt")} as bucket from logpond_block_summaries(${args}))`,
    // Per field: each event read (weight 1), each summarised value (its count) and each block's
    // events without the field (null: what its counts leave of n).
    ...dims.map(({ path, col }) => {
      const at = param(path, "text");
      return (
        `w_${col} as (select ${col} as v, 1::bigint as n, bucket from e union all select x.v, x.n, s.bucket from s cross join lateral (` +
        `select ${fromText(path, "k.key")} as v, k.value::bigint as n from jsonb_each_text(s.counts -> ${at}) k ` +
        `union all select null, s.n - coalesce((select sum(k.value::bigint) from jsonb_each_text(s.counts -> ${at}) k), 0)) x where x.n > 0)`
      );
    }),
  ];
  const total = "((select count(*) from e) + (select coalesce(sum(n), 0) from s))";
  const top = param(request.top, "int");
  if (request.by.length) {
    ctes.push("g as (select v as b0, sum(n) as n from w_b0 group by v)");
    ctes.push("t as (select b0, n, row_number() over (order by n desc, b0 nulls last) - 1 as rank from g order by n desc, b0 nulls last limit " + top + ")");
  }
  const selects = [
    "false as more",
    `${total}::text as total`,
    request.by.length ? bySelect(["b0"], total) : "null as by",
    request.facets.length
      ? facetsSelect(
          request.facets.map((_, i) => `w_f${i}`),
          top,
        )
      : "null as facets",
    "null as distinct",
    "null as stats",
    size
      ? `(select json_agg(json_build_array(bc.bucket, bc.n, ${request.by.length ? "bb.ranks" : "null"}, null) order by bc.bucket)::text ` +
        "from (select bucket, sum(n) as n from (select bucket, count(*) as n from e group by bucket union all select bucket, sum(n) from s group by bucket) u group by bucket) bc" +
        (request.by.length
          ? " left join (select gb.bucket, json_agg(json_build_array(coalesce(t.rank, case when gb.b0 is null then -2 else -1 end), gb.c)) as ranks from " +
            "(select bucket, v as b0, sum(n) as c from w_b0 group by bucket, v) gb left join t on gb.b0 is not distinct from t.b0 group by gb.bucket) bb using (bucket)"
          : "") +
        ") as buckets"
      : "null as buckets",
  ];
  const text = `with ${ctes.join(", ")} select ${selects.join(", ")}`;
  const [row] = await timed(sql, timeoutMs, (tx) => tx.unsafe<Row[]>(text, params as never[]));
  return shape(request, row!, size);
}

type RawStats = { count: number; min: number | null; max: number | null; avg: number | null; p: (number | null)[] | null };
const stats = (raw: RawStats): Stats => ({
  count: raw.count,
  min: raw.min,
  max: raw.max,
  avg: raw.avg,
  p50: raw.p?.[0] ?? null,
  p90: raw.p?.[1] ?? null,
  p95: raw.p?.[2] ?? null,
  p99: raw.p?.[3] ?? null,
});

function shape(request: AggregateRequest, row: Row, size: number | null): Aggregate {
  const count = Number(row.total);
  const data: Aggregate["data"] = { count };
  if (row.by) {
    const by = JSON.parse(row.by) as { top: [(string | null)[], number][]; total: number; groups: number };
    const top = by.top.map(([values, n]) => ({ values, count: n }));
    data.by = { fields: request.by, top, other: by.total - top.reduce((sum, t) => sum + t.count, 0), groups: by.groups };
  }
  if (row.facets) {
    const facets = JSON.parse(row.facets) as { i: number; present: number; distinct: number; top: [string, number][] }[];
    data.facets = facets.map((f) => {
      const top = f.top.map(([value, n]) => ({ value, count: n }));
      return { field: request.facets[f.i]!, present: f.present, distinct: f.distinct, top, other: f.present - top.reduce((sum, t) => sum + t.count, 0) };
    });
  }
  if (request.distinct) data.distinct = { field: request.distinct, count: Number(row.distinct) };
  if (request.field && row.stats) data.stats = { field: request.field, ...stats(JSON.parse(row.stats) as RawStats) };
  if (size) {
    const per = new Map((JSON.parse(row.buckets ?? "[]") as [number, number, [number, number][] | null, RawStats | null][]).map((b) => [Number(b[0]), b]));
    const first = Math.floor(Date.parse(`${request.from.slice(0, 23)}Z`) / 1000 / size);
    const last = Math.floor(Date.parse(`${request.to.slice(0, 23)}Z`) / 1000 / size);
    const at = (index: number) => micros(new Date(index * size * 1000).toISOString());
    const empty: RawStats = { count: 0, min: null, max: null, avg: null, p: null };
    data.buckets = [];
    for (let index = first; index <= last; index++) {
      const b = per.get(index);
      const bucket: NonNullable<Aggregate["data"]["buckets"]>[number] = { from: at(index), to: at(index + 1), count: b?.[1] ?? 0 };
      if (data.by) {
        bucket.top = data.by.top.map(() => 0);
        bucket.other = 0;
        if (request.missing) bucket.missing = 0;
        // Rank -1: a value past the top; -2: no value at all (null), past the top too.
        for (const [rank, n] of b?.[2] ?? []) {
          if (rank >= 0) bucket.top[rank] = n;
          else bucket.other += n;
          if (rank === -2 && bucket.missing !== undefined) bucket.missing += n;
        }
      }
      if (request.field) bucket.stats = stats(b?.[3] ?? empty);
      data.buckets.push(bucket);
    }
  }
  const meta: Aggregate["meta"] = { from: request.from, to: request.to, bucket_seconds: size, complete: !row.more };
  if (row.more) meta.partial = { reason: "max_events", max_events: request.maxEvents! };
  return { data, meta };
}
