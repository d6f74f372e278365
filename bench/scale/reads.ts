// bench/scale.ts's reads and their peers: the query API timed (newest 100, searches over 24 h,
// histograms, context around random events), each search beside `grep -F` over the same NDJSON,
// and `zstd -3` of it for the size.
import { rmSync, statSync } from "node:fs";
import type postgres from "postgres";
import { fmt, progress } from "../lib";
import { type Plan, RARE_NUMBER } from "./corpus";
import { DAY_MS } from "./options";
import { AUTH, type Source } from "./service";

/** Reads are timed to their last byte; a 503 at QUERY_TIMEOUT_MS is a result, a hang is not. */
const READ_TIMEOUT_MS = 300_000;
/** The newest-100 reads are timed this many times (median), the 24 h searches 3. */
export const NEWEST_RUNS = 5;

// ---- peers ---------------------------------------------------------------------------------

export async function run(command: string[]): Promise<{ ms: number; code: number; stdout: string }> {
  const started = performance.now();
  const proc = Bun.spawn(command, { stdout: "pipe", stderr: "inherit" });
  const stdout = await new Response(proc.stdout as ReadableStream).text();
  const code = await proc.exited;
  return { ms: performance.now() - started, code, stdout };
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

export interface Grep {
  ms: number;
  count: number;
}

/** `grep -F -c [flags] text file` (`-E` among the flags: a regex): one run to warm the page cache, then the median of 3. */
export async function grep(file: string, text: string, flags: string[] = []): Promise<Grep> {
  const once = async () => {
    const result = await run(["grep", ...(flags.includes("-E") ? [] : ["-F"]), ...flags, "-c", "--", text, file]);
    if (result.code > 1) throw new Error(`grep exited with ${result.code}`);
    return { ms: result.ms, count: Number(result.stdout.trim()) };
  };
  await once();
  const runs = [await once(), await once(), await once()];
  return { ms: median(runs.map((r) => r.ms)), count: runs[0]!.count };
}

/** `zstd -3` of the file (one thread, as the CLI defaults): compressed size and time. */
export async function zstd(file: string): Promise<{ bytes: number; seconds: number } | string> {
  if ((await run(["sh", "-c", "command -v zstd"])).code !== 0) return "zstd not found: apt-get install zstd";
  const target = `${file}.zst`;
  try {
    const result = await run(["zstd", "-3", "-q", "-f", "-o", target, file]);
    if (result.code !== 0) return `zstd exited with ${result.code}`;
    return { bytes: statSync(target).size, seconds: result.ms / 1000 };
  } finally {
    rmSync(target, { force: true });
  }
}

// ---- reads ---------------------------------------------------------------------------------

export interface ReadSpec {
  name: string;
  sources: Source[];
  query?: string;
  from?: string;
  /** The same search over the NDJSON file, for the ratio. */
  grep?: string;
  /** `grep` is an extended regex (grep -E), not a fixed string. */
  grepRegex?: boolean;
  /** GET /api/v2/query/aggregate with by=<this>&top=10 over the window instead of a page (rows: values in the top). */
  aggregateBy?: string;
  /** Timed runs after the warm-up (the median is shown). */
  runs: number;
  /** GET /api/v2/query/histogram with this many buckets instead of a page (rows: buckets counted). */
  buckets?: number;
  /** The histogram's buckets split by this field's values instead of the level (`by`). */
  histogramBy?: string;
}

export interface ReadResult {
  spec: ReadSpec;
  status: string;
  ms: number;
  rows: number;
  grep?: Grep;
}

async function timedRead(url: string): Promise<{ status: number | string; ms: number; rows: number }> {
  const started = performance.now();
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, { headers: AUTH, signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
    text = await response.text();
  } catch (error) {
    // logpond closing the connection of a long read (its HTTP idle timeout) is a result too.
    return { status: (error as { code?: string }).code ?? "error", ms: performance.now() - started, rows: 0 };
  }
  const ms = performance.now() - started;
  if (response.status === 200) {
    // A histogram counted in part (QUERY_TIMEOUT_MS ran out): "200 partial", rows = buckets counted.
    // An aggregation: rows = values in its top.
    const body = JSON.parse(text) as { data: { count?: number | null }[] | { by?: { top: unknown[] } }; meta?: { complete?: boolean } };
    const rows = Array.isArray(body.data) ? body.data.filter((row) => row.count !== null).length : (body.data.by?.top.length ?? 0);
    return { status: body.meta?.complete === false ? "200 partial" : 200, ms, rows };
  }
  if (response.status !== 503) throw new Error(`${url}: ${response.status} ${text.slice(0, 300)}`);
  return { status: 503, ms, rows: 0 };
}

/** One warm-up, then the median of `runs`; the statuses of the runs (a 503 at QUERY_TIMEOUT_MS is a figure). */
export async function measureRead(apiUrl: string, spec: ReadSpec): Promise<ReadResult> {
  const params = new URLSearchParams({ source_ids: spec.sources.map((s) => s.id).join(",") });
  if (spec.buckets) params.set("buckets", String(spec.buckets));
  else if (spec.aggregateBy) params.set("by", spec.aggregateBy);
  else params.set("batch", "100");
  if (spec.histogramBy) params.set("by", spec.histogramBy);
  if (spec.aggregateBy) params.set("top", "10");
  if (spec.query) params.set("query", spec.query);
  if (spec.from) params.set("from", spec.from);
  const route = spec.buckets ? "histogram" : spec.aggregateBy ? "aggregate" : "live-tail";
  const url = `${apiUrl}/api/v2/query/${route}?${params}`;
  await timedRead(url);
  const runs: Awaited<ReturnType<typeof timedRead>>[] = [];
  for (let i = 0; i < spec.runs; i++) runs.push(await timedRead(url));
  const kinds = [...new Set(runs.map((r) => r.status))];
  const statuses = kinds.length === 1 ? String(kinds[0]) : kinds.map((k) => `${k} ×${runs.filter((r) => r.status === k).length}`).join(", ");
  const answered = runs.filter((r) => r.status === 200 || r.status === "200 partial");
  const result = { spec, status: statuses, ms: median(runs.map((r) => r.ms)), rows: answered.length ? answered[answered.length - 1]!.rows : 0 };
  progress(`read ${spec.name}: ${statuses}, ${fmt(result.ms, 1)} ms, ${result.rows} rows`);
  return result;
}

export function readSpecs(sources: Source[], split: number[], p: Plan): ReadSpec[] {
  const { dense, sparse } = denseAndSparse(sources, split);
  // The whole day of events, whenever the reads run: dts lie in (t0 − 24 h, t0].
  const from = new Date(p.t0 - DAY_MS - 1000).toISOString();
  const needle = p.needles[0]!;
  const part = needle.slice("req-needle-".length + 4, "req-needle-".length + 12);
  const absent = `req-absent-${Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")}`;
  const search = 3;
  return [
    { name: `newest 100, dense source (${dense.name}), default window`, sources: [dense], runs: NEWEST_RUNS },
    { name: `newest 100, sparse source (${sparse.name}), default window`, sources: [sparse], runs: NEWEST_RUNS },
    { name: `newest 100, dense source, 24 h window`, sources: [dense], from, runs: NEWEST_RUNS },
    { name: `newest 100, sparse source, 24 h window`, sources: [sparse], from, runs: NEWEST_RUNS },
    { name: "needle, bare word", sources, from, query: needle, grep: needle, runs: search },
    { name: "needle, field:value", sources, from, query: `request_id:${needle}`, grep: needle, runs: search },
    { name: "needle, field=value", sources, from, query: `request_id=${needle}`, grep: needle, runs: search },
    { name: "word matching nothing", sources, from, query: absent, grep: absent, runs: search },
    { name: "part of a word (8 hex inside the needle)", sources, from, query: part, grep: part, runs: search },
    { name: "rare number", sources, from, query: `http.bytes=${RARE_NUMBER}`, grep: `"bytes":${RARE_NUMBER}`, runs: search },
    { name: "frequent word, first page", sources, from, query: "timeout", grep: "timeout", runs: search },
    { name: "histogram of 24 h, 96 buckets", sources, from, buckets: 96, runs: search },
    { name: "histogram of 24 h, 96 buckets, with a query", sources, from, query: "timeout", grep: "timeout", buckets: 96, runs: search },
    // A regex on a field that one event matches: every line is a candidate (grep -E over the NDJSON beside it).
    {
      name: "regex on a field (one event)",
      sources,
      from,
      query: `request_id=~"^req-needle-${needle.slice(11, 15)}[0-9a-f]+$"`,
      grep: `"request_id":"req-needle-${needle.slice(11, 15)}[0-9a-f]+"`,
      grepRegex: true,
      runs: search,
    },
    { name: "top-10 count by a field (http.status)", sources, from, aggregateBy: "http.status", runs: search },
    { name: "top-10 count by a field under a frequent word (service, timeout)", sources, from, query: "timeout", aggregateBy: "service", runs: search },
    {
      name: "histogram of 24 h by a field under a query (http.status, http.method:POST)",
      sources,
      from,
      query: "http.method:POST",
      buckets: 96,
      histogramBy: "http.status",
      runs: search,
    },
  ];
}

/** The source with the largest share and the one with the smallest. */
export function denseAndSparse(sources: Source[], split: number[]): { dense: Source; sparse: Source } {
  return { dense: sources[split.indexOf(Math.max(...split))]!, sparse: sources[split.lastIndexOf(Math.min(...split))]! };
}

/** Context reads are timed around this many random events of a source (after one warm-up). */
export const CONTEXT_ANCHORS = 20;

/**
 * GET /api/v2/query/context (before=after=50) around random stored events of one source, each asked
 * with the row's dt and with its id only: the median and the slowest of each, and what was answered.
 */
export async function measureContext(apiUrl: string, sql: postgres.Sql, source: Source): Promise<string> {
  const anchors = await sql<{ id: string; dt: string }[]>`
    select id::text as id, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt
    from (select id, dt from logpond_hot_between(array[${source.id}::bigint], '-infinity', 'infinity')
      union all select u.id, u.dt from log_blocks b cross join lateral logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) as u where b.source_id = ${source.id} and b.generation is null) e
    order by random() limit ${CONTEXT_ANCHORS + 1}`;
  const times: Record<"dt" | "id", number[]> = { dt: [], id: [] };
  const rows: number[] = [];
  for (const [i, anchor] of anchors.entries()) {
    for (const variant of ["dt", "id"] as const) {
      const params = new URLSearchParams({ source_id: String(source.id), id: anchor.id, ...(variant === "dt" ? { dt: anchor.dt } : {}) });
      const started = performance.now();
      const response = await fetch(`${apiUrl}/api/v2/query/context?${params}`, { headers: AUTH, signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
      const text = await response.text();
      const ms = performance.now() - started;
      if (response.status !== 200) throw new Error(`context around ${anchor.id}: ${response.status} ${text.slice(0, 300)}`);
      if (i === 0) continue; // the warm-up
      times[variant].push(ms);
      rows.push((JSON.parse(text) as { data: unknown[] }).data.length);
    }
  }
  const summary = (ms: number[]) => `median ${fmt(median(ms), 1)} ms, max ${fmt(Math.max(...ms), 1)} ms`;
  return `${summary(times.dt)} / ${summary(times.id)} (${Math.min(...rows)}–${Math.max(...rows)} rows)`;
}
