// Where the box's CPU goes during one wrk scenario — logpond, PostgreSQL's processes, the kernel's
// writeback — per event, and the end-to-end rate (until the last accepted event is committed):
//   bun bench/cpu-split.ts [payload=json-100] [corpus=realistic] [seconds=10] [--paused] [--pre=<payload>]
// --paused: the source is paused (no ring, no COPY); --pre: 5 s of another payload first, on the same
// service (the full bench runs every scenario on one service). A 3 s warm-up precedes the measured run.
// How binary COPY's end-to-end figures in README "Storage layout" were taken.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import { createSource, SERVICE_API_TOKEN, spawnService } from "../test/helpers/service";
import { benchDir, benchPostgres } from "./lib";
import { payload, type Corpus, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";

const [name = "json-100", corpus = "realistic", seconds = "10"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const work = benchDir("logpond-split-");
const pg = await benchPostgres(work);
const svc = await spawnService({ DATABASE_URL: pg.url, DATA_DIR: path.join(work, "data"), ...(process.env.EXTRA ? JSON.parse(process.env.EXTRA) : {}) });
function byComm(): Map<string, number> {
  const m = new Map<string, number>();
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const key = Number(pid) === svc.proc.pid ? "logpond" : comm.startsWith("postgres") ? "postgres" : comm;
      m.set(key, (m.get(key) ?? 0) + (Number(f[11]) + Number(f[12])) / 100);
    } catch {}
  }
  return m;
}
const total = () => { const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number); return { busy: f[0]! + f[1]! + f[2]! + f[5]! + f[6]!, all: f.reduce((a, b) => a + b, 0) }; };
try {
  const src = await createSource(svc, "split");
  if (process.argv.includes("--paused")) await fetch(`${svc.apiUrl}/api/v1/sources/${src.id}`, { method: "PATCH", headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` }, body: JSON.stringify({ ingesting_paused: true }) });
  const p = payload(name as PayloadName, corpus as Corpus);
  const dir = writeWrkFiles(path.join(work, "wrk"), p, [src.token]);
  const wrk = findWrk(() => {}).path!;
  const pre = process.argv.find((a) => a.startsWith("--pre="))?.slice(6);
  if (pre) {
    const pp = payload(pre as PayloadName, corpus as Corpus);
    const pdir = writeWrkFiles(path.join(work, "wrk-pre"), pp, [src.token]);
    await runWrk(wrk, svc.ingestUrl + "/", pdir, pp.bodies.length, 5);
    const m = async (key: string) => Number(new RegExp(`^${key} (\\d+)`, "m").exec(await (await fetch(`${svc.apiUrl}/metrics`)).text())![1]);
    while ((await m("logpond_flush_events_total")) < (await m("logpond_ingest_events_received_total"))) await Bun.sleep(50);
    console.log(`pre: ${pre} for 5 s, drained; RSS now ${Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${svc.proc.pid}/status`, "utf8"))![1]) / 1024)} MiB`);
  }
  await runWrk(wrk, svc.ingestUrl + "/", dir, p.bodies.length, 3); // warm
  await Bun.sleep(3000);
  const a = byComm(); const ta = total();
  const r = await runWrk(wrk, svc.ingestUrl + "/", dir, p.bodies.length, Number(seconds));
  const metric = async (key: string) => Number(new RegExp(`^${key} (\\d+)`, "m").exec(await (await fetch(`${svc.apiUrl}/metrics`)).text())![1]);
  const acked = await metric("logpond_ingest_events_received_total");
  const t0 = performance.now() - r.seconds * 1000;
  while (!process.argv.includes("--paused") && (await metric("logpond_flush_events_total")) < acked) await Bun.sleep(20);
  const endToEnd = (performance.now() - t0) / 1000;
  const b = byComm(); const tb = total();
  const events = r.requests * p.eventsPerBody;
  console.log(`end-to-end (incl. drain, ${endToEnd.toFixed(1)} s): ${(events / endToEnd).toFixed(0)} ev/s`);
  console.log(`${name} ${corpus}: ${(r.requests / r.seconds).toFixed(0)} req/s, ${(events / r.seconds).toFixed(0)} ev/s accepted; machine busy ${(((tb.busy - ta.busy) / (tb.all - ta.all)) * 100).toFixed(0)}%`);
  const rows = [...b].map(([k, v]) => [k, v - (a.get(k) ?? 0)] as const).filter(([, d]) => d > 0.05).sort((x, y) => y[1] - x[1]);
  for (const [k, d] of rows) console.log(`  ${k.padEnd(16)} ${d.toFixed(2)} s  ${(d / endToEnd * 100).toFixed(0)}% of a core  ${(d * 1e6 / events).toFixed(2)} µs/event`);
} finally {
  svc.proc.kill("SIGTERM"); await svc.proc.exited; await pg.stop(); rmSync(work, { recursive: true, force: true });
}
