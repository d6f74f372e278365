// logpond's rows: each scenario against `bun src/main.ts`, per corpus, `runs` times. Throughput
// rows are driven by wrk -c64 (bench/wrk.ts); the paced half-load row and the durable row by the
// JS generator (bench/generator.ts: it paces, and it times only acknowledged requests).
// Conservation after every run: PostgreSQL holds exactly what the service acknowledged, or the
// bench fails. With wrk the client's count can be short by the requests still in flight when wrk
// stops (their 202s are never read), so the service's own count (its /metrics) is the reference
// and the client's must lie within one request per connection below it.
import * as path from "node:path";
import postgres from "postgres";
import type { Service } from "../test/helpers/service";
import { cpuSeconds, fmt, median, metricSum, peakRss, resetPeakRss, type BenchContext, type Row, type Run } from "./lib";
import { payload, type Corpus, type PayloadName } from "./payloads";
import { runWrk, WRK_CONNECTIONS, writeWrkFiles } from "./wrk";
import { waitFor } from "../test/helpers/wait";

export interface Scenario {
  name: string;
  payload: PayloadName;
  note: string;
  tool: "wrk" | "js";
  /** Which ceiling the ratio divides by. */
  ratio?: "copy" | "bare";
  sources?: "one" | "many";
  /** JS generator only: requests per second in total (a function of rows already measured). */
  rate?: (rows: Row[], corpus: Corpus) => number | undefined;
  durable?: boolean;
}

const JS_CONCURRENCY = 16;

export const SCENARIOS: Scenario[] = [
  { name: "json-100", payload: "json-100", note: "100-event JSON arrays", tool: "wrk", ratio: "copy" },
  { name: "ndjson-100", payload: "ndjson-100", note: "100-event NDJSON", tool: "wrk", ratio: "copy" },
  { name: "msgpack-100", payload: "msgpack-100", note: "100-event MessagePack arrays of plain maps", tool: "wrk", ratio: "copy" },
  { name: "msgpack-records-100", payload: "msgpack-records-100", note: "msgpackr records, each body with its own definitions", tool: "wrk", ratio: "copy" },
  {
    name: "logtail-gzip-msgpack-1000",
    payload: "logtail-gzip-msgpack-1000",
    note: "as @logtail/node sends: @msgpack/msgpack, Date dt, gzip, 1000 events",
    tool: "wrk",
    ratio: "copy",
  },
  { name: "json-1", payload: "json-1", note: "single-event JSON", tool: "wrk", ratio: "bare" },
  { name: "sources-1000", payload: "json-100", note: "json-100 over 1,000 sources, round-robin", tool: "wrk", ratio: "copy", sources: "many" },
  {
    name: "json-100 at half load",
    payload: "json-100",
    note: "JS generator paced to half of json-100's req/s",
    tool: "js",
    ratio: "copy",
    rate: (rows, corpus) => {
      const full = rows.find((r) => r.name === "json-100" && r.corpus === corpus);
      return full ? full.median.requestsPerSecond / 2 : undefined;
    },
  },
  {
    name: "durable json-100",
    payload: "json-100",
    note: `INGEST_ACK=durable: 202 after commit; JS generator, ${JS_CONCURRENCY} in flight`,
    tool: "js",
    ratio: "copy",
    durable: true,
  },
];

export interface ScenarioEnv {
  service: Service;
  sources: { id: number; token: string }[];
  clear(): Promise<void>;
  ceilings: { copy: number; bare: Record<string, number> };
}

export async function runScenario(ctx: BenchContext, s: Scenario, corpus: Corpus, env: ScenarioEnv, rows: Row[]): Promise<Row | undefined> {
  const p = payload(s.payload, corpus);
  const { service, sources } = env;
  const rate = s.rate?.(rows, corpus);
  if (s.rate && rate === undefined) return undefined;
  if (s.tool === "wrk" && !ctx.wrk) return undefined;
  const dir =
    s.tool === "wrk"
      ? writeWrkFiles(
          path.join(ctx.work, `wrk-${s.name.replace(/\W+/g, "_")}-${corpus}`),
          p,
          sources.map((x) => x.token),
        )
      : "";
  const runs: Run[] = [];
  let mismatch: string | undefined;
  for (let r = 0; r < ctx.runs; r++) {
    await env.clear();
    const before = await countStored(ctx.sql, sources);
    const received = await receivedEvents(service);
    resetPeakRss(service.proc.pid);
    const cpu = cpuSeconds(service.proc.pid);
    let client: { requests: number; ok: number; seconds: number; p50: number; p99: number; generatorCpu: number };
    if (s.tool === "wrk") {
      const w = await runWrk(ctx.wrk!, `${service.ingestUrl}/`, dir, p.bodies.length, ctx.seconds);
      client = { requests: w.requests, ok: w.statuses["202"] ?? 0, seconds: w.seconds, p50: w.p50, p99: w.p99, generatorCpu: w.cpuSeconds / w.seconds };
    } else {
      const g = await generate(
        ctx,
        `${service.ingestUrl}/`,
        sources.map((x) => x.token),
        s.payload,
        corpus,
        rate,
      );
      client = { requests: g.requests, ok: g.statuses["202"] ?? 0, seconds: g.seconds, p50: g.p50, p99: g.p99, generatorCpu: g.cpuSeconds / g.seconds };
    }
    // Sustained: the clock stops when the last acknowledged event is committed. Requests wrk left
    // in flight may still be answered after it exits: wait until the service's count is still.
    const drainStarted = performance.now();
    await settled(service);
    await drained(service);
    const seconds = client.seconds + Math.max(0, (performance.now() - drainStarted) / 1000 - SETTLE_SECONDS);
    const rss = peakRss(service.proc.pid);
    const serviceCpu = cpuSeconds(service.proc.pid) - cpu;
    const stored = (await countStored(ctx.sql, sources)) - before;
    const serverAcked = (await receivedEvents(service)) - received;
    const acked = client.ok * p.eventsPerBody;
    const slack = s.tool === "wrk" ? WRK_CONNECTIONS * p.eventsPerBody : 0;
    const ok = stored === serverAcked && acked <= serverAcked && serverAcked - acked <= slack;
    if (!ok) mismatch = `run ${r + 1}: client acked ${acked}, service acked ${serverAcked}, stored ${stored}`;
    const bytesPerBody = p.bodies.reduce((sum, b) => sum + b.byteLength, 0) / p.bodies.length;
    runs.push({
      eventsPerSecond: serverAcked / seconds,
      requestsPerSecond: serverAcked / p.eventsPerBody / seconds,
      megabytesPerSecond: ((serverAcked / p.eventsPerBody) * bytesPerBody) / seconds / 1e6,
      p50: client.p50,
      p99: client.p99,
      peakRssMiB: rss,
      serviceCpuUsPerRequest: (serviceCpu * 1e6) / Math.max(1, client.requests),
      generatorCpu: client.generatorCpu,
      acked,
      serverAcked,
      stored,
      refused: client.requests - client.ok,
    });
    const run = runs[runs.length - 1]!;
    ctx.progress(
      `${s.name} ${corpus}, run ${r + 1}: ${fmt(run.eventsPerSecond)} events/s, ${fmt(run.requestsPerSecond)} req/s, p50 ${fmt(run.p50, 1)} / p99 ${fmt(run.p99, 1)} ms, ` +
        `RSS ${fmt(rss)} MiB, ${fmt(run.serviceCpuUsPerRequest, 1)} CPU µs/req, acked ${fmt(acked)} (service ${fmt(serverAcked)}) stored ${fmt(stored)} ${ok ? "OK" : "MISMATCH"}`,
    );
  }
  const m = median(runs);
  const ratio =
    s.ratio === "bare"
      ? { to: `bare Bun.serve, ${s.payload}`, value: m.requestsPerSecond / env.ceilings.bare[s.payload]! }
      : { to: "psql \\copy, 1 stream", value: m.eventsPerSecond / env.ceilings.copy };
  const note = rate ? `${s.note} (${fmt(rate)} req/s)` : s.note;
  return {
    name: s.name,
    corpus,
    kind: "scenario",
    tool: s.tool === "wrk" ? `wrk -c${WRK_CONNECTIONS}` : `JS ×${JS_CONCURRENCY}`,
    note,
    runs,
    median: m,
    ratio,
    mismatch,
  };
}

async function generate(ctx: BenchContext, url: string, tokens: string[], name: PayloadName, corpus: Corpus, rate?: number) {
  const config = { url, tokens, payload: name, corpus, seconds: ctx.seconds, concurrency: JS_CONCURRENCY, rate };
  const proc = Bun.spawn([process.execPath, path.join(import.meta.dir, "generator.ts"), JSON.stringify(config)], { stdout: "pipe", stderr: "inherit" });
  ctx.children.push(proc);
  const out = await new Response(proc.stdout as ReadableStream).text();
  if ((await proc.exited) !== 0) throw new Error(`generator failed: ${out}`);
  return JSON.parse(out) as {
    requests: number;
    statuses: Record<string, number>;
    ackedEvents: number;
    ackedBytes: number;
    seconds: number;
    p50: number;
    p99: number;
    cpuSeconds: number;
  };
}

async function countStored(sql: postgres.Sql, sources: { id: number }[]): Promise<number> {
  const ids = sources.map((s) => s.id);
  const [{ n }] = (await sql`select count(*)::int as n from log_events where source_id = any(${ids})`) as unknown as [{ n: number }];
  return n;
}

async function metric(service: Service, name: string): Promise<number> {
  const text = await (await fetch(`${service.apiUrl}/metrics`)).text();
  const value = metricSum(text, name);
  if (value === undefined) throw new Error(`metric ${name} not found`);
  return value;
}

const receivedEvents = (service: Service) => metric(service, "logpond_ingest_events_received_total");

/** The quiet interval `settled` waits for; not counted in the sustained clock. */
const SETTLE_SECONDS = 0.1;

/** Waits until the service's accepted-events count holds still for SETTLE_SECONDS (bounded: 10 s). */
async function settled(service: Service): Promise<void> {
  const deadline = Date.now() + 10_000;
  let last = await receivedEvents(service);
  while (Date.now() < deadline) {
    await Bun.sleep(SETTLE_SECONDS * 1000);
    const now = await receivedEvents(service);
    if (now === last) return;
    last = now;
  }
}

/** Waits until the service's buffer is empty (all acknowledged events committed). */
async function drained(service: Service): Promise<void> {
  await waitFor("the service to drain its buffer", () => metric(service, "logpond_buffer_events"), {
    timeoutMs: 120_000,
    intervalMs: 50,
    until: (n) => n === 0,
  });
}
