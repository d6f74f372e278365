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
  const response = await fetch(`${lp.apiUrl}/api/v2/query/live-tail?source_ids=${source.id}&batch=1000&from=${from}&to=${to}&query=${encodeURIComponent(text)}`, {
    headers: { authorization: `Bearer ${API_TOKEN}` },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: any[] }).data;
}

test.each(EXPORTERS)("the SDK's %s exporter: 120 records, each stored once as its own event, queryable", async (_name, make) => {
  const source = await lp.createSource({ platform: "open_telemetry" });
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
