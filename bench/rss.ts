// Where the service's memory goes under wrk -c64: RSS sampled every 50 ms beside the ring's bytes,
// and the kernel's high-water mark (VmHWM, reset before each run: bench/run.ts's figure),
// the in-flight charge and the JavaScript heap (from /metrics), for one payload and one or more
// settings variants run interleaved on one PostgreSQL — how the RSS figures in docs/memory.md are measured:
//   bun bench/rss.ts <payload> <corpus> [seconds=8] [rounds=2] [variant…]
// A variant is `default` or comma-separated NAME=VALUE settings (e.g. INGEST_INFLIGHT_MAX_BYTES=67108864);
// `ref=<git ref>` among them runs that commit's src/ instead of this tree's (exported as bench/ab.ts
// does), so code before and after a change is measured interleaved, under the same load.
// Payload `json-6400`: 64 json-100 bodies joined into one array per body (~4 MB realistic, so every
// body goes to the decode workers and holds an in-flight charge while it waits). Payload `json-big`:
// the same events four times over in one array per body (~16 MB realistic, 25,600 events) from
// BIG_CONNECTIONS connections: bodies of tens of MB from several clients. Payload `ndjson-big`:
// those bodies as NDJSON (one event per line), from as many connections. Payload `msgpack-big`: the
// same events in one MessagePack array per body (msgpackr's maps, ~12 MB), from as many connections.
import { spawnSync } from "node:child_process";
import { pack } from "msgpackr";
import { existsSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import * as path from "node:path";
import { runMigrations } from "../src/store/db";
import { startEmbeddedPostgres } from "../src/store/embedded";
import { createSource, spawnService, type Service } from "../test/helpers/service";
import { benchDir, cpuSeconds, peakRss, resetPeakRss } from "./lib";
import { payload, type Corpus, type Payload, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";

const [name = "json-100", corpus = "realistic", seconds = "8", rounds = "2", ...variantArgs] = process.argv.slice(2);
const variants = variantArgs.length > 0 ? variantArgs : ["default"];
const wrk = findWrk(console.log);
if (!wrk.path) throw new Error(wrk.note);
const MIB = 1024 * 1024;
const work = benchDir("logpond-rss-");
const pg = await startEmbeddedPostgres(path.join(work, "pg"), 0);
const services: Service[] = [];

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
const gauges = async (apiUrl: string) => {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const value = (key: string) => Number(new RegExp(`^${key} (\\d+)`, "m").exec(text)?.[1] ?? 0);
  return {
    ring: value("logpond_buffer_bytes") / MIB,
    inflight: value("logpond_ingest_inflight_bytes") / MIB,
    heap: value("logpond_process_heap_bytes") / MIB,
    events: value("logpond_buffer_events"),
  };
};

/** The main module of `ref`'s src/, exported into the work folder once. */
function exportRef(ref: string): string {
  const root = path.join(work, `ref-${ref.replace(/\W+/g, "_")}`);
  if (!existsSync(root)) {
    const repo = path.join(import.meta.dir, "..");
    const exported = spawnSync("sh", ["-c", `mkdir -p '${root}' && git -C '${repo}' archive '${ref}' src drizzle | tar -x -C '${root}'`], { encoding: "utf8" });
    if (exported.status !== 0) throw new Error(`git archive ${ref}: ${exported.stderr}`);
    symlinkSync(path.join(repo, "node_modules"), path.join(root, "node_modules"));
  }
  return path.join(root, "src", "main.ts");
}

/** Connections for `json-big`, `ndjson-big` and `msgpack-big` (wrk's 64 for the others). */
const BIG_CONNECTIONS = 6;

/** Four bodies, each the events of 64 json-100 bodies (`times` over) in one JSON array, as NDJSON lines, or in one MessagePack array (msgpackr's maps). */
function joined(small: Payload, times = 1, as: "json" | "ndjson" | "msgpack" = "json"): Payload {
  const once = small.bodies.flatMap((body) => JSON.parse(new TextDecoder().decode(body)) as unknown[]);
  const events = Array.from({ length: times }, () => once).flat();
  const encode = (list: unknown[]): Uint8Array =>
    as === "msgpack"
      ? pack(list)
      : new TextEncoder().encode(as === "ndjson" ? `${list.map((event) => JSON.stringify(event)).join("\n")}\n` : JSON.stringify(list));
  const bodies = [0, 1, 2, 3].map((k) => encode([...events.slice(k * 100), ...events.slice(0, k * 100)]));
  const contentType = as === "msgpack" ? "application/msgpack" : as === "ndjson" ? "application/x-ndjson" : small.contentType;
  return { ...small, contentType, eventsPerBody: events.length, bodies };
}

try {
  await runMigrations(pg.url);
  const p =
    name === "json-6400"
      ? joined(payload("json-100", corpus as Corpus))
      : name === "json-big" || name === "ndjson-big" || name === "msgpack-big"
        ? joined(payload("json-100", corpus as Corpus), 4, name.slice(0, -4) as "json" | "ndjson" | "msgpack")
        : payload(name as PayloadName, corpus as Corpus);
  const connections = name.endsWith("-big") ? BIG_CONNECTIONS : undefined;
  const sides: { label: string; service: Service; dir: string }[] = [];
  for (const [i, variant] of variants.entries()) {
    const env: Record<string, string> = { DATABASE_URL: pg.url, DATA_DIR: path.join(work, `d${i}`) };
    if (variant !== "default") for (const pair of variant.split(",")) env[pair.slice(0, pair.indexOf("="))] = pair.slice(pair.indexOf("=") + 1);
    const ref = env.ref;
    delete env.ref;
    const service = await spawnService(env, { command: ref === undefined ? undefined : [process.execPath, exportRef(ref)] });
    services.push(service);
    const dir = writeWrkFiles(path.join(work, `wrk-${i}`), p, [(await createSource(service, "rss")).token]);
    sides.push({ label: variant, service, dir });
  }
  for (let r = 0; r < Number(rounds); r++) {
    for (const { label, service, dir } of sides) {
      const deadline = Date.now() + 120_000;
      while ((await gauges(service.apiUrl)).events > 0 && Date.now() < deadline) await Bun.sleep(100);
      const pid = service.proc.pid;
      const idle = rssMiB(pid);
      const peak = { rss: 0, ring: 0, inflight: 0, heap: 0 };
      let atPeak = { ring: 0, inflight: 0, heap: 0 };
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const rss = rssMiB(pid);
          const g = await gauges(service.apiUrl);
          if (rss > peak.rss) {
            peak.rss = rss;
            atPeak = g;
          }
          peak.ring = Math.max(peak.ring, g.ring);
          peak.inflight = Math.max(peak.inflight, g.inflight);
          peak.heap = Math.max(peak.heap, g.heap);
          await Bun.sleep(50);
        }
      })();
      resetPeakRss(pid); // the kernel's high-water mark (what bench/run.ts reports) beside the samples
      const cpu = cpuSeconds(pid);
      const started = performance.now();
      const w = await runWrk(wrk.path, `${service.ingestUrl}/`, dir, p.bodies.length, Number(seconds), connections);
      const used = cpuSeconds(pid) - cpu;
      sampling = false;
      await sampler;
      const hwmLoad = peakRss(pid);
      // Sustained: the clock stops when the last acknowledged event is committed (as bench/run.ts).
      while ((await gauges(service.apiUrl)).events > 0 && Date.now() < deadline + 120_000) await Bun.sleep(20);
      const sustained = ((w.statuses["202"] ?? 0) * p.eventsPerBody) / ((performance.now() - started) / 1000);
      const hwmDrained = peakRss(pid);
      const m = (n: number) => Math.round(n);
      console.log(
        `${name} ${corpus} [${label}] ${m(sustained)} events/s sustained, ${m((w.statuses["202"] ?? 0) / w.seconds)} req/s accepted ${JSON.stringify(w.statuses)}, ${m((used * 1e6) / Math.max(1, w.requests))} CPU µs/req | ` +
          `RSS idle ${m(idle)} peak ${m(peak.rss)} MiB sampled, ${m(hwmLoad)} VmHWM under load, ${m(hwmDrained)} through the drain (then ring ${m(atPeak.ring)}, in flight ${m(atPeak.inflight)}, heap ${m(atPeak.heap)}) | max ring ${m(peak.ring)}, in flight ${m(peak.inflight)}, heap ${m(peak.heap)} MiB`,
      );
    }
  }
} finally {
  for (const service of services) {
    await service.stop();
  }
  await pg.stop();
  rmSync(work, { recursive: true, force: true });
}
