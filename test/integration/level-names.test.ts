// One table of level names (src/query/levels.ts) over real HTTP and the real PostgreSQL: the rows
// of `level:error` are exactly the events the histogram counts as "error" — syslog's `err`,
// OpenTelemetry's `ERROR`/`ERROR2` (sent through POST /v1/logs with only a severity number),
// pino's 50, any case — with or without the query, with per-minute block summaries and line by
// line, while the events are hot, once they are sealed, and with both tiers at once. Also the new
// forms and a refusal through the query API.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { tiers } from "../helpers/sealing";

let db: ScratchDatabase;
let lp: TestLogpond;
let source: TestSource;
beforeAll(async () => {
  db = await createScratchDatabase("level_names");
  await runMigrations(db.url);
  // The timer never fires during the test: it seals when it chooses.
  lp = await startTestLogpond({ DATABASE_URL: db.url, SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource();
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

// Whole minutes well inside the window the requests ask for, so sealed blocks lie inside it.
const BASE = Math.floor((Date.now() - 40 * 60_000) / 60_000) * 60_000;
const WINDOW = `from=${encodeURIComponent(new Date(BASE - 10 * 60_000).toISOString())}&to=${encodeURIComponent(new Date(BASE + 30 * 60_000).toISOString())}`;

/** Events of one batch: the errors under every name they come by, and others that must not count. */
function batch(tag: string, minute: number): Record<string, unknown>[] {
  const dt = (k: number) => new Date(BASE + minute * 60_000 + k * 1000).toISOString();
  const errors = ["error", "ERROR", "err", "Err", 50, "50", "ERROR3", "severe"].map((level, k) => ({ dt: dt(k), level, message: `${tag} error ${k}` }));
  const others = ["info", "INFO", 30, "warning", "errors", "fatal", "crit", ""].map((level, k) => ({ dt: dt(20 + k), level, message: `${tag} other ${k}` }));
  return [...errors, ...others, { dt: dt(40), message: `${tag} no level` }];
}

/** OpenTelemetry records with a severity number and no text: stored with OTLP's short name as the level. */
async function sendOtlp(tag: string, minute: number): Promise<void> {
  const at = (k: number) => String(BigInt(BASE + minute * 60_000 + 50_000 + k) * 1_000_000n);
  const records = [17, 18, 9].map((severityNumber, k) => ({ timeUnixNano: at(k), severityNumber, body: { stringValue: `${tag} otel ${severityNumber}` } }));
  const response = await fetch(`${lp.ingestUrl}/v1/logs`, {
    method: "POST",
    headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json" },
    body: JSON.stringify({ resourceLogs: [{ resource: { attributes: [] }, scopeLogs: [{ scope: {}, logRecords: records }] }] }),
  });
  expect(response.status).toBe(200);
}

async function send(tag: string, minute: number): Promise<void> {
  expect((await lp.ingest(source.token, JSON.stringify(batch(tag, minute)))).status).toBe(202);
  await sendOtlp(tag, minute);
  await lp.flusher.flush();
}

async function rows(query: string): Promise<string[]> {
  const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&${WINDOW}&batch=1000&query=${encodeURIComponent(query)}`);
  expect(response.status).toBe(200);
  const body = (await response.json()) as { data: { message: string }[] };
  return body.data.map((row) => row.message).sort();
}

async function histogram(query: string, buckets: number): Promise<{ total: number; levels: Record<string, number> }> {
  const response = await lp.api("GET", `/api/v2/query/histogram?source_ids=${source.id}&${WINDOW}&buckets=${buckets}&query=${encodeURIComponent(query)}`);
  expect(response.status).toBe(200);
  const body = (await response.json()) as { data: { levels: Record<string, number> }[]; meta: { total: number; complete: boolean } };
  expect(body.meta.complete).toBe(true);
  const levels: Record<string, number> = {};
  for (const bucket of body.data) for (const [level, n] of Object.entries(bucket.levels)) levels[level] = (levels[level] ?? 0) + n;
  return { total: body.meta.total, levels };
}

/** What each tag's batch holds that `level:error` must find: 8 names of an error, and OTLP's 17 and 18. */
const errorsOf = (tag: string) => [...Array.from({ length: 8 }, (_, k) => `${tag} error ${k}`), `${tag} otel 17`, `${tag} otel 18`];

async function expectAgreement(tags: string[]): Promise<void> {
  const errors = tags.flatMap(errorsOf).sort();
  for (const query of ["level:error", "level=ERROR", "level:err", "level:50"]) expect({ query, rows: await rows(query) }).toEqual({ query, rows: errors });
  // 40 buckets of a minute (blocks inside the window counted from their per-minute summaries) and
  // 400 of 6 seconds (every event read line by line): the same counts.
  for (const buckets of [40, 400]) {
    const all = await histogram("", buckets);
    expect({ buckets, error: all.levels.error }).toEqual({ buckets, error: errors.length });
    expect(all.levels).toEqual({ error: 10 * tags.length, info: 4 * tags.length, warn: tags.length, fatal: 2 * tags.length, errors: tags.length });
    const filtered = await histogram("level:error", buckets);
    expect({ buckets, filtered }).toEqual({ buckets, filtered: { total: errors.length, levels: { error: errors.length } } });
  }
  const others = await rows("-level:error");
  expect(others.length).toBe(tags.length * 10);
  expect(others.filter((message) => errors.includes(message))).toEqual([]);
}

test("level:error finds err, ERROR, OpenTelemetry's numbers and pino's 50 in rows and histogram alike, hot, sealed and both", async () => {
  await send("a", 5);
  expect(await tiers(db.sql as never, Number(source.id))).toMatchObject({ hot: 20, sealed: 0 });
  await expectAgreement(["a"]);

  await lp.sealer.sealNow();
  expect(await tiers(db.sql as never, Number(source.id))).toMatchObject({ hot: 0, sealed: 20 });
  await expectAgreement(["a"]);

  await send("b", 12);
  expect(await tiers(db.sql as never, Number(source.id))).toMatchObject({ hot: 20, sealed: 20 });
  await expectAgreement(["a", "b"]);
});

test("the new forms through the query API, and a form it does not take: a 400 that says what to write", async () => {
  expect(await rows("message:/^a (error|otel) 1[78]?$/")).toEqual(["a error 1", "a otel 17", "a otel 18"]);
  // other 2 is pino's 30: info.
  expect(await rows('message=~"other [2-4]$" -level:info')).toEqual(["a other 3", "a other 4", "b other 3", "b other 4"]);
  // A prefix is the level's own text: 50 and severe are not in it, `errors` is.
  expect(await rows("level:err* message:b*")).toEqual(["b error 0", "b error 1", "b error 2", "b error 3", "b error 6", "b otel 17", "b otel 18", "b other 4"]);
  // An empty level is there; only the events without one are not.
  expect(await rows("-level:*")).toEqual(["a no level", "b no level"]);
  expect(await rows('/"level": 50/')).toEqual(["a error 4", "b error 4"]);
  for (const [query, says] of [
    ["_exists_:err", "write err:* for events with the field"],
    ["level:[a TO b]", "ranges"],
    ["/a\\bb/", "word boundaries are not accepted"],
  ] as const) {
    const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&query=${encodeURIComponent(query)}`);
    expect(response.status).toBe(400);
    expect(JSON.stringify(await response.json())).toContain(says);
  }
});
