// GET /api/v2/query/aggregate counted from block summaries (store/summary.ts) against reading every
// event: a request without a query (or a cap, a pair, distinct, statistics) counts whole blocks from
// their summaries and reads the rest. Its answer must be the one reading every event gives; here
// that answer is asked with max_events far past the window's count (a cap turns summaries off).
// The events are sent as hand-written JSON text with what a summary must not get wrong: numbers
// PostgreSQL prints otherwise than a double (200.0, 99.999…), arrays indexed by a path, keys with
// dots, long and many values, nesting past the summary's depth, level by severity.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { tiers } from "../helpers/sealing";
import { aggregator, countedBySummaries } from "../helpers/summaries";
import { rng } from "../../bench/corpus";

const BASE = Date.parse("2025-10-01T00:00:00.000Z");
const DAY = 86_400_000;
const SEALED = 2_600; // over two days: 3 blocks a day, cut in (dt, id) order
const HOT = 300;

let lp: TestLogpond;
let source: TestSource;

const LEVELS = ['"info"', '"INFO"', '"Err"', '"error"', '"warn"', '""', '"debug"', "3", '"' + "E".repeat(50) + '"'];
const STATUS = ["200", "200.0", "404", "500", "99.99999999999999999999", "1e2", '"200"', "true", "null", "[200]", '{"code": 200}', "-0", "1.5"];

function event(r: () => number, n: number, dt: number): string {
  const pick = <T>(items: T[]) => items[Math.floor(r() * items.length)]!;
  const members: string[] = [`"dt": "${new Date(dt).toISOString()}"`, `"n": ${n}`];
  if (r() < 0.9) members.push(`"level": ${pick(LEVELS)}`);
  members.push(`"http": {"status": ${pick(STATUS)}, "method": ${pick(['"GET"', '"POST"', '"PUT"'])}}`);
  // Few values in the first day's blocks, past VALUES_MAX in the second day's.
  members.push(`"region": "r${Math.floor(r() * (dt < BASE + DAY ? 4 : 40))}"`);
  if (r() < 0.5) members.push(r() < 0.5 ? `"tags": ["a", "b"]` : `"tags": {"0": "zero", "1": 1}`);
  if (r() < 0.3) members.push(`"a.b": "dotted"`);
  if (r() < 0.5) members.push(`"a": {"b": ${pick(['"x"', '"y"', "7"])}}`);
  if (r() < 0.2) members.push(`"__proto__": "p${Math.floor(r() * 3)}"`);
  members.push(`"d1": {"d2": {"d3": {"d4": {"d5": "${pick(["deep", "deeper"])}"}}}}`);
  if (r() < 0.3) members.push(`"note": "${pick(["x".repeat(80), "short", 'with \\"quotes\\" and \\n', "ünïcödé ✓"])}"`);
  members.push(`"user": "u${Math.floor(r() * 500)}"`);
  // Numbers' texts (ingestion stores each as a double prints it: 200.0 as 200) and a string of one.
  members.push(`"st": ${pick(["200", "200.0", "404", "1e2", "-0", "100", '"100"', "1E3", "99.99999999999999999999"])}`);
  if (r() < 0.1) members.push(`"flag": ${pick(["true", "false", "null"])}`);
  return `{${members.join(", ")}}`;
}

beforeAll(async () => {
  // The row journal: two tests below change hot rows by SQL before they are sealed.
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000", HOT_TIER: "rows" });
  source = await lp.createSource({ logs_retention: 3652 });
  const r = rng(7);
  const lines = (from: number, count: number, span: number) =>
    Array.from({ length: count }, (_, i) => event(r, from + i, BASE + Math.floor(((from + i) * span) / (SEALED + HOT))));
  const post = async (body: string[]) => expect((await lp.ingest(source.token, body.join("\n"), { "content-type": "application/x-ndjson" })).status).toBe(202);
  const sealed = lines(0, SEALED, 2 * DAY);
  for (let i = 0; i < sealed.length; i += 500) await post(sealed.slice(i, i + 500));
  await lp.flusher.flush();
  await lp.sealer.sealNow();
  await post(lines(SEALED, HOT, 2 * DAY));
  await lp.flusher.flush();
  expect(await tiers(lp.sql, Number(source.id))).toMatchObject({ hot: HOT, sealed: SEALED });
});

afterAll(async () => {
  await lp?.stop();
});

const aggregate = (params: Record<string, string>) => aggregator(lp, source.id)(params);
const counted = (paths: string[], from: string, to: string, bucketSeconds: number | null) =>
  countedBySummaries(lp.sql, source.id, paths, from, to, bucketSeconds);

const WHOLE = { from: new Date(BASE - 1000).toISOString(), to: new Date(BASE + 2 * DAY).toISOString() };
// Cuts the first day's middle block and the second day's last one.
const CUT = { from: new Date(BASE + DAY / 2).toISOString(), to: new Date(BASE + DAY + DAY * 0.9).toISOString() };
const PATHS = [
  "st",
  "level",
  "http.status",
  "http.method",
  "http",
  "region",
  "tags",
  "tags.0",
  "a.b",
  "a",
  "__proto__",
  "d1.d2.d3",
  "d1.d2.d3.d4.d5",
  "note",
  "user",
  "flag",
  "missing.field",
];

test.each(PATHS)("by=%s: the same answer as reading every event, over whole blocks and cut ones, with and without buckets", async (path) => {
  for (const window of [WHOLE, CUT]) {
    for (const buckets of [undefined, "24"]) {
      const params: Record<string, string> = { ...window, by: path, top: "100", ...(buckets ? { buckets } : {}) };
      const summed = await aggregate(params);
      const read = await aggregate({ ...params, max_events: "100000000" });
      expect(summed).toEqual(read);
      expect(summed.meta.complete).toBe(true);
    }
  }
});

test("facets: every field's top values, present and distinct counts as reading every event gives them", async () => {
  for (const window of [WHOLE, CUT]) {
    const params = { ...window, facets: "level,http.method,region,a.b,tags.1,flag", top: "5" };
    expect(await aggregate(params)).toEqual(await aggregate({ ...params, max_events: "100000000" }));
  }
});

test("the summaries do the counting: whole blocks are counted without being opened", async () => {
  // Every sealed block lies inside WHOLE and knows level, http.method and a.b.
  for (const path of ["level", "st", "http.method", "a.b", "flag", "missing.field"]) expect(await counted([path], WHOLE.from, WHOLE.to, null)).toBe(SEALED);
  // region has too many values on the second day; anything at or under an array is never summarised.
  const region = await counted(["region"], WHOLE.from, WHOLE.to, null);
  expect(region).toBeGreaterThan(0);
  expect(region).toBeLessThan(SEALED);
  for (const path of ["tags", "tags.0", "http.status", "http", "user", "note", "d1.d2.d3.d4.d5"])
    expect(await counted([path], WHOLE.from, WHOLE.to, null)).toBe(0);
  // A window that cuts blocks counts fewer of them; so do buckets narrower than a block.
  const cut = await counted(["level"], CUT.from, CUT.to, null);
  expect(cut).toBeGreaterThan(0);
  expect(cut).toBeLessThan(SEALED);
  expect(await counted(["level"], WHOLE.from, WHOLE.to, 60)).toBe(0);
});

test("logpond_block_counted is inlined into the functions that read blocks, not called once per block", async () => {
  // A SQL function is inlined only when its body's functions are no more volatile than it says it
  // is: extract(epoch from timestamptz) is STABLE, so an IMMUTABLE logpond_block_counted is called
  // (an executor call per block) and its conditions cannot be planned with the caller's.
  const args = `${"$"}1::bigint[], ${"$"}2::timestamptz, ${"$"}3::timestamptz, array['level'], array['level'], 60::numeric`;
  for (const fn of ["logpond_block_summaries", "logpond_events_uncounted"]) {
    const plan = await lp.sql.unsafe<{ "QUERY PLAN": string }[]>(`explain verbose select count(*) from ${fn}(${args})`, [
      `{${source.id}}`,
      WHOLE.from,
      WHOLE.to,
    ] as never[]);
    const text = plan.map((row) => row["QUERY PLAN"]).join("\n");
    expect({ fn, called: text.includes("logpond_block_counted(") }).toEqual({ fn, called: false });
  }
  // The query API's reads go through logpond_events_uncounted too (null paths): inlined as well,
  // so their WHERE, ORDER BY and LIMIT apply inside it.
  const plan = await lp.sql.unsafe<{ "QUERY PLAN": string }[]>(
    `explain verbose select id from logpond_events_between(${"$"}1::bigint[], ${"$"}2::timestamptz, ${"$"}3::timestamptz) order by dt desc limit 10`,
    [`{${source.id}}`, WHOLE.from, WHOLE.to] as never[],
  );
  const text = plan.map((row) => row["QUERY PLAN"]).join("\n");
  expect({ functionScan: /Function Scan on (public\.)?logpond_events_/.test(text), called: text.includes("logpond_block_counted(") }).toEqual({
    functionScan: false,
    called: false,
  });
});

test("a number PostgreSQL keeps that a double reads as -0 (-1e-400, written by SQL) is counted as reading every event counts it", async () => {
  // Ingestion stores numbers as doubles print them; a row written or changed by SQL keeps any
  // numeric, and the block sealed from it holds jsonb's text ("-0.000…1").
  const other = await lp.createSource({ logs_retention: 3652 });
  const lines = Array.from({ length: 40 }, (_, i) => JSON.stringify({ dt: new Date(BASE + i * 1000).toISOString(), s: 0 }));
  expect((await lp.ingest(other.token, lines.join("\n"), { "content-type": "application/x-ndjson" })).status).toBe(202);
  await lp.flusher.flush();
  await lp.sql`update log_hot set raw = jsonb_set(raw, '{s}', '-1e-400'::jsonb) where source_id = ${Number(other.id)} and (raw->>'dt') < ${new Date(BASE + 10_000).toISOString()}`;
  await lp.sealer.sealNow();
  expect(await tiers(lp.sql, Number(other.id))).toMatchObject({ hot: 0, sealed: 40 });
  const search = (extra: Record<string, string>) => new URLSearchParams({ source_ids: other.id, ...WHOLE, by: "s", ...extra });
  const summed = (await (await lp.api("GET", `/api/v2/query/aggregate?${search({})}`)).json()) as any;
  const read = (await (await lp.api("GET", `/api/v2/query/aggregate?${search({ max_events: "100000000" })}`)).json()) as any;
  expect(read.data.by.top).toHaveLength(2);
  expect(summed).toEqual(read);
});

test("an event that is a JSON array (written by SQL) is counted as reading every event counts it: `raw #>> '{0}'` is its first element", async () => {
  // Ingestion takes objects only; a row written or changed by SQL may hold any JSON value, and
  // #>> indexes a top-level array by a path whose first key is a number.
  const other = await lp.createSource({ logs_retention: 3652 });
  const lines = Array.from({ length: 40 }, (_, i) => JSON.stringify({ dt: new Date(BASE + i * 1000).toISOString(), 0: "key" }));
  expect((await lp.ingest(other.token, lines.join("\n"), { "content-type": "application/x-ndjson" })).status).toBe(202);
  await lp.flusher.flush();
  await lp.sql`update log_hot set raw = '["first", "second"]'::jsonb where source_id = ${Number(other.id)} and (raw->>'dt') < ${new Date(BASE + 10_000).toISOString()}`;
  await lp.sql`update log_hot set raw = '"a string"'::jsonb where source_id = ${Number(other.id)} and (raw->>'dt') >= ${new Date(BASE + 30_000).toISOString()}`;
  await lp.sealer.sealNow();
  expect(await tiers(lp.sql, Number(other.id))).toMatchObject({ hot: 0, sealed: 40 });
  for (const by of ["0", "1", "0.x"]) {
    const search = (extra: Record<string, string>) => new URLSearchParams({ source_ids: other.id, ...WHOLE, by, ...extra });
    const summed = (await (await lp.api("GET", `/api/v2/query/aggregate?${search({})}`)).json()) as any;
    const read = (await (await lp.api("GET", `/api/v2/query/aggregate?${search({ max_events: "100000000" })}`)).json()) as any;
    expect({ by, answer: summed }).toEqual({ by, answer: read });
  }
});
