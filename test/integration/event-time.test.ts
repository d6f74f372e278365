// The event-time window over real HTTP, for every body that carries an event time (JSON and
// MessagePack on `/`, OTLP as JSON and protobuf, Loki as JSON and snappy protobuf): an event
// whose time retention would delete by the next sweep, or which is too far ahead, is stored with
// its reception time as `dt` and the time it carried under `dt_sent`. Then a seal and a retention
// sweep as late as the next one can come: every acknowledged event is still there, the redated
// ones are in the last 30 minutes' view, and /metrics counts them by reason.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { pack } from "msgpackr";
import { DEFAULTS } from "../../src/config";
import { REDATED_FIELD, retentionGraceMs } from "../../src/codec/reception";
import { eventMicros, microsText } from "../../src/codec/time";
import { runMigrations } from "../../src/store/db";
import { DAY_MS } from "../../src/store/partitions";
import { sweep } from "../../src/retention/sweep";
import { sealAll } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { parseExposition, sampleValue } from "../helpers/prometheus";
import { anyValue, lokiProtobuf, otlpProtobuf } from "../helpers/protos";
import { eventTime, hex, map, str } from "../fixtures/shippers/fixture";
import { BIG_BODY_BYTES } from "../../src/memory/costs";

const GRACE_MS = retentionGraceMs(DEFAULTS.RETENTION_SWEEP_INTERVAL_MS, DEFAULTS.SEAL_INTERVAL_MS);
const AHEAD_MS = DEFAULTS.INGEST_MAX_FUTURE_MS;
const RETENTION_DAYS = 1;
/** How far inside or outside a bound the "just" cases are: far more than a request takes. */
const MARGIN_MS = 60_000;
const never = new AbortController().signal;

let db: ScratchDatabase;
let lp: TestLogpond;
beforeAll(async () => {
  db = await createScratchDatabase("event_time");
  await runMigrations(db.url);
  lp = await startTestLogpond({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await lp.stop();
  await db.drop();
});

type Reason = "too_old" | "too_far_ahead" | undefined;
/** One event to send: its name, the time it carries (ms since the epoch; undefined: none) and what becomes of it. */
interface Case {
  name: string;
  sent: number | undefined;
  reason: Reason;
}

/** The cases, relative to `now`: the bounds are the source's retention less the grace, and AHEAD_MS. */
function cases(now: number, year3000 = Date.UTC(3000, 0, 1)): Case[] {
  const oldest = now - RETENTION_DAYS * DAY_MS + GRACE_MS;
  return [
    { name: "epoch", sent: 0, reason: "too_old" },
    { name: "far_ahead", sent: year3000, reason: "too_far_ahead" },
    { name: "old_inside", sent: oldest + MARGIN_MS, reason: undefined },
    { name: "old_outside", sent: oldest - MARGIN_MS, reason: "too_old" },
    { name: "ahead_inside", sent: now + AHEAD_MS - MARGIN_MS, reason: undefined },
    { name: "ahead_outside", sent: now + AHEAD_MS + MARGIN_MS, reason: "too_far_ahead" },
    { name: "recent", sent: now - 5_000, reason: undefined },
  ];
}

const nanosOf = (ms: number) => (BigInt(ms) * 1_000_000n).toString();

/** How each protocol sends the cases and names the case back from the stored event. */
const PROTOCOLS: {
  label: string;
  protocol: string;
  /** OTLP and Loki carry nanoseconds in 64 bits (until 2554): their far case is in 2500. */
  far?: number;
  send(token: string, events: Case[]): Promise<Response>;
  nameOf(raw: any): string;
}[] = [
  {
    label: "JSON",
    protocol: "better_stack",
    send: (token, events) =>
      lp.ingest(
        token,
        JSON.stringify(
          events.map((e) => ({ case: e.name, ...(e.sent === undefined ? {} : { dt: e.name === "far_ahead" ? "3000-01-01T00:00:00Z" : e.sent }) })),
        ),
      ),
    nameOf: (raw) => raw.case,
  },
  {
    label: "MessagePack",
    protocol: "better_stack",
    // MessagePack timestamps (Dates) and a plain 0.
    send: (token, events) =>
      lp.ingest(token, pack(events.map((e) => ({ case: e.name, ...(e.sent === undefined ? {} : { dt: e.sent === 0 ? 0 : new Date(e.sent) }) }))), {
        "content-type": "application/msgpack",
      }),
    nameOf: (raw) => raw.case,
  },
  {
    label: "OTLP/JSON",
    protocol: "otlp",
    far: Date.UTC(2500, 0, 1),
    send: (token, events) => postOtlp(token, "application/json", JSON.stringify(otlpRequest(events, true))),
    nameOf: (raw) => raw.message,
  },
  {
    label: "OTLP/protobuf",
    protocol: "otlp",
    far: Date.UTC(2500, 0, 1),
    send: (token, events) => postOtlp(token, "application/x-protobuf", otlpProtobuf(otlpRequest(events, false))),
    nameOf: (raw) => raw.message,
  },
  {
    label: "Loki/JSON",
    protocol: "loki",
    far: Date.UTC(2500, 0, 1),
    send: (token, events) =>
      postLoki(token, "application/json", JSON.stringify({ streams: [{ stream: { job: "t" }, values: events.map((e) => [lokiNanos(e.sent!), e.name]) }] })),
    nameOf: (raw) => raw.message,
  },
  {
    label: "Loki/protobuf",
    protocol: "loki",
    far: Date.UTC(2500, 0, 1),
    send: (token, events) =>
      postLoki(
        token,
        "application/x-protobuf",
        lokiProtobuf({
          streams: [
            {
              labels: '{job="t"}',
              entries: events.map((e) => ({
                timestamp: { seconds: Math.floor(e.sent! / 1000), nanos: (e.sent! % 1000) * 1e6 + (e.sent === 0 ? 1 : 0) },
                line: e.name,
              })),
            },
          ],
        }),
      ),
    nameOf: (raw) => raw.message,
  },
];

/** OTLP's 0 is "unknown" (then the observed time, else the reception time): the epoch case is its first nanosecond. */
function otlpRequest(events: Case[], json: boolean) {
  const time = (e: Case) => (e.sent === undefined ? "0" : e.sent === 0 ? "1" : nanosOf(e.sent));
  return json
    ? { resourceLogs: [{ scopeLogs: [{ logRecords: events.map((e) => ({ timeUnixNano: time(e), body: { stringValue: e.name } })) }] }] }
    : { resource_logs: [{ scope_logs: [{ log_records: events.map((e) => ({ time_unix_nano: time(e), body: anyValue(e.name) })) }] }] };
}

/** Loki needs a timestamp on every entry, and refuses 0: the epoch case is its first nanosecond. */
const lokiNanos = (ms: number) => (ms === 0 ? "1" : nanosOf(ms));

const postOtlp = (token: string, type: string, body: NonNullable<RequestInit["body"]>) =>
  fetch(`${lp.ingestUrl}/v1/logs`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": type }, body });
const postLoki = (token: string, type: string, body: NonNullable<RequestInit["body"]>) =>
  fetch(`${lp.ingestUrl}/loki/api/v1/push`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": type }, body });

/** The time a case carried, as logpond reads it (the epoch case of OTLP and Loki is 1 ns past it). */
function sentText(protocol: string, e: Case): string {
  const micros = eventMicros(protocol !== "better_stack" && e.sent === 0 ? "1970-01-01T00:00:00.000000001Z" : e.sent === 0 ? 0 : new Date(e.sent!));
  return microsText(micros!);
}

/** Events stored for a source in this test's database (everything acknowledged flushed first), whichever tier. */
async function stored(sourceId: string): Promise<{ dt: Date; raw: any }[]> {
  await lp.flusher.flush();
  return db.sql<{ dt: Date; raw: any }[]>`select dt, raw from log_events where source_id = ${Number(sourceId)} order by id`;
}

async function metricsNow() {
  return parseExposition(await (await fetch(`${lp.apiUrl}/metrics`)).text());
}

test("every protocol: events out of the window are redated, kept through the next seal and sweep, found in the last 30 minutes, counted", async () => {
  const sent: { source: TestSource; kind: (typeof PROTOCOLS)[number]; events: Case[]; before: number; after: number }[] = [];
  for (const kind of PROTOCOLS) {
    const source = await lp.createSource({ logs_retention: RETENTION_DAYS });
    const now = Date.now();
    const events = cases(now, kind.far);
    if (kind.protocol !== "loki") events.push({ name: "none", sent: undefined, reason: undefined });
    const before = Date.now();
    const response = await kind.send(source.token, events);
    const after = Date.now();
    expect(response.status, `${kind.label}: ${await response.clone().text()}`).toBeLessThan(300);
    sent.push({ source, kind, events, before, after });
  }
  await lp.flusher.flush();

  // The sealer drops what has expired when it seals; the next sweep comes at most GRACE_MS later.
  await sealAll(db.sql);
  await sweep(db.sql, never, () => {}, new Date(Date.now() + GRACE_MS));

  const families = await metricsNow();
  for (const { source, kind, events, before, after } of sent) {
    const rows = await stored(source.id);
    const byName = new Map(rows.map((row) => [kind.nameOf(row.raw), row]));
    expect([...byName.keys()].sort(), kind.label).toEqual(events.map((e) => e.name).sort());
    for (const e of events) {
      const row = byName.get(e.name)!;
      const where = `${kind.label} ${e.name}`;
      if (e.reason === undefined && e.sent !== undefined) {
        expect(row.dt.getTime(), where).toBe(e.sent);
        expect(row.raw[REDATED_FIELD], where).toBeUndefined();
        continue;
      }
      // Redated (or no time at all): the reception time, and what it carried under dt_sent.
      expect(row.dt.getTime(), where).toBeGreaterThanOrEqual(before);
      expect(row.dt.getTime(), where).toBeLessThanOrEqual(after);
      expect(row.raw[REDATED_FIELD], where).toBe(e.reason === undefined ? undefined : sentText(kind.protocol, e));
    }

    // The query API's default view, the last 30 minutes, holds every redated event.
    const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&batch=100`);
    expect(response.status).toBe(200);
    const shown = ((await response.json()) as { data: any[] }).data;
    const expected = events.filter((e) => e.reason !== undefined || e.sent === undefined || e.name === "recent");
    expect(shown.map((row) => kind.nameOf(row)).sort(), kind.label).toEqual(expected.map((e) => e.name).sort());
    for (const row of shown.filter((row) => row[REDATED_FIELD] !== undefined)) expect(Date.parse(row.dt)).toBeGreaterThanOrEqual(before);

    for (const reason of ["too_old", "too_far_ahead"] as const) {
      const count = events.filter((e) => e.reason === reason).length;
      expect(
        sampleValue(families, "logpond_ingest_events_redated_total", { protocol: kind.protocol, source_id: source.id, reason }),
        `${kind.label} ${reason}`,
      ).toBe(count);
    }
  }
});

test("the source's retention as of the request: a PATCH moves the window for the next one", async () => {
  const source = await lp.createSource({ logs_retention: 1 });
  const threeDaysAgo = Date.now() - 3 * DAY_MS;
  const send = async (n: number) => expect((await lp.ingest(source.token, JSON.stringify({ dt: threeDaysAgo, n }))).status).toBe(202);
  await send(1);
  expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, { logs_retention: 7 })).status).toBe(200);
  await send(2);
  await lp.flusher.flush();
  // By n: two batches may take their ids in either order (each flush stream reserves its own).
  const rows = (await stored(source.id)).sort((a, b) => a.raw.n - b.raw.n);
  expect(rows.map((row) => [row.raw.n, row.dt.getTime() === threeDaysAgo, row.raw[REDATED_FIELD] !== undefined])).toEqual([
    [1, false, true],
    [2, true, false],
  ]);
});

test("an event years old but within its retention keeps its time: sealed into the default partition, kept by the sweep, found by from/to", async () => {
  const source = await lp.createSource({ logs_retention: 3652 });
  const old = Date.now() - 400 * DAY_MS;
  expect((await lp.ingest(source.token, JSON.stringify({ dt: old, message: "last year" }))).status).toBe(202);
  await lp.flusher.flush();
  await sealAll(db.sql);
  await sweep(db.sql, never, () => {}, new Date(Date.now() + GRACE_MS));
  // Daily partitions are made from yesterday on: an older block goes to the default one, which no sweep drops.
  const [block] = await db.sql`select tableoid::regclass::text as partition from log_blocks where source_id = ${Number(source.id)}`;
  expect(block!.partition).toBe("log_blocks_default");
  const from = new Date(old - 60_000).toISOString();
  const to = new Date(old + 60_000).toISOString();
  const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&from=${from}&to=${to}`);
  const rows = ((await response.json()) as { data: any[] }).data;
  expect(rows.map((row) => [row.message, Date.parse(row.dt), row[REDATED_FIELD]])).toEqual([["last year", old, undefined]]);
});

test("a big body decoded on a decode thread (in slices) is redated the same way and counted", async () => {
  const source = await lp.createSource({ logs_retention: 30 });
  const events = Array.from({ length: 9_000 }, (_, i) => ({
    i,
    dt: i % 3 === 0 ? 0 : i % 3 === 1 ? "3000-01-01T00:00:00Z" : Date.now() - 1_000,
    pad: "p".repeat(100),
  }));
  const body = JSON.stringify(events);
  expect(body.length).toBeGreaterThan(BIG_BODY_BYTES);
  expect((await lp.ingest(source.token, body)).status).toBe(202);
  const rows = await stored(source.id);
  expect(rows).toHaveLength(9_000);
  expect(rows.filter((row) => row.raw[REDATED_FIELD] === "1970-01-01T00:00:00.000000Z")).toHaveLength(3_000);
  expect(rows.filter((row) => row.raw[REDATED_FIELD] === "3000-01-01T00:00:00.000000Z")).toHaveLength(3_000);
  const families = await metricsNow();
  const count = (reason: string) => sampleValue(families, "logpond_ingest_events_redated_total", { protocol: "better_stack", source_id: source.id, reason });
  expect([count("too_old"), count("too_far_ahead")]).toEqual([3_000, 3_000]);
});

test("Fluent Bit's entries: an EventTime at the epoch is redated", async () => {
  const source = await lp.createSource();
  const entry = Buffer.concat([hex("92 92"), eventTime(0, 5_000), hex("80"), map(["log", str("at the epoch")])]);
  expect((await lp.ingest(source.token, entry, { "content-type": "application/msgpack" })).status).toBe(202);
  await lp.flusher.flush();
  const [row] = await stored(source.id);
  expect(row!.raw).toMatchObject({ log: "at the epoch", [REDATED_FIELD]: "1970-01-01T00:00:00.000005Z" });
  expect(row!.dt.getTime()).toBeGreaterThan(Date.now() - 60_000);
});

test("the event's own dt_sent is kept; a query for the field finds the redated events; a paused source's are not counted", async () => {
  const source = await lp.createSource();
  const events = [{ dt: 0, [REDATED_FIELD]: "their own", n: 1 }, { dt: 0, n: 2 }, { n: 3 }];
  expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  await lp.flusher.flush();
  expect((await stored(source.id)).map((row) => row.raw)).toEqual([
    { dt: 0, [REDATED_FIELD]: "their own", [`${REDATED_FIELD}_2`]: "1970-01-01T00:00:00.000000Z", n: 1 },
    { dt: 0, [REDATED_FIELD]: "1970-01-01T00:00:00.000000Z", n: 2 },
    { n: 3 },
  ]);
  const found = async (query: string) => {
    const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&query=${encodeURIComponent(query)}`);
    return ((await response.json()) as { data: any[] }).data.map((row) => row.n);
  };
  // docs/ingestion.md's queries: every dt_sent logpond writes ends in Z; one of the epoch.
  expect(await found(`${REDATED_FIELD}:Z`)).toEqual([2]);
  expect(await found(`${REDATED_FIELD}_2:1970`)).toEqual([1]);

  const paused = await lp.createSource({ ingesting_paused: true });
  expect((await lp.ingest(paused.token, JSON.stringify([{ dt: 0 }]))).status).toBe(202);
  expect(sampleValue(await metricsNow(), "logpond_ingest_events_redated_total", { source_id: paused.id })).toBeUndefined();
});
