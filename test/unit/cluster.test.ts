// Ingest workers' settings and their connection spreading, without processes: INGEST_WORKERS as
// resolved from the cores and the platform, the combinations refused at start, each worker's share
// of the memory settings, and when an answer closes its keep-alive connection.
import { expect, test } from "bun:test";
import { ConnectionSpreader } from "../../src/cluster/connections";
import { forwardedText, Gathered, gatherInto } from "../../src/cluster/gather";
import { Metrics } from "../../src/metrics";
import { workerEnv } from "../../src/cluster/supervisor";
import { ConfigError, ingestWorkers, loadConfig } from "../../src/config";

const MIB = 1024 * 1024;

test("INGEST_WORKERS: as set on Linux; 0 picks half the cores, at most 8, 1 on 2 cores; always 1 elsewhere and in an ingest process", () => {
  const config = (env: Record<string, string>) => loadConfig({ DATABASE_URL: "postgres://x@localhost/db", ...env });
  expect(ingestWorkers(config({}), 16, "linux")).toBe(1);
  expect(ingestWorkers(config({ INGEST_WORKERS: "4" }), 2, "linux")).toBe(4);
  expect(ingestWorkers(config({ INGEST_WORKERS: "4" }), 16, "darwin")).toBe(1);
  expect(ingestWorkers(config({ INGEST_WORKERS: "0" }), 2, "linux")).toBe(1);
  expect(ingestWorkers(config({ INGEST_WORKERS: "0" }), 6, "linux")).toBe(3);
  expect(ingestWorkers(config({ INGEST_WORKERS: "0" }), 64, "linux")).toBe(8);
  expect(ingestWorkers(config({ INGEST_WORKERS: "0", SEAL_FROM: "memory" }), 16, "linux")).toBe(8);
  expect(ingestWorkers(config({ INGEST_WORKERS: "4", ROLE: "ingest" }), 16, "linux")).toBe(1);
  expect(ingestWorkers(config({ INGEST_WORKERS: "4", LOGPOND_WORKER_INDEX: "2" }), 16, "linux")).toBe(1);
});

test("refused at start: ROLE=ingest without DATABASE_URL, a bad ROLE; SEAL_FROM=memory with several workers is taken", () => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env);
      return [];
    } catch (error) {
      return (error as ConfigError).problems;
    }
  };
  expect(problems({ ROLE: "ingest" })).toEqual([expect.stringContaining("ROLE=ingest needs DATABASE_URL")]);
  expect(problems({ INGEST_WORKERS: "2", SEAL_FROM: "memory" })).toEqual([]);
  expect(problems({ ROLE: "worker" })).toEqual([expect.stringContaining("ROLE")]);
  expect(problems({ INGEST_WORKERS: "2" })).toEqual([]);
});

test("each worker gets 1/N of the in-flight budget and of the buffer, and ROLE=ingest on the store", () => {
  const config = loadConfig({
    INGEST_INFLIGHT_MAX_BYTES: String(300 * MIB),
    BUFFER_MAX_BYTES: String(3 * MIB),
    BUFFER_MAX_EVENTS: "10",
    SHUTDOWN_TIMEOUT_MS: "10000",
  });
  const env = workerEnv(config, 4, "postgres://store");
  expect(env).toMatchObject({ ROLE: "ingest", DATABASE_URL: "postgres://store", INGEST_WORKERS: "1", BUFFER_MAX_EVENTS: "2", SHUTDOWN_TIMEOUT_MS: "6000" });
  expect(Number(env.INGEST_INFLIGHT_MAX_BYTES) * 4).toBeLessThanOrEqual(300 * MIB);
  // Never under the settings' least (1 MiB): the share is the floor, not a smaller value.
  expect(Number(env.BUFFER_MAX_BYTES)).toBe(MIB);
  // The workers' Configs load.
  expect(loadConfig(env).ingestInflightMaxBytes).toBe(75 * MIB);
});

test("a keep-alive connection's answer closes it at its request limit or its age, per connection", () => {
  let now = 0;
  const spreader = new ConnectionSpreader({ maxRequests: 3, maxAgeMs: 1_000 }, () => now);
  const a = { address: "10.0.0.1", port: 50_000 };
  const b = { address: "10.0.0.1", port: 50_001 };
  expect([spreader.request(a), spreader.request(a), spreader.request(b), spreader.request(a)]).toEqual([false, false, false, true]);
  // The closed one is forgotten: the same peer port later is a new connection.
  expect(spreader.request(a)).toBe(false);
  now = 999;
  expect(spreader.request(b)).toBe(false);
  now = 1_000;
  expect(spreader.request(b)).toBe(true);
  expect(spreader.request(null)).toBe(false);
  const unlimitedAge = new ConnectionSpreader({ maxRequests: 0, maxAgeMs: 1_000 }, () => now);
  expect(Array.from({ length: 100 }, () => unlimitedAge.request(a)).some(Boolean)).toBe(false);
});

test("connections idle past five minutes are forgotten by a later request (no timer of its own)", () => {
  let now = 0;
  const spreader = new ConnectionSpreader({ maxRequests: 100, maxAgeMs: 0 }, () => now);
  for (let port = 1; port <= 10; port++) spreader.request({ address: "10.0.0.2", port });
  expect(spreader.size).toBe(10);
  now = 4 * 60_000;
  spreader.request({ address: "10.0.0.2", port: 1 });
  expect(spreader.size).toBe(10);
  now = 5 * 60_000 + 1;
  spreader.request({ address: "10.0.0.2", port: 1 }); // swept: only the one used at 4 min and now is left
  expect(spreader.size).toBe(1);
});

test("the ingestion series gathered from workers: each sample summed, a histogram's lines too; an exited worker's counters stay, its gauges go", () => {
  const metrics = new Metrics();
  // The supervisor's own buffer (a spill replay's events) is counted beside the workers'.
  metrics.gauge("logpond_buffer_events", "Events held in memory.", () => 1);
  const workers = [new Gathered(), new Gathered()];
  const declare = gatherInto(metrics, workers);
  const report = (requests: number, inflight: number, count: number) =>
    forwardedText(
      [
        "# HELP logpond_ingest_requests_accepted_total Ingestion requests answered with success, by protocol and source.",
        "# TYPE logpond_ingest_requests_accepted_total counter",
        `logpond_ingest_requests_accepted_total{protocol="better_stack",source_id="7"} ${requests}`,
        "# HELP logpond_ingest_inflight_bytes Memory charged.",
        "# TYPE logpond_ingest_inflight_bytes gauge",
        `logpond_ingest_inflight_bytes ${inflight}`,
        "# HELP logpond_ingest_request_duration_seconds Durations.",
        "# TYPE logpond_ingest_request_duration_seconds histogram",
        `logpond_ingest_request_duration_seconds_bucket{protocol="otlp",le="0.1"} ${count}`,
        `logpond_ingest_request_duration_seconds_bucket{protocol="otlp",le="+Inf"} ${count}`,
        `logpond_ingest_request_duration_seconds_sum{protocol="otlp"} 0.5`,
        `logpond_ingest_request_duration_seconds_count{protocol="otlp"} ${count}`,
        "# HELP logpond_buffer_events Events held in memory.",
        "# TYPE logpond_buffer_events gauge",
        "logpond_buffer_events 9",
        "# HELP logpond_sources Not forwarded.",
        "# TYPE logpond_sources gauge",
        "logpond_sources 4",
      ].join("\n"),
    );
  workers[0]!.report(report(3, 100, 2));
  workers[1]!.report(report(4, 50, 5));
  declare();
  expect(metrics.value("logpond_ingest_requests_accepted_total", { source_id: 7 })).toBe(7);
  expect(metrics.value("logpond_ingest_inflight_bytes")).toBe(150);
  expect(metrics.value("logpond_ingest_request_duration_seconds_count", { protocol: "otlp" })).toBe(7);
  expect(metrics.value("logpond_buffer_events")).toBe(1 + 9 + 9);
  expect(metrics.render().match(/^# TYPE logpond_buffer_events gauge$/gm)).toHaveLength(1);
  expect(metrics.value("logpond_sources")).toBe(0); // the supervisor counts its sources itself
  expect(metrics.render().match(/^# TYPE logpond_ingest_request_duration_seconds histogram$/gm)).toHaveLength(1);
  // Worker 1 exits; its successor starts from zero: the counters go on from the sum, its gauge is gone.
  workers[0]!.exited();
  workers[0]!.report(report(1, 10, 1));
  declare();
  expect(metrics.value("logpond_ingest_requests_accepted_total", { source_id: 7 })).toBe(8);
  expect(metrics.value("logpond_ingest_inflight_bytes")).toBe(60);
  expect(metrics.value("logpond_ingest_request_duration_seconds_count", { protocol: "otlp" })).toBe(8);
});
