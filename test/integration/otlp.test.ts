// The unmodified OpenTelemetry JS SDK (sdk-logs with the http/json and http/protobuf exporters)
// pointed at POST /v1/logs: every record stored once as its own event, in the README's shape, and
// queryable through the query API (`level:error`, `service.name=…`). Then OTLP's own answers:
// partial success, a Status in the request's encoding, an envelope sent to `/`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SeverityNumber } from "@opentelemetry/api";
import { OTLPLogExporter as JsonExporter } from "@opentelemetry/exporter-logs-otlp-http";
import { OTLPLogExporter as ProtoExporter } from "@opentelemetry/exporter-logs-otlp-proto";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import { BatchLogRecordProcessor, LoggerProvider } from "@opentelemetry/sdk-logs";
import { API_TOKEN, startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { anyValue, ExportLogsServiceResponse, otlpProtobuf, RpcStatus } from "../helpers/protos";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await lp.stop();
});

const EXPORTERS = [
  ["http/json", (url: string, headers: Record<string, string>) => new JsonExporter({ url, headers })],
  ["http/protobuf", (url: string, headers: Record<string, string>) => new ProtoExporter({ url, headers })],
] as const;

/** Emits `count` records through the SDK (batches of 50) and waits until the exporter has sent them. */
async function emit(exporter: JsonExporter | ProtoExporter, service: string, count: number) {
  const provider = new LoggerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ "service.name": service, "service.version": "1.2.3", "deployment.environment.name": "test" })),
    processors: [new BatchLogRecordProcessor({ exporter, maxExportBatchSize: 50, scheduledDelayMillis: 10 })],
  });
  const logger = provider.getLogger("checkout-logger", "0.9.0");
  for (let i = 0; i < count; i++) {
    const error = i % 4 === 0;
    logger.emit({
      severityNumber: error ? SeverityNumber.ERROR : SeverityNumber.INFO,
      severityText: error ? "ERROR" : "INFO",
      body: `order ${i} ${error ? "failed" : "placed"}`,
      timestamp: new Date(Date.UTC(2026, 10, 24, 12, 0, 0, i)),
      attributes: { "order.id": i, "http.request.method": "POST", "user.tags": ["a", "b"], big: Number.MAX_SAFE_INTEGER },
    });
  }
  await provider.forceFlush();
  await provider.shutdown();
}

async function query(source: TestSource, text: string): Promise<any[]> {
  const to = new Date(Date.UTC(2026, 10, 24, 13)).toISOString();
  const from = new Date(Date.UTC(2026, 10, 24, 11)).toISOString();
  const response = await fetch(
    `${lp.apiUrl}/api/v2/query/live-tail?source_ids=${source.id}&batch=1000&from=${from}&to=${to}&query=${encodeURIComponent(text)}`,
    {
      headers: { authorization: `Bearer ${API_TOKEN}` },
    },
  );
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: any[] }).data;
}

test.each(EXPORTERS)("the SDK's %s exporter: 120 records, each stored once as its own event, queryable", async (_name, make) => {
  // Records of a fixed day: the longest retention keeps their time as sent for years (codec/reception.ts).
  const source = await lp.createSource({ platform: "open_telemetry", logs_retention: 3652 });
  await emit(make(`${lp.ingestUrl}/v1/logs`, { Authorization: `Bearer ${source.token}` }), "checkout", 120);

  const rows = await lp.stored(source.id);
  expect(rows).toHaveLength(120);
  const byOrder = new Map(rows.map((row) => [row.raw.attributes.order.id as number, row]));
  expect(byOrder.size).toBe(120);
  const first = byOrder.get(0)!;
  expect(first.raw).toMatchObject({
    message: "order 0 failed",
    level: "ERROR",
    severity_number: 17,
    attributes: { order: { id: 0 }, http: { request: { method: "POST" } }, user: { tags: ["a", "b"] }, big: Number.MAX_SAFE_INTEGER },
    service: { name: "checkout", version: "1.2.3" },
    resource: { deployment: { environment: { name: "test" } }, telemetry: { sdk: { language: "nodejs" } } },
    scope: { name: "checkout-logger", version: "0.9.0" },
  });
  expect(first.dt.toISOString()).toBe("2026-11-24T12:00:00.000Z");
  expect(first.raw.dt).toBe("2026-11-24T12:00:00.000000000Z");
  expect(byOrder.get(7)!.dt.toISOString()).toBe("2026-11-24T12:00:00.007Z");

  expect(await query(source, "level:error")).toHaveLength(30);
  expect(await query(source, "service.name=checkout")).toHaveLength(120);
  expect(await query(source, "service.name=payments")).toHaveLength(0);
  expect(await query(source, "attributes.order.id>=100 level:info")).toHaveLength(15);
});

test.each(EXPORTERS)("the %s exporter with the token as Basic auth's password", async (_name, make) => {
  const source = await lp.createSource();
  const basic = `Basic ${Buffer.from(`logpond:${source.token}`).toString("base64")}`;
  await emit(make(`${lp.ingestUrl}/v1/logs`, { Authorization: basic }), "basic", 3);
  expect(await lp.stored(source.id)).toHaveLength(3);
});

const post = (path: string, token: string | undefined, body: NonNullable<RequestInit["body"]>, contentType: string) =>
  fetch(`${lp.ingestUrl}${path}`, {
    method: "POST",
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), "content-type": contentType },
    body,
  });

test("a record over INGEST_MAX_EVENT_BYTES: 200 with partial_success in the request's encoding, the others stored", async () => {
  const small = await startTestLogpond({ INGEST_MAX_EVENT_BYTES: "2048" });
  try {
    const source = await small.createSource();
    const records = [{ body: anyValue("kept 1") }, { body: anyValue("x".repeat(4000)) }, { body: anyValue("kept 2") }];
    const proto = await fetch(`${small.ingestUrl}/v1/logs`, {
      method: "POST",
      headers: { authorization: `Bearer ${source.token}`, "content-type": "application/x-protobuf" },
      body: otlpProtobuf({ resource_logs: [{ scope_logs: [{ log_records: records }] }] }),
    });
    expect(proto.status).toBe(200);
    expect(proto.headers.get("content-type")).toBe("application/x-protobuf");
    const decoded = ExportLogsServiceResponse.toObject(ExportLogsServiceResponse.decode(new Uint8Array(await proto.arrayBuffer())), { longs: Number });
    expect(decoded.partial_success.rejected_log_records).toBe(1);
    expect(decoded.partial_success.error_message).toContain("1 of 3 log records were refused; the first: event 1 is");

    const json = await fetch(`${small.ingestUrl}/v1/logs`, {
      method: "POST",
      headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        resourceLogs: [{ scopeLogs: [{ logRecords: records.map((r) => ({ body: { stringValue: (r.body as { string_value: string }).string_value } })) }] }],
      }),
    });
    expect(json.status).toBe(200);
    expect(await json.json()).toMatchObject({ partialSuccess: { rejectedLogRecords: "1" } });
    expect((await small.stored(source.id)).map((row) => row.raw.message)).toEqual(["kept 1", "kept 2", "kept 1", "kept 2"]);
  } finally {
    await small.stop();
  }
});

test("refusals are a google.rpc.Status in the request's encoding, with OTLP's statuses", async () => {
  const source = await lp.createSource();
  const garbage = await post("/v1/logs", source.token, Buffer.from([0x0a, 0x7f, 0x01]), "application/x-protobuf");
  expect(garbage.status).toBe(400);
  expect(garbage.headers.get("content-type")).toBe("application/x-protobuf");
  const status = RpcStatus.toObject(RpcStatus.decode(new Uint8Array(await garbage.arrayBuffer())));
  expect(status).toMatchObject({ code: 3, message: expect.stringContaining("Couldn't parse OTLP protobuf content") });

  const cases: [Response, number, number][] = [
    [await post("/v1/logs", source.token, "{", "application/json"), 400, 3],
    [await post("/v1/logs", source.token, '{"resourceLogs":{}}', "application/json"), 400, 3],
    [await post("/v1/logs", undefined, "{}", "application/json"), 401, 16],
    [await post("/v1/logs", "not-a-token", "{}", "application/json"), 403, 7],
    [await post("/v1/logs", source.token, "{}", "text/plain"), 415, 3],
  ];
  for (const [response, httpStatus, code] of cases) {
    expect(response.status).toBe(httpStatus);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(await response.json()).toMatchObject({ code, message: expect.any(String) });
  }
  expect(await lp.stored(source.id)).toHaveLength(0);
});

test("over the rate limit: 429 with Retry-After, which OTLP exporters retry", async () => {
  const limited = await startTestLogpond({ INGEST_RATE_LIMIT: "1" });
  try {
    const source = await limited.createSource();
    const body = otlpProtobuf({ resource_logs: [{ scope_logs: [{ log_records: [{ body: anyValue("a") }, { body: anyValue("b") }] }] }] });
    const send = () =>
      fetch(`${limited.ingestUrl}/v1/logs`, {
        method: "POST",
        headers: { authorization: `Bearer ${source.token}`, "content-type": "application/x-protobuf" },
        body,
      });
    expect((await send()).status).toBe(200);
    const refused = await send();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(RpcStatus.toObject(RpcStatus.decode(new Uint8Array(await refused.arrayBuffer())))).toMatchObject({ code: 8 });
  } finally {
    await limited.stop();
  }
});

test("the SDK's JSON exporter pointed at / by mistake: its records are unpacked, never one blank event", async () => {
  const source = await lp.createSource({ platform: "open_telemetry" });
  await emit(new JsonExporter({ url: `${lp.ingestUrl}/`, headers: { Authorization: `Bearer ${source.token}` } }), "misrouted", 20);
  const rows = await lp.stored(source.id);
  expect(rows).toHaveLength(20);
  expect(rows.every((row) => row.raw.service.name === "misrouted" && typeof row.raw.message === "string")).toBe(true);
});

test("a gzip bomb of OTLP/JSON is 413 with a Status, and the service goes on", async () => {
  const source = await lp.createSource();
  const bomb = Bun.gzipSync(Buffer.alloc(120 * 1024 * 1024, 0x20)); // 120 MiB of blanks, past INGEST_MAX_DECOMPRESSED_BYTES
  const response = await fetch(`${lp.ingestUrl}/v1/logs`, {
    method: "POST",
    headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json", "content-encoding": "gzip" },
    body: bomb,
  });
  expect(response.status).toBe(413);
  expect(await response.json()).toMatchObject({ code: 8, message: expect.stringContaining("INGEST_MAX_DECOMPRESSED_BYTES") });
  expect((await fetch(`${lp.ingestUrl}/health`)).status).toBe(200);
});
