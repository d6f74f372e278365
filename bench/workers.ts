// The every-core bench: how logpond's ingest grows with INGEST_WORKERS, beside the ceilings measured
// in the same run on the same machine — COPY of the same events into one PostgreSQL over 1…16
// streams (postgres.js, an unindexed jsonb table: what the database takes with no HTTP), and a
// bare Bun.serve with reusePort in as many processes (what the senders and HTTP take with no
// logpond). Scaling claims come from a many-core machine; on two cores it only proves it runs.
//
//   npx bun bench/workers.ts [--events 3000000] [--workers 1,2,4,8] [--senders 16] [--load-procs 4]
//                            [--batch 1000] [--streams 1,2,4,8,16] [--copy-events 1000000]
//                            [--seal-interval-ms 600000] [--no-bare] [--no-copy]
//
// 1. Writes the corpus once (bench/scale/corpus.ts: realistic events over 24 h, 90/9/1 % sources).
// 2. The COPY ceiling: its first --copy-events events, as the rows logpond writes, COPYed in
//    10,000-row statements over S connections at once (an embedded PostgreSQL of its own).
// 3. For each N of --workers: a bare Bun.serve in N processes sharing one port (bench/bare-server.ts),
//    then `bun src/main.ts` with INGEST_WORKERS=N on its own embedded PostgreSQL; the file POSTed by
//    --load-procs sender processes (bench/scale/send.ts, --senders connections in all), timed from
//    the first request until every event is committed; CPU of each logpond process and of
//    PostgreSQL from /proc. With --seal-interval-ms below 600000 it also waits until everything is in
//    blocks. Then stops it.
// 4. Prints a Markdown table (rate(N) ÷ (N × rate(1)), CPU µs/event per process, load average)
//    and writes it to bench/out/workers-<time>.md.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import postgres from "postgres";
import { benchDir, benchPostgres, cpuSince, fmt, progress, treeCpu, type Cpu } from "./lib";
import { plan, type Plan, writeCorpus } from "./scale/corpus";
import type { Load } from "./scale/load";
import { NO_SEAL_INTERVAL_MS } from "./scale/options";
import { Cleanups, startScaleService, type ScaleService, type Source } from "./scale/service";
import { committedSince, counter, databaseNow, hotExact, stored } from "./scale/storage";
import { run } from "./scale/reads";

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback;
};
const list = (name: string, fallback: string) => option(name, fallback).split(",").map(Number);
const EVENTS = Number(option("events", "3000000"));
const WORKERS = list("workers", "1,2,4,8");
const SENDERS = Number(option("senders", "16"));
const LOAD_PROCS = Number(option("load-procs", "4"));
const BATCH = Number(option("batch", "1000"));
const STREAMS = list("streams", "1,2,4,8,16");
const COPY_EVENTS = Math.min(EVENTS, Number(option("copy-events", "1000000")));
const SEAL_INTERVAL_MS = Number(option("seal-interval-ms", String(NO_SEAL_INTERVAL_MS)));
const BARE = !argv.includes("--no-bare");
const COPY = !argv.includes("--no-copy");
const SPLIT = [90, 9, 1];
/** Rows per COPY statement in the ceiling: about what one flush writes at full speed. */
const COPY_CHUNK = 10_000;
if (
  ![EVENTS, SENDERS, LOAD_PROCS, BATCH, COPY_EVENTS].every((n) => Number.isInteger(n) && n >= 1) ||
  WORKERS.some((n) => !(n >= 1)) ||
  STREAMS.some((n) => !(n >= 1))
)
  throw new Error("--events, --senders, --load-procs, --batch, --copy-events, --workers and --streams take whole numbers ≥ 1");

const ROOT = path.join(import.meta.dir, "..");
const OUT = path.join(import.meta.dir, "out");
const STAMP = new Date().toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");
const cleanups = new Cleanups();
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.on(signal, async () => {
    progress(`${signal}: cleaning up`);
    await cleanups.run();
    process.exit(130);
  });

/**
 * POSTs the whole file from LOAD_PROCS processes. Each reads its share of the bodies into memory
 * first; `started` is called when all are ready, right before they are told to go.
 */
async function send(
  ingestUrl: string,
  sources: Source[],
  file: string,
  p: Plan,
  started: () => void = () => {},
): Promise<{ seconds: number; requests: number; retries: number; cpu: number }> {
  const procs = Array.from({ length: LOAD_PROCS }, (_, index) => {
    const job = { ingestUrl, sources, file, n: p.n, order: p.order, cumulative: p.cumulative, batch: BATCH, index, of: LOAD_PROCS };
    const senders = Math.max(1, Math.round(SENDERS / LOAD_PROCS));
    return Bun.spawn([process.execPath, path.join(import.meta.dir, "scale/send.ts"), JSON.stringify({ ...job, senders })], {
      cwd: ROOT,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "inherit",
    });
  });
  cleanups.push(async () => procs.forEach((proc) => proc.kill()));
  const outputs = procs.map((proc) => proc.stdout.getReader());
  const decoder = new TextDecoder();
  const texts = procs.map(() => "");
  /** Reads a sender's output until it holds `line`. */
  const until = async (i: number, done: (text: string) => boolean) => {
    while (!done(texts[i]!)) {
      const chunk = await outputs[i]!.read();
      if (chunk.done) throw new Error(`a sender process ended early (exit ${await procs[i]!.exited}): ${texts[i]}`);
      texts[i] += decoder.decode(chunk.value);
    }
  };
  await Promise.all(procs.map((_, i) => until(i, (text) => text.includes("ready\n"))));
  started();
  const at = performance.now();
  for (const proc of procs) {
    proc.stdin.write("go\n");
    proc.stdin.end();
  }
  await Promise.all(procs.map((_, i) => until(i, (text) => /\n\{.*\}\n/.test(text))));
  const seconds = (performance.now() - at) / 1000;
  for (const proc of procs) if ((await proc.exited) !== 0) throw new Error(`a sender process failed (exit ${proc.exitCode})`);
  const loads = texts.map((text) => JSON.parse(/\n(\{.*\})\n/.exec(text)![1]!) as Load);
  const events = loads.reduce((sum, l) => sum + l.events, 0);
  if (events !== p.n) throw new Error(`the senders had ${events} events acknowledged, the file holds ${p.n}`);
  // Their CPU includes reading the file: the table says so.
  const cpu = procs.reduce((sum, proc) => sum + Number(proc.resourceUsage()?.cpuTime.total ?? 0) / 1e6, 0);
  return { seconds, requests: loads.reduce((s, l) => s + l.requests, 0), retries: loads.reduce((s, l) => s + l.retries, 0), cpu };
}

async function waitUntil(what: string, done: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await Bun.sleep(100);
  }
  return performance.now();
}

interface Measured {
  workers: number;
  bare?: { seconds: number; cpu: number };
  seconds: number;
  acknowledgedSeconds: number;
  sealedAfterSeconds?: number;
  /** Of the events sealed, those whose blocks the memory path built (SEAL_FROM=memory). */
  fromMemory?: number;
  retries: number;
  cpu: Cpu;
  senderCpu: number;
  load: number;
}

/** The bare Bun.serve in `n` processes on one port, under the same senders: the HTTP and load ceiling. */
async function bare(n: number, file: string, p: Plan): Promise<{ seconds: number; cpu: number }> {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const servers = Array.from({ length: n }, () =>
    Bun.spawn([process.execPath, path.join(import.meta.dir, "bare-server.ts")], {
      env: { ...process.env, PORT: String(port), REUSE_PORT: "1" },
      stdout: "pipe",
    }),
  );
  const stop = async () => servers.forEach((s) => s.kill());
  cleanups.push(stop);
  try {
    await Promise.all(servers.map((s) => s.stdout.getReader().read())); // each printed its URL: listening
    const fake = SPLIT.map((_, i) => ({ id: i + 1, token: "bare", name: `bare ${i}` }));
    const done = await send(`http://127.0.0.1:${port}`, fake, file, p);
    return { seconds: done.seconds, cpu: done.cpu };
  } finally {
    await stop();
    await Promise.all(servers.map((s) => s.exited));
  }
}

async function measure(n: number, file: string, p: Plan): Promise<Measured> {
  const bareRun = BARE ? await bare(n, file, p) : undefined;
  if (bareRun) progress(`bare Bun.serve × ${n}: ${fmt(p.n / bareRun.seconds)} events/s`);
  const service: ScaleService = await startScaleService(
    {
      sealIntervalMs: SEAL_INTERVAL_MS,
      keep: false,
      keepSources: false,
      queryTimeoutMs: "",
      split: SPLIT,
      label: `${STAMP} w${n}`,
      env: { INGEST_WORKERS: String(n) },
    },
    cleanups,
  );
  try {
    const cpu = () => treeCpu(service.logpond.proc.pid);
    const since = await databaseNow(service.sql);
    let before = cpu();
    let load0 = 0;
    let started = 0;
    const sent = await send(service.logpond.ingestUrl, service.sources, file, p, () => {
      before = cpu();
      load0 = loadavg()[0]!;
      started = performance.now();
    });
    const storedAt = await waitUntil("every event committed", async () => (await committedSince(service.sql, since)) >= p.n, 300_000);
    const used = cpuSince(before, cpu());
    const count = await stored(service.sql, service.sources);
    if (count !== p.n) throw new Error(`INGEST_WORKERS=${n}: ${count} events stored, ${p.n} sent`);
    let sealedAfterSeconds: number | undefined;
    if (SEAL_INTERVAL_MS < NO_SEAL_INTERVAL_MS)
      sealedAfterSeconds = ((await waitUntil("everything in blocks", async () => (await hotExact(service.sql)) === 0, 600_000)) - storedAt) / 1000;
    const scraped = await (await fetch(`${service.logpond.apiUrl}/metrics`)).text();
    const fromMemory = SEAL_INTERVAL_MS < NO_SEAL_INTERVAL_MS ? counter(scraped, "logpond_sealer_events_from_memory_total") : undefined;
    return {
      workers: n,
      bare: bareRun,
      seconds: (storedAt - started) / 1000,
      acknowledgedSeconds: sent.seconds,
      sealedAfterSeconds,
      fromMemory,
      retries: sent.retries,
      cpu: used,
      senderCpu: sent.cpu,
      load: Math.max(load0, loadavg()[0]!),
    };
  } finally {
    await service.stop();
  }
}

/** COPY of the corpus's first COPY_EVENTS events, as logpond's rows, over each stream count. */
async function copyCeiling(file: string): Promise<{ streams: number; rate: number }[]> {
  const work = benchDir("logpond-bench-copy-");
  cleanups.push(async () => rmSync(work, { recursive: true, force: true }));
  const pg = await benchPostgres(work);
  cleanups.push(pg.stop);
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  await admin`create table if not exists copy_ceiling (id bigint not null, source_id bigint not null, dt timestamptz not null, raw jsonb not null)`;
  // The rows as COPY text: the JSON with backslashes doubled (its strings escape every control character).
  const lines: string[] = [];
  const dt = new Date().toISOString();
  let k = 0;
  for (const line of (await Bun.file(file).text()).split("\n")) {
    if (k >= COPY_EVENTS || !line) break;
    k++;
    lines.push(`${k}\t${(k % 3) + 1}\t${dt}\t${line.replaceAll("\\", "\\\\")}\n`);
  }
  const chunks: string[] = [];
  for (let at = 0; at < lines.length; at += COPY_CHUNK) chunks.push(lines.slice(at, at + COPY_CHUNK).join(""));
  const results: { streams: number; rate: number }[] = [];
  for (const streams of STREAMS) {
    await admin`truncate copy_ceiling`;
    await admin`checkpoint`;
    const connections = Array.from({ length: streams }, () => postgres(pg.url, { max: 1, onnotice: () => {} }));
    let next = 0;
    const started = performance.now();
    await Promise.all(
      connections.map(async (sql) => {
        for (let at = next++; at < chunks.length; at = next++) {
          await pipeline(Readable.from([chunks[at]!]), await sql`copy copy_ceiling from stdin`.writable());
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    await Promise.all(connections.map((sql) => sql.end({ timeout: 5 })));
    const [row] = await admin`select count(*)::bigint as n from copy_ceiling`;
    if (Number(row!.n) !== lines.length) throw new Error(`COPY ceiling: ${row!.n} rows, ${lines.length} sent`);
    results.push({ streams, rate: lines.length / seconds });
    progress(`COPY, ${streams} streams: ${fmt(lines.length / seconds)} rows/s`);
  }
  await admin.end({ timeout: 5 });
  await pg.stop();
  return results;
}

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, `workers-${STAMP}.ndjson`);
  cleanups.push(async () => rmSync(file, { force: true }));
  const commit = (await run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])).stdout.trim();
  const cpu = cpus();
  const header = `## logpond workers bench, ${fmt(EVENTS)} events — ${new Date().toISOString().slice(0, 16)}Z, ${cpu.length} × ${cpu[0]?.model ?? "cpu"}, ${fmt(totalmem() / (1 << 30), 0)} GiB RAM, Bun ${Bun.version}, commit ${commit || "?"}`;
  console.log(header);
  const p = plan(EVENTS, SPLIT, "time");
  progress(`generating ${fmt(EVENTS)} events`);
  const corpus = await writeCorpus(file, EVENTS, p);
  const copy = COPY ? await copyCeiling(file) : [];
  const runs: Measured[] = [];
  for (const n of WORKERS) {
    const m = await measure(n, file, p);
    runs.push(m);
    progress(`INGEST_WORKERS=${n}: ${fmt(EVENTS / m.seconds)} events/s stored`);
  }
  const one = runs.find((r) => r.workers === 1);
  const us = (seconds: number) => fmt((seconds * 1e6) / EVENTS, 1);
  const rows = [
    `${header}`,
    "",
    `${fmt(EVENTS)} events (${fmt(corpus.bytes / EVENTS, 1)} B/event as NDJSON), ${LOAD_PROCS} sender processes, ${SENDERS} connections, ${BATCH} events per request, SEAL_INTERVAL_MS=${SEAL_INTERVAL_MS}.`,
    "",
    ...(copy.length
      ? [
          "| COPY streams | rows/s | ÷ 1 stream |",
          "|---:|---:|---:|",
          ...copy.map((c) => `| ${c.streams} | ${fmt(c.rate)} | ${fmt(c.rate / copy[0]!.rate, 2)} |`),
          "",
        ]
      : []),
    "| INGEST_WORKERS | events/s stored | rate(N) ÷ (N × rate(1)) | ÷ best COPY | bare Bun.serve events/s | logpond CPU µs/event (per process) | PostgreSQL µs/event | senders µs/event (reading the file too) | load avg (1 min) | in blocks, s after |",
    "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ...runs.map((r) => {
      const rate = EVENTS / r.seconds;
      const best = Math.max(0, ...copy.map((c) => c.rate));
      return `| ${r.workers} | ${fmt(rate)} | ${one ? fmt(rate / (r.workers * (EVENTS / one.seconds)), 2) : "—"} | ${best ? fmt(rate / best, 2) : "—"} | ${r.bare ? fmt(EVENTS / r.bare.seconds) : "—"} | ${us(r.cpu.logpond)} (${r.cpu.processes
        .filter((p) => p.seconds > 0.05)
        .map((p) => us(p.seconds))
        .join(
          " + ",
        )}) | ${us(r.cpu.postgres)} | ${us(r.senderCpu)} | ${fmt(r.load, 2)} | ${r.sealedAfterSeconds === undefined ? "—" : `${fmt(r.sealedAfterSeconds, 1)} (${fmt(r.fromMemory ?? 0)} built from memory)`} |`;
    }),
    "",
    `Retries after 503/429: ${runs.map((r) => `${r.workers} → ${r.retries}`).join(", ")}.`,
  ];
  const text = rows.join("\n");
  console.log(text);
  writeFileSync(path.join(OUT, `workers-${STAMP}.md`), `${text}\n`);
}

try {
  await main();
} finally {
  await cleanups.run();
}
