// `npm run bench`: logpond's speed as ratios to ceilings measured in the same run, on this box.
//   npm run bench [-- --quick] [--runs 3] [--seconds 8] [--only json-100,durable]
// 1. PostgreSQL: the embedded one in a temporary DATA_DIR, or DATABASE_URL (then log_events is
//    not truncated between runs; the bench's sources are deleted at the end).
// 2. Ceilings: (a) COPY of the same events' rows from a file, no HTTP (what psql \copy does),
//    one stream and two; (b) a bare Bun.serve that reads the body and answers 202, driven by the
//    same generator.
// 3. Scenarios against `bun src/main.ts`, each `runs` times; medians reported. After each run the
//    conservation check: PostgreSQL holds exactly the acknowledged events, or the bench fails.
// 4. Micro-benchmarks (bench/micro.ts). Results: a table on stdout, bench/results/<time>.json,
//    and bench/RESULTS.md (committed).
import { spawnSync } from "node:child_process";
import { createReadStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import * as path from "node:path";
import { pipeline } from "node:stream/promises";
import postgres from "postgres";
import { prefixIds } from "../src/buffer/ids";
import { decodeBody } from "../src/ingest/decode";
import { encodeEvents } from "../src/ingest/encode";
import { runMigrations } from "../src/store/db";
import { startEmbeddedPostgres } from "../src/store/embedded";
import { createSource, spawnService, SERVICE_API_TOKEN, type Service } from "../test/helpers/service";
import { runMicro, type MicroResult } from "./micro";
import { payload, type PayloadName } from "./payloads";

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] ? argv[at + 1]! : fallback;
};
const QUICK = flag("quick");
const RUNS = Number(option("runs", QUICK ? "1" : "3"));
const SECONDS = Number(option("seconds", QUICK ? "3" : "8"));
const ONLY = option("only", "").split(",").filter(Boolean);
const CONCURRENCY = 16;
const COPY_EVENTS = QUICK ? 300_000 : 1_000_000;
const ROOT = path.join(import.meta.dir, "..");
const FLUSH_INTERVAL_MS = 200;
const BUFFER_MAX_BYTES = 256 * 1024 * 1024;

interface Run {
  eventsPerSecond: number;
  requestsPerSecond: number;
  megabytesPerSecond: number;
  p50: number;
  p99: number;
  peakRssMiB: number;
  generatorCpu: number;
  acked: number;
  stored: number;
  refused: number;
}
interface Row {
  name: string;
  kind: "ceiling" | "scenario";
  note: string;
  runs: Run[];
  median: Run;
  ratio?: { to: string; value: number };
}

const rows: Row[] = [];
let copyTwoStreams = 0;
const work = mkdtempSync(path.join(tmpdir(), "logpond-bench-"));
let failed = false;
const children: { kill(signal?: number | NodeJS.Signals): void }[] = [];

function median(runs: Run[]): Run {
  const pick = (key: keyof Run) => {
    const sorted = runs.map((r) => r[key]).sort((a, b) => a - b);
    return sorted[sorted.length >> 1]!;
  };
  return Object.fromEntries((Object.keys(runs[0]!) as (keyof Run)[]).map((k) => [k, pick(k)])) as unknown as Run;
}

const fmt = (n: number, digits = 0) => n.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
function progress(line: string) {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

async function generate(url: string, tokens: string[], name: PayloadName, options: { rate?: number; concurrency?: number } = {}) {
  const proc = Bun.spawn(
    [process.execPath, path.join(import.meta.dir, "generator.ts"), JSON.stringify({ url, tokens, payload: name, seconds: SECONDS, concurrency: options.concurrency ?? CONCURRENCY, rate: options.rate })],
    { stdout: "pipe", stderr: "inherit" },
  );
  children.push(proc);
  const out = await new Response(proc.stdout as ReadableStream).text();
  if ((await proc.exited) !== 0) throw new Error(`generator failed: ${out}`);
  return JSON.parse(out) as { requests: number; statuses: Record<string, number>; ackedEvents: number; ackedBytes: number; seconds: number; p50: number; p99: number; cpuSeconds: number };
}

function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) / 1024;
}
function resetPeakRss(pid: number) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5"); // Linux: resets VmHWM to the current RSS
  } catch {}
}

async function main() {
  // ---- storage ----
  let url = process.env.DATABASE_URL;
  let stopPostgres = async () => {};
  if (!url) {
    const pg = await startEmbeddedPostgres(path.join(work, "pg"), 0);
    url = pg.url;
    stopPostgres = () => pg.stop();
  }
  const embedded = !process.env.DATABASE_URL;
  await runMigrations(url);
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  const clear = async () => {
    if (embedded) await sql`truncate log_events, flush_batches`;
  };

  const pgVersion = (await sql`select version() as v`)[0]!.v as string;
  const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).stdout.trim() || "unknown";
  const dirty = spawnSync("git", ["status", "--porcelain", "--", "src"], { cwd: ROOT, encoding: "utf8" }).stdout.trim() !== "";
  const machine = { cpu: cpus()[0]?.model ?? "unknown", cores: cpus().length, bun: Bun.version, postgres: pgVersion.split(" on ")[0]!, commit: dirty ? `${commit}+changes` : commit };
  progress(`bench: ${RUNS} run(s) of ${SECONDS} s, concurrency ${CONCURRENCY}; ${machine.cpu} × ${machine.cores}, Bun ${machine.bun}, ${machine.postgres}, commit ${machine.commit}`);

  const want = (name: string) => ONLY.length === 0 || ONLY.some((o) => name.includes(o));

  try {
    // ---- ceiling (a): COPY from a file ----
    const { bodies } = payload("json-100");
    const rowsFor = bodies.map((b) => (encodeEvents(decodeBody(Buffer.from(b), "json") as unknown[], "json", 1, new Date().toISOString(), { maxEventBytes: 1 << 20, maxDepth: 64 }) as { rows: string }).rows);
    const files = [path.join(work, "copy-a.txt"), path.join(work, "copy-b.txt")];
    const half = COPY_EVENTS / 2 / 100;
    // Rows as the flusher writes them since storage v2: each line prefixed with its event id.
    files.forEach((file, f) => writeFileSync(file, prefixIds(Array.from({ length: half }, (_, i) => rowsFor[i % rowsFor.length]).join(""), half * 100, 1 + f * half * 100)));
    const fileBytes = files.reduce((sum, f) => sum + Bun.file(f).size, 0);
    const copyFiles = async (streams: 1 | 2): Promise<number> => {
      await clear();
      const connections = Array.from({ length: streams }, () => postgres(url!, { max: 1, onnotice: () => {} }));
      const started = performance.now();
      const parts = streams === 1 ? [files] : files.map((f) => [f]);
      await Promise.all(
        parts.map(async (list, k) => {
          for (const file of list) await pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), await connections[k]!`copy log_events (id, source_id, dt, raw) from stdin`.writable());
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      await Promise.all(connections.map((c) => c.end()));
      const [{ n }] = (await sql`select count(*)::int as n from log_events where source_id = 1`) as unknown as [{ n: number }];
      if (embedded && n !== COPY_EVENTS) throw new Error(`COPY ceiling stored ${n} of ${COPY_EVENTS}`);
      return seconds;
    };
    await copyFiles(2); // warm-up: WAL segments and caches, as later runs find them
    for (const streams of [1, 2] as const) {
      const runs: Run[] = [];
      for (let r = 0; r < RUNS; r++) {
        const seconds = await copyFiles(streams);
        runs.push({ eventsPerSecond: COPY_EVENTS / seconds, requestsPerSecond: 0, megabytesPerSecond: fileBytes / seconds / 1e6, p50: 0, p99: 0, peakRssMiB: 0, generatorCpu: 0, acked: COPY_EVENTS, stored: COPY_EVENTS, refused: 0 });
        progress(`ceiling: file COPY, ${streams} stream(s), run ${r + 1}: ${fmt(COPY_EVENTS / seconds)} events/s`);
      }
      rows.push({ name: `file COPY, ${streams} stream${streams > 1 ? "s" : ""}`, kind: "ceiling", note: `${fmt(COPY_EVENTS)} events (${fmt(fileBytes / 1e6)} MB) of json-100's rows`, runs, median: median(runs) });
    }
    await clear();
    // The ceiling is what psql \copy does, one stream; the two-stream figure is shown beside it.
    const copyCeiling = rows[0]!.median.eventsPerSecond;
    copyTwoStreams = rows[1]!.median.eventsPerSecond;

    // ---- ceiling (b): bare Bun.serve ----
    const bareServer = await startBare();
    const bareCeiling: Record<string, number> = {};
    for (const name of ["json-1", "json-100"] as PayloadName[]) {
      const runs: Run[] = [];
      for (let r = 0; r < RUNS; r++) {
        resetPeakRss(bareServer.pid);
        const g = await generate(bareServer.url, ["bare"], name);
        runs.push(toRun(g, peakRss(bareServer.pid), g.ackedEvents));
        progress(`ceiling: bare Bun.serve, ${name}, run ${r + 1}: ${fmt(g.requests / g.seconds)} req/s, p99 ${fmt(g.p99, 1)} ms`);
      }
      rows.push({ name: `bare Bun.serve, ${name}`, kind: "ceiling", note: "reads the body, answers 202", runs, median: median(runs) });
      bareCeiling[name] = median(runs).requestsPerSecond;
    }
    bareServer.kill();

    // ---- scenarios ----
    const buffered = await spawnService({ DATABASE_URL: url, DATA_DIR: path.join(work, "service"), LOG_LEVEL: "info" });
    children.push(buffered.proc);
    const one = await createSource(buffered, "bench");
    const many: { id: number; token: string }[] = [];
    if (want("sources-1000")) for (let i = 0; i < 1000; i++) many.push(await createSource(buffered, `bench ${i}`));

    const scenario = async (
      name: string,
      service: Service,
      payloadName: PayloadName,
      sources: { id: number; token: string }[],
      note: string,
      options: { rate?: number; ratio?: "copy" | "bare" } = {},
    ) => {
      if (!want(name)) return undefined;
      const runs: Run[] = [];
      for (let r = 0; r < RUNS; r++) {
        await clear();
        const before = await countStored(sql, sources);
        resetPeakRss(service.proc.pid);
        const g = await generate(`${service.ingestUrl}/`, sources.map((s) => s.token), payloadName, { rate: options.rate });
        // Sustained throughput: the clock stops when the last acknowledged event is committed.
        const drainStarted = performance.now();
        await drained(service);
        const drainSeconds = (performance.now() - drainStarted) / 1000;
        const rss = peakRss(service.proc.pid);
        const stored = (await countStored(sql, sources)) - before;
        const run = toRun({ ...g, seconds: g.seconds + drainSeconds }, rss, stored);
        runs.push(run);
        const ok = stored === g.ackedEvents;
        if (!ok) failed = true;
        progress(
          `${name}, run ${r + 1}: ${fmt(run.eventsPerSecond)} events/s, ${fmt(run.requestsPerSecond)} req/s, p50 ${fmt(run.p50, 1)} / p99 ${fmt(run.p99, 1)} ms, ` +
            `RSS ${fmt(rss)} MiB, acked ${fmt(g.ackedEvents)} stored ${fmt(stored)} ${ok ? "OK" : "MISMATCH"}`,
        );
      }
      const m = median(runs);
      const ratio =
        options.ratio === "bare"
          ? { to: `bare Bun.serve, ${payloadName}`, value: m.requestsPerSecond / bareCeiling[payloadName]! }
          : { to: "file COPY", value: m.eventsPerSecond / copyCeiling };
      rows.push({ name, kind: "scenario", note, runs, median: m, ratio });
      return m;
    };

    const json = await scenario("json-100", buffered, "json-100", [one], "100-event JSON arrays");
    await scenario("ndjson-100", buffered, "ndjson-100", [one], "100-event NDJSON");
    await scenario("msgpack-100", buffered, "msgpack-100", [one], "100-event MessagePack arrays of plain maps");
    await scenario("msgpack-records-100", buffered, "msgpack-records-100", [one], "msgpackr records, each body with its own definitions");
    await scenario("logtail-gzip-msgpack-1000", buffered, "logtail-gzip-msgpack-1000", [one], "as @logtail/node sends: @msgpack/msgpack, Date dt, gzip, 1000 events");
    await scenario("json-1", buffered, "json-1", [one], "single-event JSON", { ratio: "bare" });
    await scenario("sources-1000", buffered, "json-100", many, "json-100 over 1,000 sources, round-robin");
    if (json) await scenario("json-100 at half load", buffered, "json-100", [one], `paced to ${fmt(json.requestsPerSecond / 2)} req/s (half of json-100's)`, { rate: json.requestsPerSecond / 2 });
    buffered.proc.kill("SIGTERM");
    await buffered.proc.exited;

    if (want("durable")) {
      const durable = await spawnService({ DATABASE_URL: url, DATA_DIR: path.join(work, "durable"), INGEST_ACK: "durable" });
      children.push(durable.proc);
      const source = await createSource(durable, "bench durable");
      await scenario("durable json-100", durable, "json-100", [source], "INGEST_ACK=durable: 202 after commit");
      durable.proc.kill("SIGTERM");
      await durable.proc.exited;
    }

    // ---- micro ----
    progress("micro-benchmarks …");
    const micro = runMicro();

    // ---- report ----
    report(machine, micro);
    if (!embedded) {
      for (const s of [one, ...many]) await fetch(`${buffered.apiUrl}/api/v1/sources/${s.id}`, { method: "DELETE", headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` } }).catch(() => {});
    }
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await sql.end({ timeout: 5 });
    await stopPostgres();
    rmSync(work, { recursive: true, force: true });
  }
}

async function startBare(): Promise<{ url: string; pid: number; kill(): void }> {
  const proc = Bun.spawn([process.execPath, path.join(import.meta.dir, "bare-server.ts")], { stdout: "pipe", stderr: "inherit" });
  children.push(proc);
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { url: text.trim(), pid: proc.pid, kill: () => proc.kill("SIGTERM") };
}

function toRun(g: Awaited<ReturnType<typeof generate>>, rss: number, stored: number): Run {
  return {
    eventsPerSecond: g.ackedEvents / g.seconds,
    requestsPerSecond: (g.statuses["202"] ?? 0) / g.seconds,
    megabytesPerSecond: g.ackedBytes / g.seconds / 1e6,
    p50: g.p50,
    p99: g.p99,
    peakRssMiB: rss,
    generatorCpu: g.cpuSeconds / g.seconds,
    acked: g.ackedEvents,
    stored,
    refused: g.requests - (g.statuses["202"] ?? 0),
  };
}

async function countStored(sql: postgres.Sql, sources: { id: number }[]): Promise<number> {
  const ids = sources.map((s) => s.id);
  const [{ n }] = (await sql`select count(*)::int as n from log_events where source_id = any(${ids})`) as unknown as [{ n: number }];
  return n;
}

/** Waits until the service's buffer is empty (all acknowledged events committed). */
async function drained(service: Service): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const metrics = await (await fetch(`${service.apiUrl}/metrics`)).text();
    if (/^logpond_buffer_events 0$/m.test(metrics)) return;
    await Bun.sleep(50);
  }
  throw new Error("the service did not drain its buffer within 60 s");
}

function report(machine: Record<string, string | number>, micro: MicroResult[]) {
  const lines: string[] = [];
  const when = new Date().toISOString();
  lines.push(`# Bench results`, "");
  lines.push(`Written by \`npm run bench\` on ${when.slice(0, 10)}: ${RUNS} run(s) of ${SECONDS} s per row, medians shown; concurrency ${CONCURRENCY}`);
  lines.push(`(closed loop) from a Bun generator in its own process. Same box for generator, service and database.`, "");
  lines.push(`| | |`, `|---|---|`);
  lines.push(`| CPU | ${machine.cpu} × ${machine.cores} |`, `| Bun | ${machine.bun} |`, `| PostgreSQL | ${machine.postgres} |`, `| commit | ${machine.commit} |`);
  lines.push(`| settings | defaults: FLUSH_INTERVAL_MS=${FLUSH_INTERVAL_MS}, FLUSH_MAX_EVENTS=20000, FLUSH_STREAMS=2, BUFFER_MAX_BYTES=256 MiB |`, "");
  lines.push(`Ratios: events/s against file COPY with one stream (what \`psql \\copy\` does) and, in brackets, with two; single-event`);
  lines.push(`JSON's req/s against the bare Bun.serve's. events/s is sustained: the clock stops when the last acknowledged event is committed.`, "");
  lines.push(`| row | events/s | req/s | MB/s | p50 / p99 ms | ratio | peak RSS MiB | generator CPU | conservation |`);
  lines.push(`|---|---|---|---|---|---|---|---|---|`);
  for (const row of rows) {
    const m = row.median;
    const ratio = !row.ratio
      ? "ceiling"
      : row.ratio.to === "file COPY"
        ? `${row.ratio.value.toFixed(2)}× (${(m.eventsPerSecond / copyTwoStreams).toFixed(2)}× of 2 streams)`
        : `${row.ratio.value.toFixed(2)}× bare Bun.serve`;
    const conservation = row.kind === "ceiling" ? "—" : row.runs.every((r) => r.stored === r.acked) ? `stored = acked (${fmt(m.acked)})` : "**MISMATCH**";
    lines.push(
      `| ${row.name} — ${row.note} | ${fmt(m.eventsPerSecond)} | ${m.requestsPerSecond ? fmt(m.requestsPerSecond) : "—"} | ${fmt(m.megabytesPerSecond, 1)} | ${m.p99 ? `${fmt(m.p50, 1)} / ${fmt(m.p99, 1)}` : "—"} | ${ratio} | ${m.peakRssMiB ? fmt(m.peakRssMiB) : "—"} | ${m.generatorCpu ? `${fmt(m.generatorCpu * 100)}%` : "—"} | ${conservation} |`,
    );
  }
  lines.push("", "## Targets", "", "| target | figure | met |", "|---|---|---|");
  const get = (name: string) => rows.find((r) => r.name === name);
  const target = (label: string, figure: string, met: boolean | undefined) => lines.push(`| ${label} | ${figure} | ${met === undefined ? "not run" : met ? "yes" : "**no**"} |`);
  const json = get("json-100");
  const records = get("msgpack-records-100");
  const single = get("json-1");
  const half = get("json-100 at half load");
  const durable = get("durable json-100");
  target("json-100 ≥ 0.9× file COPY (psql \\copy: one stream)", json ? `${json.ratio!.value.toFixed(2)}× (${(json.median.eventsPerSecond / copyTwoStreams).toFixed(2)}× of two parallel file COPY streams)` : "—", json && json.ratio!.value >= 0.9);
  target("msgpack records ≥ JSON", records && json ? `${fmt(records.median.eventsPerSecond)} vs ${fmt(json.median.eventsPerSecond)} events/s` : "—", records && json ? records.median.eventsPerSecond >= json.median.eventsPerSecond : undefined);
  target("single-event JSON ≥ 0.7× bare Bun.serve req/s", single ? `${single.ratio!.value.toFixed(2)}×` : "—", single && single.ratio!.value >= 0.7);
  target("buffered p99 ≤ 20 ms at half the maximum", half ? `${fmt(half.median.p99, 1)} ms` : "—", half && half.median.p99 <= 20);
  target(`durable p99 ≤ FLUSH_INTERVAL_MS + 30 = ${FLUSH_INTERVAL_MS + 30} ms`, durable ? `${fmt(durable.median.p99, 1)} ms` : "—", durable && durable.median.p99 <= FLUSH_INTERVAL_MS + 30);
  const peak = Math.max(...rows.filter((r) => r.kind === "scenario").map((r) => Math.max(...r.runs.map((x) => x.peakRssMiB))));
  target(`peak RSS ≤ BUFFER_MAX_BYTES + 200 MiB = ${BUFFER_MAX_BYTES / 2 ** 20 + 200} MiB`, `${fmt(peak)} MiB`, peak <= BUFFER_MAX_BYTES / 2 ** 20 + 200);
  lines.push("", "## Micro-benchmarks (bench/micro.ts, one core, no I/O)", "", "| hop | events/s | µs per body |", "|---|---|---|");
  for (const m of micro) lines.push(`| ${m.name} | ${fmt(m.eventsPerSecond)} | ${fmt(m.microsecondsPerBody, 1)} |`);
  lines.push("", "Every figure is from one `npm run bench`; ratios compare rows of the same run. Raw runs: `bench/results/`.", "");

  const text = lines.join("\n");
  console.log(`\n${text}`);
  mkdirSync(path.join(import.meta.dir, "results"), { recursive: true });
  const stamp = when.replace(/[:.]/g, "-");
  writeFileSync(path.join(import.meta.dir, "results", `${stamp}.json`), `${JSON.stringify({ when, machine, runs: RUNS, seconds: SECONDS, concurrency: CONCURRENCY, rows, micro }, null, 2)}\n`);
  if (!QUICK && ONLY.length === 0) writeFileSync(path.join(import.meta.dir, "RESULTS.md"), text);
}

await main();
if (failed) {
  console.error("bench: conservation check FAILED (stored ≠ acknowledged in some run)");
  process.exit(1);
}
