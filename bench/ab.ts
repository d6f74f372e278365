// A/B of logpond at another git ref against this worktree, interleaved (each round in the other
// order) on one PostgreSQL under wrk -c64 — how before/after figures are taken on a shared machine:
//   bun bench/ab.ts <ref> [payload=json-100] [corpus=realistic] [seconds=5] [rounds=3] [--own-pg] [--drained]
// The ref's src/ and drizzle/ are exported (git archive) to a temporary folder and run with this
// worktree's node_modules. Per round and side: accepted req/s, statuses, the service's CPU µs per
// request (steadier than req/s when others load the box) and its peak RSS.
// --own-pg: each side on its own PostgreSQL, migrated by its own code (a ref from before storage
// v2 cannot write to today's schema). --drained: CPU is counted from wrk's start until the buffer
// is empty again, per accepted request, so the flush of what was accepted is in the figure too
// (without it, a side that buffers faster than it flushes looks cheaper than it is).
import { spawnSync } from "node:child_process";
import { rmSync, symlinkSync } from "node:fs";
import * as path from "node:path";
import { runMigrations } from "../src/store/db";
import { startEmbeddedPostgres } from "../src/store/embedded";
import { createSource, spawnService, type Service } from "../test/helpers/service";
import { benchDir, cpuSeconds, peakRss, resetPeakRss } from "./lib";
import { payload, type Corpus, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";

const ownPg = process.argv.includes("--own-pg");
const drained = process.argv.includes("--drained");
const [ref, name = "json-100", corpus = "realistic", seconds = "5", rounds = "3"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
if (!ref) throw new Error("usage: bun bench/ab.ts <ref> [payload] [corpus] [seconds] [rounds]");
const ROOT = path.join(import.meta.dir, "..");
const wrk = findWrk(console.log);
if (!wrk.path) throw new Error(wrk.note);
const work = benchDir("logpond-ab-");
const before = path.join(work, "ref");
const exported = spawnSync("sh", ["-c", `mkdir -p '${before}' && git -C '${ROOT}' archive '${ref}' src drizzle | tar -x -C '${before}'`], { encoding: "utf8" });
if (exported.status !== 0) throw new Error(`git archive ${ref}: ${exported.stderr}`);
symlinkSync(path.join(ROOT, "node_modules"), path.join(before, "node_modules"));

const pgs = [await startEmbeddedPostgres(path.join(work, "pg"), 0)];
const services: Service[] = [];
try {
  if (ownPg) pgs.push(await startEmbeddedPostgres(path.join(work, "pg-b"), 0));
  else await runMigrations(pgs[0]!.url); // once, before two services start on one database
  const spawn = async (main: string, dir: string, url: string) => {
    const service = await spawnService({ DATABASE_URL: url, DATA_DIR: dir }, { command: [process.execPath, main] });
    services.push(service);
    return service;
  };
  const metric = async (apiUrl: string, key: string) => Number(new RegExp(`^${key} (\\d+)`, "m").exec(await (await fetch(`${apiUrl}/metrics`)).text())![1]);
  const p = payload(name as PayloadName, corpus as Corpus);
  const sides = [
    { label: ref, service: await spawn(path.join(before, "src", "main.ts"), path.join(work, "a"), pgs[0]!.url), dir: "" },
    { label: "worktree", service: await spawn(path.join(ROOT, "src", "main.ts"), path.join(work, "b"), pgs[pgs.length - 1]!.url), dir: "" },
  ];
  for (const side of sides) side.dir = writeWrkFiles(path.join(work, `wrk-${sides.indexOf(side)}`), p, [(await createSource(side.service, "ab")).token]);
  for (let r = 0; r < Number(rounds); r++) {
    // Each round in the other order: the side that runs first meets a warmer or a busier box.
    for (const { label, service, dir } of r % 2 === 0 ? sides : [...sides].reverse()) {
      const deadline = Date.now() + 120_000;
      while ((await metric(service.apiUrl, "logpond_buffer_events")) > 0 && Date.now() < deadline) await Bun.sleep(100);
      resetPeakRss(service.proc.pid);
      const cpu = cpuSeconds(service.proc.pid);
      const w = await runWrk(wrk.path, `${service.ingestUrl}/`, dir, p.bodies.length, Number(seconds));
      if (drained) {
        const flushed = Date.now() + 120_000;
        while ((await metric(service.apiUrl, "logpond_buffer_events")) > 0 && Date.now() < flushed) await Bun.sleep(50);
      }
      const used = cpuSeconds(service.proc.pid) - cpu;
      const per = drained ? Math.max(1, w.statuses["202"] ?? 0) : Math.max(1, w.requests);
      console.log(
        `${name} ${corpus} ${label.padEnd(10)} ${Math.round((w.statuses["202"] ?? 0) / w.seconds)} req/s accepted ${JSON.stringify(w.statuses)}, ` +
          `${Math.round((used * 1e6) / per)} CPU µs/${drained ? "accepted req, flush included" : "req"}, peak RSS ${Math.round(peakRss(service.proc.pid))} MiB`,
      );
    }
  }
} finally {
  for (const service of services) await service.stop();
  for (const pg of pgs) await pg.stop();
  rmSync(work, { recursive: true, force: true });
}
