// /metrics without a server: the histogram's buckets, the exposition format's escaping and rules,
// and what Metrics renders — read back by a strict parser (test/helpers/prometheus.ts), which
// throws on anything Prometheus would refuse.
import { describe, expect, test } from "bun:test";
import { flushSeries } from "../../src/buffer/batch";
import { ingestSeries, NO_SOURCE, PROTOCOLS } from "../../src/ingest/series";
import { Metrics } from "../../src/metrics";
import { QUERY_ROUTES, queryDurations } from "../../src/query/routes";
import { Exposition, formatValue, labels } from "../../src/metrics/exposition";
import { BUCKETS, Histogram } from "../../src/metrics/histogram";
import { parseExposition, sampleValue, samples } from "../helpers/prometheus";

describe("histogram", () => {
  const bounds = BUCKETS.ingest;
  // A sample on a bound belongs to that bound's bucket (le: less or equal).
  test.each([
    [0, 0],
    [bounds[0], 0],
    [bounds[0] * 1.01, 1],
    [bounds[3], 3],
    [bounds.at(-1)!, bounds.length - 1],
    [bounds.at(-1)! + 1, bounds.length],
  ])("%p s goes to bucket %p", (value, bucket) => {
    const h = new Histogram(bounds);
    h.observe(value);
    expect([...h.counts].map((n, i) => (n > 0 ? i : -1)).filter((i) => i >= 0)).toEqual([bucket]);
    expect(h.count).toBe(1);
    expect(h.sum).toBe(value);
  });

  test("NaN and negative samples are ignored; bounds must increase", () => {
    const h = new Histogram([1, 2]);
    h.observe(NaN);
    h.observe(-1);
    expect(h.count).toBe(0);
    expect(h.sum).toBe(0);
    expect(() => new Histogram([1, 1])).toThrow("must increase");
  });

  test("rendered cumulative, ending at +Inf = _count, then _sum and _count", () => {
    const h = new Histogram([0.1, 1]);
    for (const v of [0.05, 0.1, 0.5, 3, 4]) h.observe(v);
    const text = new Exposition()
      .family("x_seconds", "histogram", "x")
      .histogram("x_seconds", labels({ a: "b" }), h)
      .text();
    expect(text).toBe(
      [
        "# HELP x_seconds x",
        "# TYPE x_seconds histogram",
        'x_seconds_bucket{a="b",le="0.1"} 2',
        'x_seconds_bucket{a="b",le="1"} 3',
        'x_seconds_bucket{a="b",le="+Inf"} 5',
        'x_seconds_sum{a="b"} 7.65',
        'x_seconds_count{a="b"} 5',
        "",
      ].join("\n"),
    );
    expect(() => parseExposition(text)).not.toThrow();
  });
});

describe("exposition", () => {
  test("label values and help text are escaped, and read back as written", () => {
    const hostile = 'a\\b"c\nd}e,f="g"';
    const text = new Exposition()
      .family("x_total", "counter", "help with \\ and\na new line")
      .sample("x_total", labels({ v: hostile, n: 12 }), 1)
      .text();
    const family = parseExposition(text).get("x_total")!;
    expect(family.help).toBe("help with \\ and\na new line");
    expect(family.samples).toEqual([{ name: "x_total", labels: { v: hostile, n: "12" }, value: 1 }]);
  });

  test.each([
    [Infinity, "+Inf"],
    [-Infinity, "-Inf"],
    [NaN, "NaN"],
    [1e-7, "1e-7"],
    [12345.5, "12345.5"],
    [2 ** 53, "9007199254740992"],
  ])("value %p is written %p", (value, text) => {
    expect(formatValue(value)).toBe(text);
  });

  test("a family written twice, or a counter not named _total, is a bug that throws", () => {
    expect(() => new Exposition().family("a_total", "counter", "a").family("a_total", "counter", "a")).toThrow("twice");
    expect(() => new Exposition().family("a_seconds_sum", "counter", "a")).toThrow("_total");
  });

  // Each case breaks one rule of the format; the parser must name that one.
  test.each([
    ["TYPE twice", "# TYPE x counter\n# TYPE x counter\nx 1"],
    ["HELP after the family's samples", "# TYPE x gauge\nx 1\n# HELP x late"],
    ["samples of x are split up", '# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx{a="b"} 2'],
    ["bad escape in a label value", '# TYPE x gauge\nx{a="\\q"} 1'],
    ["bad value", "# TYPE x gauge\nx one"],
    ["series twice", "# TYPE x gauge\nx 1\nx 2"],
    ["sample of no declared family", "# TYPE x gauge\nx_count 1"],
    ["buckets not cumulative", '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1'],
    ["no +Inf bucket", '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1'],
    ["is not _count", '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3'],
  ])("the test's parser refuses: %s", (why, text) => {
    expect(() => parseExposition(`${text}\n`)).toThrow(why);
  });
});

describe("Metrics", () => {
  test("an ingest request is counted once, by protocol and source, and timed once", () => {
    const metrics = new Metrics();
    const series = ingestSeries(metrics);
    const request = series.ingestRequest("better_stack");
    request.sourceId = 7;
    request.accepted(1000, 5000);
    request.reject("buffer_full"); // a second ending is ignored
    const paused = series.ingestRequest("otlp");
    paused.sourceId = 7;
    paused.accepted(3, 40, true);
    const families = parseExposition(metrics.render());
    const seven = { protocol: "better_stack", source_id: "7" };
    expect(sampleValue(families, "logpond_ingest_requests_accepted_total", seven)).toBe(1);
    expect(sampleValue(families, "logpond_ingest_events_received_total", seven)).toBe(1000);
    expect(sampleValue(families, "logpond_ingest_bytes_received_total", seven)).toBe(5000);
    expect(sampleValue(families, "logpond_ingest_events_dropped_paused_total", seven)).toBe(0);
    expect(sampleValue(families, "logpond_ingest_events_dropped_paused_total", { protocol: "otlp", source_id: "7" })).toBe(3);
    expect(samples(families, "logpond_ingest_requests_rejected_total")).toEqual([]);
    expect(sampleValue(families, "logpond_ingest_request_duration_seconds_count", { protocol: "better_stack" })).toBe(1);
    expect(sampleValue(families, "logpond_ingest_request_duration_seconds_count", { protocol: "otlp" })).toBe(1);
    expect(sampleValue(families, "logpond_ingest_request_duration_seconds_count", { protocol: "loki" })).toBe(0);
    expect(series.eventsReceived).toBe(1003);
    expect(series.eventsDroppedPaused).toBe(3);
    expect(metrics.value("logpond_ingest_events_received_total")).toBe(1003);
    expect(metrics.value("logpond_ingest_events_received_total", { protocol: "otlp" })).toBe(3);
  });

  test("refusals by reason; before the token is known the source is empty", () => {
    const metrics = new Metrics();
    const series = ingestSeries(metrics);
    series.ingestRequest("loki").reject("missing_token");
    series.ingestRequest("loki").reject("missing_token");
    const known = series.ingestRequest("loki");
    known.sourceId = 3;
    known.reject("body_undecodable");
    const families = parseExposition(metrics.render());
    expect(sampleValue(families, "logpond_ingest_requests_rejected_total", { protocol: "loki", source_id: "", reason: "missing_token" })).toBe(2);
    expect(sampleValue(families, "logpond_ingest_requests_rejected_total", { protocol: "loki", source_id: "3", reason: "body_undecodable" })).toBe(1);
    // Refused requests accepted nothing: no accepted series for them.
    expect(samples(families, "logpond_ingest_requests_accepted_total")).toEqual([]);
    expect(sampleValue(families, "logpond_ingest_request_duration_seconds_count", { protocol: "loki" })).toBe(3);
  });

  test("redated events are counted by reason when their request is accepted and stored; not when refused or paused", () => {
    const metrics = new Metrics();
    const series = ingestSeries(metrics);
    const stored = series.ingestRequest("otlp");
    stored.sourceId = 4;
    stored.redated(2, 1);
    stored.accepted(10, 100);
    const refused = series.ingestRequest("otlp");
    refused.sourceId = 4;
    refused.redated(5, 5);
    refused.reject("buffer_full");
    const paused = series.ingestRequest("loki");
    paused.sourceId = 4;
    paused.redated(3, 0);
    paused.accepted(3, 30, true);
    const families = parseExposition(metrics.render());
    const four = { protocol: "otlp", source_id: "4" };
    expect(sampleValue(families, "logpond_ingest_events_redated_total", { ...four, reason: "too_old" })).toBe(2);
    expect(sampleValue(families, "logpond_ingest_events_redated_total", { ...four, reason: "too_far_ahead" })).toBe(1);
    expect(samples(families, "logpond_ingest_events_redated_total", { protocol: "loki" })).toEqual([]);
  });

  test("a deleted source's series are dropped at the next scrape; the tokenless ones stay", () => {
    const metrics = new Metrics();
    const series = ingestSeries(metrics, (id) => id === 1);
    for (const id of [1, 2]) series.ingestAccepted("better_stack", id, 1, 10);
    series.reject("invalid_token", "better_stack", NO_SOURCE);
    series.reject("too_deep", "better_stack", 2);
    const families = parseExposition(metrics.render());
    expect(samples(families, "logpond_ingest_events_received_total").map((s) => s.labels.source_id)).toEqual(["1"]);
    expect(samples(families, "logpond_ingest_requests_rejected_total").map((s) => s.labels)).toEqual([
      { protocol: "better_stack", source_id: "", reason: "invalid_token" },
    ]);
  });

  test("everything renders as valid exposition: counters named _total, histograms from the start, process_* read", () => {
    const metrics = new Metrics();
    ingestSeries(metrics);
    const flush = flushSeries(metrics);
    flush.flushes.inc("interval");
    flush.events.inc(10);
    flush.duration.observe(0.02);
    queryDurations(metrics)["/api/v2/query/live-tail"].observe(0.3);
    metrics.gauge("logpond_buffer_events", "g", () => 3);
    metrics.counter("logpond_tail_batches_read_back_total", "c", () => 2);
    const text = metrics.render();
    const families = parseExposition(text);
    for (const family of families.values()) if (family.type === "counter") expect(family.name).toEndWith("_total");
    expect(families.get("logpond_tail_batches_read_back_total")!.type).toBe("counter");
    expect(families.get("logpond_buffer_events")!.type).toBe("gauge");
    expect(families.get("logpond_flush_duration_seconds")!.type).toBe("histogram");
    expect(sampleValue(families, "logpond_flush_duration_seconds_count")).toBe(1);
    expect(sampleValue(families, "logpond_flush_duration_seconds_sum")).toBe(0.02);
    expect(sampleValue(families, "logpond_flush_duration_seconds_bucket", { le: "0.025" })).toBe(1);
    expect(sampleValue(families, "logpond_flush_duration_seconds_bucket", { le: "0.01" })).toBe(0);
    for (const protocol of PROTOCOLS) expect(sampleValue(families, "logpond_ingest_request_duration_seconds_bucket", { protocol, le: "+Inf" })).toBe(0);
    for (const route of QUERY_ROUTES)
      expect(sampleValue(families, "logpond_query_request_duration_seconds_count", { route })).toBe(route === "/api/v2/query/live-tail" ? 1 : 0);
    expect(sampleValue(families, "process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(sampleValue(families, "process_resident_memory_bytes")).toBeGreaterThan(0);
    const start = sampleValue(families, "process_start_time_seconds")!;
    expect(start).toBeLessThanOrEqual(Date.now() / 1000 + 1);
    expect(start).toBeGreaterThan(Date.now() / 1000 - 86_400);
    if (process.platform === "linux") {
      expect(sampleValue(families, "process_virtual_memory_bytes")).toBeGreaterThan(0);
      expect(sampleValue(families, "process_open_fds")).toBeGreaterThan(0);
      expect(sampleValue(families, "process_max_fds")).toBeGreaterThanOrEqual(sampleValue(families, "process_open_fds")!);
    }
  });
});

describe("the registry", () => {
  test("a handle declared twice under one name is one series; a labelled counter renders its preset values from the start", () => {
    const metrics = new Metrics();
    const first = metrics.counter("logpond_test_things_total", "Things.");
    const second = metrics.counter("logpond_test_things_total", "Things.");
    first.inc();
    second.inc(2);
    const kinds = metrics.counterBy("logpond_test_kinds_total", "Kinds.", "kind", ["a", "b"]);
    kinds.inc("c", 4);
    expect(() => metrics.histogram("logpond_test_things_total", "Not a counter.", [1])).toThrow("declared as a counter");
    const families = parseExposition(metrics.render());
    expect(sampleValue(families, "logpond_test_things_total")).toBe(3);
    expect(samples(families, "logpond_test_kinds_total").map((s) => [s.labels.kind, s.value])).toEqual([
      ["a", 0],
      ["b", 0],
      ["c", 4],
    ]);
    expect(metrics.value("logpond_test_kinds_total")).toBe(4);
    expect(metrics.value("logpond_test_kinds_total", { kind: "c" })).toBe(4);
    expect(metrics.value("logpond_test_kinds_total", { kind: "a" })).toBe(0);
  });
});
