// /metrics over real HTTP against the real PostgreSQL: ingest into two sources (and be refused; OTLP and Loki too),
// query, then read the exposition back with a strict parser (test/helpers/prometheus.ts): the
// per-protocol, per-source counters hold exactly what was sent, each histogram's _count is the
// requests made (buckets cumulative, checked by the parser), counters are typed counters, the
// process_* metrics are there, a deleted source's series go, and the families a scrape shows are
// exactly those docs/metrics.md names.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { Metrics } from "../../src/metrics";
import { type Supervisor, supervisorSeries } from "../../src/store/supervisor";
import { workerSeries } from "../../src/cluster/supervisor";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { parseExposition, sampleValue, samples, type Family } from "../helpers/prometheus";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await lp.stop();
});

async function scrape(): Promise<Map<string, Family>> {
  const response = await fetch(`${lp.apiUrl}/metrics`);
  expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parseExposition(await response.text());
}

const INGEST_COUNT = "logpond_ingest_request_duration_seconds_count";
const QUERY_COUNT = "logpond_query_request_duration_seconds_count";
const LIVE = "/api/v2/query/live-tail";
const DEAD = "/api/v2/query/dead-letters";
const HISTOGRAM = "/api/v2/query/histogram";

test("per protocol and source: requests, events, bytes and refusals by reason; every answer timed once", async () => {
  const a = await lp.createSource();
  const b = await lp.createSource();
  const before = await scrape();
  const tokenless = (reason: string) => sampleValue(before, "logpond_ingest_requests_rejected_total", { protocol: "better_stack", source_id: "", reason }) ?? 0;

  const bodiesA = ['[{"m":1},{"m":2},{"m":3}]', '{"m":4}'];
  const bodyB = '[{"m":5},{"m":6}]';
  for (const body of bodiesA) expect((await lp.ingest(a.token, body)).status).toBe(202);
  expect((await lp.ingest(b.token, bodyB)).status).toBe(202);
  expect((await lp.ingest(a.token, '{"m":')).status).toBe(406);
  expect((await lp.ingest(a.token, "{}", { "content-type": "text/csv" })).status).toBe(415);
  expect((await fetch(`${lp.ingestUrl}/`, { method: "POST", body: "{}" })).status).toBe(401);
  expect((await lp.ingest("not-a-token-of-any-source", "{}")).status).toBe(403);
  expect(await lp.stored(a.id)).toHaveLength(4);

  expect((await lp.api("GET", `${LIVE}?source_ids=${a.id},${b.id}`)).status).toBe(200);
  expect((await lp.api("GET", `${LIVE}?source_ids=${a.id}&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z`)).status).toBe(400);
  expect((await lp.api("GET", `${DEAD}?source_ids=${a.id}`)).status).toBe(200);
  expect((await lp.api("GET", `${HISTOGRAM}?source_ids=${a.id}&from=now-1h&to=now&buckets=6`)).status).toBe(200);
  expect((await fetch(`${lp.apiUrl}${LIVE}?source_ids=${a.id}`)).status).toBe(401); // no token: no query, not timed

  const after = await scrape();
  const of = (source: string) => ({ protocol: "better_stack", source_id: source });
  expect(sampleValue(after, "logpond_ingest_requests_accepted_total", of(a.id))).toBe(2);
  expect(sampleValue(after, "logpond_ingest_requests_accepted_total", of(b.id))).toBe(1);
  expect(sampleValue(after, "logpond_ingest_events_received_total", of(a.id))).toBe(4);
  expect(sampleValue(after, "logpond_ingest_events_received_total", of(b.id))).toBe(2);
  expect(sampleValue(after, "logpond_ingest_bytes_received_total", of(a.id))).toBe(bodiesA.join("").length);
  expect(sampleValue(after, "logpond_ingest_bytes_received_total", of(b.id))).toBe(bodyB.length);
  expect(sampleValue(after, "logpond_ingest_events_dropped_paused_total", of(a.id))).toBe(0);
  const rejected = (labels: Record<string, string>) => samples(after, "logpond_ingest_requests_rejected_total", labels);
  expect(
    rejected(of(a.id))
      .map((s) => [s.labels.reason, s.value])
      .sort(),
  ).toEqual([
    ["body_undecodable", 1],
    ["unsupported_content_type", 1],
  ]);
  expect(rejected(of(b.id))).toEqual([]);
  expect(sampleValue(after, "logpond_ingest_requests_rejected_total", { ...of(""), reason: "missing_token" })).toBe(tokenless("missing_token") + 1);
  expect(sampleValue(after, "logpond_ingest_requests_rejected_total", { ...of(""), reason: "invalid_token" })).toBe(tokenless("invalid_token") + 1);

  // One sample per request, accepted or refused: 3 + 4.
  const count = (families: Map<string, Family>, name: string, labels: Record<string, string>) => sampleValue(families, name, labels)!;
  expect(count(after, INGEST_COUNT, { protocol: "better_stack" }) - count(before, INGEST_COUNT, { protocol: "better_stack" })).toBe(7);
  expect(count(after, INGEST_COUNT, { protocol: "otlp" })).toBe(0);
  expect(count(after, QUERY_COUNT, { route: LIVE }) - count(before, QUERY_COUNT, { route: LIVE })).toBe(2);
  expect(count(after, QUERY_COUNT, { route: DEAD }) - count(before, QUERY_COUNT, { route: DEAD })).toBe(1);
  expect(count(after, QUERY_COUNT, { route: HISTOGRAM }) - count(before, QUERY_COUNT, { route: HISTOGRAM })).toBe(1);
  // Cumulative buckets ending at _count are the parser's check; the +Inf one is the count here too.
  const buckets = samples(after, "logpond_ingest_request_duration_seconds_bucket", { protocol: "better_stack" }).map((s) => s.value);
  expect(buckets.at(-1)).toBe(count(after, INGEST_COUNT, { protocol: "better_stack" }));
  expect(buckets).toEqual([...buckets].sort((x, y) => x - y));
});

test("OTLP and Loki requests are counted and timed under their protocol; OTLP's partial success counts the records kept", async () => {
  const source = await lp.createSource();
  const before = await scrape();
  const of = (protocol: string) => ({ protocol, source_id: source.id });
  const post = (path: string, body: string) =>
    fetch(`${lp.ingestUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json" }, body });

  // The middle record is over INGEST_MAX_EVENT_BYTES (1 MiB): refused alone, the other two kept.
  const otlp = JSON.stringify({
    resourceLogs: [{ scopeLogs: [{ logRecords: ["kept 1", "x".repeat(1_100_000), "kept 2"].map((m) => ({ body: { stringValue: m } })) }] }],
  });
  const answer = await post("/v1/logs", otlp);
  expect(answer.status).toBe(200);
  expect(await answer.json()).toMatchObject({ partialSuccess: { rejectedLogRecords: "1" } });
  const loki = JSON.stringify({
    streams: [
      {
        stream: { job: "metrics" },
        values: [
          [`${Date.now()}000000`, "one"],
          [`${Date.now()}000000`, "two"],
          [`${Date.now()}000000`, "three"],
        ],
      },
    ],
  });
  expect((await post("/loki/api/v1/push", loki)).status).toBe(204);
  expect((await post("/loki/api/v1/push", "{")).status).toBe(400);

  const after = await scrape();
  expect(sampleValue(after, "logpond_ingest_requests_accepted_total", of("otlp"))).toBe(1);
  expect(sampleValue(after, "logpond_ingest_events_received_total", of("otlp"))).toBe(2);
  expect(sampleValue(after, "logpond_ingest_bytes_received_total", of("otlp"))).toBe(otlp.length);
  expect(sampleValue(after, "logpond_ingest_requests_accepted_total", of("loki"))).toBe(1);
  expect(sampleValue(after, "logpond_ingest_events_received_total", of("loki"))).toBe(3);
  expect(sampleValue(after, "logpond_ingest_bytes_received_total", of("loki"))).toBe(loki.length);
  expect(samples(after, "logpond_ingest_requests_rejected_total", of("loki")).map((s) => [s.labels.reason, s.value])).toEqual([["body_undecodable", 1]]);
  expect(sampleValue(after, "logpond_ingest_events_received_total", of("better_stack"))).toBeUndefined();
  const delta = (protocol: string) => sampleValue(after, INGEST_COUNT, { protocol })! - sampleValue(before, INGEST_COUNT, { protocol })!;
  expect([delta("better_stack"), delta("otlp"), delta("loki")]).toEqual([0, 1, 2]);
});

test("flush duration is a histogram counting every committed flush; monotonic counters are counters", async () => {
  const source = await lp.createSource();
  expect((await lp.ingest(source.token, '{"m":"flush me"}')).status).toBe(202);
  await lp.flusher.flush();
  const families = await scrape();
  const flushes = samples(families, "logpond_flushes_total").reduce((sum, s) => sum + s.value, 0);
  expect(flushes).toBeGreaterThan(0);
  expect(families.get("logpond_flush_duration_seconds")!.type).toBe("histogram");
  expect(sampleValue(families, "logpond_flush_duration_seconds_count")).toBe(flushes);
  expect(sampleValue(families, "logpond_flush_duration_seconds_sum")).toBeGreaterThan(0);
  expect(families.get("logpond_retention_sweep_duration_seconds")!.type).toBe("histogram");
  expect(sampleValue(families, "logpond_retention_sweep_duration_seconds_count")).toBe(sampleValue(families, "logpond_retention_sweeps_total"));
  expect(families.get("logpond_tail_batches_read_back_total")!.type).toBe("counter");
  expect(families.has("logpond_tail_batches_read_back")).toBe(false);
  for (const family of families.values()) {
    if (family.type === "counter") expect(family.name).toEndWith("_total");
    if (family.name.endsWith("_total")) expect(family.type).toBe("counter");
  }
  expect(families.get("logpond_buffer_events")!.type).toBe("gauge");
  expect(families.get("logpond_sources")!.type).toBe("gauge");
});

test("process_* metrics: CPU, memory, start time, file descriptors", async () => {
  const families = await scrape();
  expect(sampleValue(families, "process_cpu_seconds_total")).toBeGreaterThan(0);
  expect(sampleValue(families, "process_resident_memory_bytes")).toBeGreaterThan(1 << 20);
  const start = sampleValue(families, "process_start_time_seconds")!;
  expect(start).toBeGreaterThan(Date.now() / 1000 - 86_400);
  expect(start).toBeLessThanOrEqual(Date.now() / 1000 + 1);
  if (process.platform === "linux") {
    expect(sampleValue(families, "process_virtual_memory_bytes")).toBeGreaterThanOrEqual(sampleValue(families, "process_resident_memory_bytes")!);
    expect(sampleValue(families, "process_open_fds")).toBeGreaterThan(2);
    expect(sampleValue(families, "process_max_fds")).toBeGreaterThanOrEqual(sampleValue(families, "process_open_fds")!);
  }
});

test("a deleted source's series are gone at the next scrape", async () => {
  const kept = await lp.createSource();
  const deleted = await lp.createSource();
  for (const source of [kept, deleted]) {
    expect((await lp.ingest(source.token, '{"m":1}')).status).toBe(202);
    expect((await lp.ingest(source.token, "[")).status).toBe(406);
  }
  const ids = (families: Map<string, Family>) => new Set(samples(families, "logpond_ingest_events_received_total").map((s) => s.labels.source_id));
  const rejectedIds = (families: Map<string, Family>) => new Set(samples(families, "logpond_ingest_requests_rejected_total").map((s) => s.labels.source_id));
  const before = await scrape();
  expect([ids(before).has(kept.id), ids(before).has(deleted.id), rejectedIds(before).has(deleted.id)]).toEqual([true, true, true]);
  expect((await lp.api("DELETE", `/api/v1/sources/${deleted.id}`)).status).toBe(204);
  const after = await scrape();
  expect([ids(after).has(kept.id), ids(after).has(deleted.id), rejectedIds(after).has(deleted.id)]).toEqual([true, false, false]);
});

/** The families docs/metrics.md names before its alerts (a histogram by its family name, not its `_sum`). */
function documentedFamilies(): Set<string> {
  const text = readFileSync(path.join(import.meta.dir, "..", "..", "docs", "metrics.md"), "utf8");
  const reference = text.slice(0, text.indexOf("## Alerts to start from"));
  const names = [...reference.matchAll(/`((?:logpond|process)_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(sum|count|bucket)$/, ""));
  // "process_cpu_seconds_total (and `_user_`/`_system_`)": the two it names by their middle.
  if (reference.includes("`process_cpu_seconds_total` (and `_user_`/`_system_`)"))
    names.push("process_cpu_user_seconds_total", "process_cpu_system_seconds_total");
  return new Set(names);
}

test("a scrape's families are exactly those docs/metrics.md names (the embedded PostgreSQL's and the ingest workers' added: the tests run on DATABASE_URL, in one process)", async () => {
  const scraped = new Set((await scrape()).keys());
  // Only without DATABASE_URL: the supervisor's series, declared here as openStore (store/db.ts) declares them.
  const embedded = new Metrics();
  supervisorSeries({ up: true, restarts: 0 } as Supervisor, embedded);
  // Only with INGEST_WORKERS > 1: the supervisor's series of its workers (cluster/supervisor.ts).
  workerSeries(embedded, { listening: () => 2, restarts: () => 0, counts: () => [{ index: 1, requests: 0, events: 0 }] });
  for (const name of parseExposition(embedded.render()).keys()) if (!name.startsWith("process_")) scraped.add(name);
  const documented = documentedFamilies();
  expect([...scraped].filter((name) => !documented.has(name)).sort()).toEqual([]);
  expect([...documented].filter((name) => !scraped.has(name)).sort()).toEqual([]);
  expect(scraped.size).toBeGreaterThan(50);
});
