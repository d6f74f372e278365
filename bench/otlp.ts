// OTLP protobuf ingest against the same records as a JSON array on `/` (target: ≥ 0.8×),
// and the decoder choice behind it (hand-written reader vs protobufjs). Bodies: 64 distinct batches
// of 100 realistic LogRecords (one resource, one scope; six attributes each, trace context), made
// with protobufjs; the JSON bodies are the very events our decoder makes of them, so both rows
// store the same rows.
//   bun bench/otlp.ts micro        decode only: µs per 100-record body, ours vs protobufjs
//   bun bench/otlp.ts [seconds]    HTTP: wrk -c64 on a spawned logpond, a warm-up, then alternating rows, 3 rounds each
// A row counts only when every acknowledged event is in PostgreSQL at the end (checked).
import { readFileSync, rmSync } from "node:fs";
import postgres from "postgres";
import { decodeBody } from "../src/codec/decode";
import { AppError } from "../src/errors";
import { createSource, spawnService } from "../test/helpers/service";
import { ExportLogsServiceRequest, attr, anyValue, otlpProtobuf } from "../test/helpers/protos";
import { benchDir, benchPostgres } from "./lib";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";
import { waitFor } from "../test/helpers/wait";

const BODIES = 64;
const RECORDS = 100;

function request(batch: number) {
  const now = BigInt(Date.now()) * 1_000_000n;
  const records = Array.from({ length: RECORDS }, (_, i) => {
    const n = batch * RECORDS + i;
    const error = n % 10 === 0;
    return {
      time_unix_nano: (now + BigInt(n) * 1000n).toString(),
      observed_time_unix_nano: (now + BigInt(n) * 1000n + 500n).toString(),
      severity_number: error ? 17 : 9,
      severity_text: error ? "ERROR" : "INFO",
      body: anyValue(error ? `payment for order ${n} failed: card declined by issuer` : `GET /api/orders/${n} served in ${n % 97} ms`),
      attributes: [
        attr("http.request.method", n % 3 ? "GET" : "POST"),
        attr("url.path", `/api/orders/${n}`),
        attr("http.response.status_code", error ? 502 : 200),
        attr("user.id", `u${n % 1000}`),
        attr("duration_ms", (n % 97) + 0.5),
        attr("request.id", `req-${n.toString(36)}-${batch}`),
      ],
      trace_id: Buffer.from(n.toString(16).padStart(32, "a"), "hex"),
      span_id: Buffer.from(n.toString(16).padStart(16, "b"), "hex"),
      flags: 1,
    };
  });
  return {
    resource_logs: [
      {
        resource: {
          attributes: [
            attr("service.name", "checkout"),
            attr("service.version", "2.4.1"),
            attr("host.name", "web-3"),
            attr("telemetry.sdk.language", "nodejs"),
            attr("telemetry.sdk.name", "opentelemetry"),
            attr("telemetry.sdk.version", "3.1.0"),
            attr("process.pid", 4242),
          ],
        },
        scope_logs: [{ scope: { name: "checkout", version: "2.4.1" }, log_records: records }],
      },
    ],
  };
}

const protoBodies = Array.from({ length: BODIES }, (_, b) => otlpProtobuf(request(b)));
const jsonBodies = protoBodies.map((body) => {
  const events = decodeBody(body, "otlp-proto");
  if (events instanceof AppError) throw new Error(events.message);
  return Buffer.from(JSON.stringify(events));
});

function timePerBody(work: (body: Buffer) => unknown, bodies: Buffer[]): number {
  for (let i = 0; i < 2000; i++) work(bodies[i % bodies.length]!);
  const rounds: number[] = [];
  for (let round = 0; round < 5; round++) {
    let n = 0;
    const start = performance.now();
    while (performance.now() - start < 300) work(bodies[n++ % bodies.length]!);
    rounds.push(((performance.now() - start) * 1000) / n);
  }
  return rounds.sort((a, b) => a - b)[2]!;
}

function micro(): void {
  const rows: [string, number][] = [
    ["ours: protobuf → events", timePerBody((body) => decodeBody(body, "otlp-proto"), protoBodies)],
    ["protobufjs: decode only (message objects, no events yet)", timePerBody((body) => ExportLogsServiceRequest.decode(body), protoBodies)],
    [
      "protobufjs: decode + toObject (longs and bytes as strings)",
      timePerBody((body) => ExportLogsServiceRequest.toObject(ExportLogsServiceRequest.decode(body), { longs: String, bytes: String }), protoBodies),
    ],
    ["the same events as JSON: decodeBody(json)", timePerBody((body) => decodeBody(body, "json"), jsonBodies)],
  ];
  console.log(
    `Bun ${Bun.version}; ${RECORDS}-record bodies of ${Math.round(protoBodies[0]!.length / 1024)} KiB (protobuf) / ${Math.round(jsonBodies[0]!.length / 1024)} KiB (JSON)`,
  );
  for (const [name, us] of rows) console.log(`${us.toFixed(1).padStart(8)} µs/body  ${name}`);
}

/** User + system CPU seconds of a process so far (/proc, all its threads). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

async function http(seconds: number): Promise<void> {
  const wrk = findWrk(console.log);
  if (!wrk.path) throw new Error(wrk.note);
  const work = benchDir("logpond-otlp-bench-");
  const pg = await benchPostgres(work);
  const service = await spawnService({ DATABASE_URL: pg.url, LOG_LEVEL: "silent" }).catch(async (error) => {
    await pg.stop();
    throw error;
  });
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const rows = {
      "OTLP protobuf → /v1/logs": {
        path: "/v1/logs",
        payload: { contentType: "application/x-protobuf", eventsPerBody: RECORDS, bodies: protoBodies },
        eps: [] as number[],
        cpu: [] as number[],
      },
      "same events, JSON array → /": {
        path: "/",
        payload: { contentType: "application/json", eventsPerBody: RECORDS, bodies: jsonBodies },
        eps: [] as number[],
        cpu: [] as number[],
      },
    };
    // Warm-up (not counted): the service's first seconds of either path run cold (JIT, ring slabs, flush thread).
    for (const row of Object.values(rows)) {
      const source = await createSource(service, `warm-up ${row.path}`);
      await runWrk(wrk.path, `${service.ingestUrl}${row.path}`, writeWrkFiles(`${work}/wrk-warm-${row.path.length}`, row.payload, [source.token]), BODIES, 2);
    }
    for (let round = 0; round < 3; round++) {
      for (const [name, row] of Object.entries(rows)) {
        const source = await createSource(service, `${name} ${round}`);
        const dir = writeWrkFiles(`${work}/wrk-${round}-${row.path.length}`, row.payload, [source.token]);
        const cpuBefore = cpuSeconds(service.proc.pid);
        const result = await runWrk(wrk.path, `${service.ingestUrl}${row.path}`, dir, BODIES, seconds);
        const cpu = cpuSeconds(service.proc.pid) - cpuBefore;
        const ok = (result.statuses["200"] ?? 0) + (result.statuses["202"] ?? 0);
        const acked = ok * RECORDS;
        // Every acknowledged event is in PostgreSQL before the figure counts.
        const stored = await waitFor(
          `the ${acked} acknowledged events to be stored`,
          async () => Number((await sql`select count(*) as n from log_events where source_id = ${source.id}`)[0]!.n),
          { timeoutMs: 60_000, intervalMs: 100, until: (n) => n >= acked },
        );
        // More may be stored: the requests in flight when wrk stopped were answered to no one (≤ one per connection).
        if (stored < acked || stored > acked + 64 * RECORDS) throw new Error(`${name}: ${acked} events acknowledged, ${stored} stored`);
        row.eps.push(acked / result.seconds);
        row.cpu.push((cpu * 1e6) / stored);
        console.log(
          `round ${round + 1} ${name}: ${Math.round(acked / result.seconds)} events/s, service CPU ${((cpu * 1e6) / stored).toFixed(2)} µs/event (${JSON.stringify(result.statuses)}, p99 ${result.p99.toFixed(1)} ms)`,
        );
      }
    }
    const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const otlp = median(rows["OTLP protobuf → /v1/logs"].eps),
      json = median(rows["same events, JSON array → /"].eps);
    console.log(`median: OTLP protobuf ${Math.round(otlp)} events/s, JSON array ${Math.round(json)} events/s: ${(otlp / json).toFixed(2)}× (target ≥ 0.8×)`);
    const otlpCpu = median(rows["OTLP protobuf → /v1/logs"].cpu),
      jsonCpu = median(rows["same events, JSON array → /"].cpu);
    console.log(
      `median service CPU per event (the flush thread's COPY included): OTLP ${otlpCpu.toFixed(2)} µs, JSON ${jsonCpu.toFixed(2)} µs: JSON/OTLP ${(jsonCpu / otlpCpu).toFixed(2)}×`,
    );
  } finally {
    await sql.end();
    await service.stop();
    await pg.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[2] === "micro") micro();
else await http(Number(process.argv[2] ?? 8));
