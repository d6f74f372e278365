// Where the box's CPU goes during one wrk scenario — logpond, PostgreSQL's processes, the kernel's
// writeback — per event, and the end-to-end rate (accepted events until the last is committed):
//   bun bench/cpu-split.ts [payload=json-100] [corpus=realistic] [seconds=10] [--paused] [--pre=<payload>]
// --paused: the source is paused (no ring, no COPY); --pre: 5 s of another payload first, on the same
// service (the full bench runs every scenario on one service). A 3 s warm-up precedes the measured run.
// How binary COPY's end-to-end figures in README "Storage layout" were taken.
import { readdirSync, readFileSync } from "node:fs";
import type { Corpus, PayloadName } from "./payloads";
import { metricSum } from "./lib";
import { startProbe } from "./probe";

const [name = "json-100", corpus = "realistic", seconds = "10"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const paused = process.argv.includes("--paused");
const pre = process.argv.find((a) => a.startsWith("--pre="))?.slice(6) as PayloadName | undefined;
const probe = await startProbe("logpond-split-", name as PayloadName, corpus as Corpus);
const { service } = probe;

/**
 * CPU seconds so far of each process (or thread) under `dir` (/proc, /proc/<pid>/task), summed by
 * the key `keyOf` gives its id and name.
 */
function cpuUnder(dir: string, keyOf: (id: number, comm: string) => string): Map<string, number> {
  const seconds = new Map<string, number>();
  for (const id of readdirSync(dir)) {
    if (!/^\d+$/.test(id)) continue;
    try {
      const stat = readFileSync(`${dir}/${id}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const key = keyOf(Number(id), comm);
      seconds.set(key, (seconds.get(key) ?? 0) + (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {} // it ended while it was read
  }
  return seconds;
}
/** By process: the service, PostgreSQL's processes together, others by name. */
const cpuByProcess = () => cpuUnder("/proc", (pid, comm) => (pid === service.proc.pid ? "logpond" : comm.startsWith("postgres") ? "postgres" : comm));
/** The service's threads, by name (the main thread is "main"). */
const cpuByThread = () => cpuUnder(`/proc/${service.proc.pid}/task`, (tid, comm) => (tid === service.proc.pid ? "main" : comm));
const metric = async (key: string) => metricSum(await (await fetch(`${service.apiUrl}/metrics`)).text(), key)!;
const drained = async () => {
  const received = await metric("logpond_ingest_events_received_total");
  while (!paused && (await metric("logpond_flush_events_total")) < received) await Bun.sleep(20);
};

try {
  if (pre) {
    await probe.load(5, pre);
    await drained();
    console.log(`pre: ${pre} for 5 s, drained; RSS now ${Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${service.proc.pid}/status`, "utf8"))![1]) / 1024)} MiB`);
  }
  await probe.load(3); // warm-up
  await drained();
  const before = cpuByProcess();
  const threadsBefore = cpuByThread();
  const receivedBefore = await metric("logpond_ingest_events_received_total");
  const started = performance.now();
  const run = await probe.load(Number(seconds));
  await drained();
  const endToEnd = (performance.now() - started) / 1000;
  const events = (await metric("logpond_ingest_events_received_total")) - receivedBefore;
  const after = cpuByProcess();
  const threadsAfter = cpuByThread();
  console.log(`${name} ${corpus}${paused ? " (paused)" : ""}: ${(run.requests / run.seconds).toFixed(0)} req/s sent, ${events} events accepted; end to end (drain included, ${endToEnd.toFixed(1)} s): ${(events / endToEnd).toFixed(0)} events/s`);
  const used = [...after].map(([key, total]) => [key, total - (before.get(key) ?? 0)] as const).filter(([, s]) => s > 0.05).sort((x, y) => y[1] - x[1]);
  for (const [key, s] of used) console.log(`  ${key.padEnd(16)} ${s.toFixed(2)} s  ${((s / endToEnd) * 100).toFixed(0)}% of a core  ${((s * 1e6) / events).toFixed(2)} µs/event`);
  const threads = [...threadsAfter].map(([key, total]) => [key, total - (threadsBefore.get(key) ?? 0)] as const).filter(([, s]) => s > 0.05).sort((x, y) => y[1] - x[1]);
  console.log(`  logpond's threads: ${threads.map(([key, s]) => `${key} ${((s * 1e6) / events).toFixed(2)}`).join(", ")} µs/event`);
} finally {
  await probe.stop();
}
