// Micro-benchmark of one request through the ingest path in-process (src/ingest/accept.ts, no HTTP,
// no PostgreSQL): authenticate, admit, read, decode, encode, append to the ring, count. What a
// per-request cost on that path (the metrics' counting and timing) adds shows here, where
// bench/micro.ts times only the codec and `npm run bench` is dominated by HTTP.
//   bun bench/accept.ts                     µs per request (wall, and this process's CPU time,
//                                           which a loaded machine disturbs less), medians of 7 × 500 ms
//   bun bench/accept.ts --against DIR       this tree against another checkout's src/ (e.g.
//                                           `git archive <commit> | tar -x -C DIR`), loaded side by
//                                           side in this process, in alternating 200 ms rounds:
//                                           the only comparison that held on a busy machine
import { existsSync } from "node:fs";
import * as path from "node:path";
import { payload, type PayloadName } from "./payloads";

const SOURCES = 50;
const PAYLOADS: PayloadName[] = ["json-1", "json-100"];

/** The ingest path of the tree at `root`: its own modules, its own Metrics. */
async function ingestPath(root: string) {
  const load = (module: string) => import(path.join(root, "src", module));
  // Modules that moved: the first that the tree at `root` has (src/memory/ in today's tree).
  const loadFirst = async (...modules: string[]) => {
    for (const module of modules) if (existsSync(path.join(root, "src", `${module}.ts`))) return load(module);
    throw new Error(`none of ${modules.join(", ")} in ${root}`);
  };
  const [{ Ring }, { acceptRequest }, { GcPacer }, { DecodeWorker }, { RateLimiter }, { Metrics }, { SourceCache }] = await Promise.all([
    load("buffer/ring"),
    load("ingest/accept"),
    loadFirst("memory/gcpace", "ingest/gcpace"),
    ...["ingest/offload", "ingest/ratelimit", "metrics", "sources/cache"].map(load),
  ]);
  const admission = existsSync(path.join(root, "src", "memory", "gate.ts"))
    ? { gate: new (await load("memory/gate")).Gate({ budgetBytes: 512 << 20 }) }
    : { inFlight: new (await loadFirst("memory/inflight", "ingest/inflight")).InFlight(512 << 20) };
  // Ingestion's series moved out of Metrics into ingest/series.ts.
  const metrics = existsSync(path.join(root, "src", "ingest", "series.ts")) ? (await load("ingest/series")).ingestSeries(new Metrics()) : new Metrics();
  const cache = new SourceCache();
  for (let id = 1; id <= SOURCES; id++) cache.put({ id, token: `token-${id}`, ingestingPaused: false, logsRetention: 30 });
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 256 << 20 });
  const deps = {
    cache,
    ring,
    flusher: { pushed() {} },
    metrics,
    limits: {
      maxBodyBytes: 20 << 20,
      maxDecompressedBytes: 100 << 20,
      maxEventBytes: 1 << 20,
      maxDepth: 64,
      maxEventsPerRequest: 100_000,
      bufferMaxEvents: 1_000_000,
      ringMaxBytes: 256 << 20,
    },
    ...admission,
    decodeWorker: new DecodeWorker(),
    gcPacer: new GcPacer(Infinity),
    ackMode: "buffered",
    durableTimeoutMs: 10_000,
    rateLimiter: new RateLimiter(0),
    accepting: () => true,
    eventTimes: { maxFutureMs: 86_400_000, retentionGraceMs: 3_600_000 },
  };
  let n = 0;
  /** Requests for `ms`; µs of wall and of CPU per request. */
  const round = async (name: PayloadName, ms: number) => {
    const { bodies, contentType } = payload(name, "realistic");
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    let requests = 0;
    while (performance.now() - started < ms) {
      const request = new Request("http://logpond/", {
        method: "POST",
        headers: { authorization: `Bearer token-${(n % SOURCES) + 1}`, "content-type": contentType },
        body: bodies[n++ % bodies.length],
      });
      const response: Response = await acceptRequest(request, deps);
      if (response.status !== 202) throw new Error(`${response.status} ${await response.text()}`);
      requests++;
      if (ring.pendingEvents > 100_000) ring.release(ring.take(1_000_000));
    }
    const cpu = process.cpuUsage(cpuStarted);
    return { wall: ((performance.now() - started) * 1000) / requests, cpu: (cpu.user + cpu.system) / requests };
  };
  return { round, close: () => deps.decodeWorker.close() };
}

const at = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.floor(q * (values.length - 1))]!;
const argv = process.argv.slice(2);
const against = argv.includes("--against") ? argv[argv.indexOf("--against") + 1] : undefined;
const here = await ingestPath(path.join(import.meta.dir, ".."));

if (against === undefined) {
  for (const name of PAYLOADS) {
    const wall: number[] = [];
    const cpu: number[] = [];
    for (let r = 0; r <= 7; r++) {
      const result = await here.round(name, 500);
      if (r > 0) wall.push(result.wall), cpu.push(result.cpu);
    }
    console.log(`${name} realistic: ${at(wall, 0.5).toFixed(2)} µs/request wall, ${at(cpu, 0.5).toFixed(2)} µs CPU`);
  }
} else {
  const other = await ingestPath(path.resolve(against));
  for (const name of PAYLOADS) {
    const cpu = { here: [] as number[], other: [] as number[] };
    for (let r = 0; r < 42; r++) {
      const order = r % 2 === 0 ? (["other", "here"] as const) : (["here", "other"] as const);
      for (const side of order) {
        const { cpu: used } = await (side === "here" ? here : other).round(name, 200);
        if (r >= 2) cpu[side].push(used);
      }
    }
    const slower = cpu.here.filter((x, i) => x > cpu.other[i]!).length;
    const line = (side: "here" | "other") =>
      `p10 ${at(cpu[side], 0.1).toFixed(2)}, median ${at(cpu[side], 0.5).toFixed(2)}, p90 ${at(cpu[side], 0.9).toFixed(2)}`;
    console.log(
      `${name} realistic, CPU µs/request over ${cpu.here.length} paired rounds: ${against} ${line("other")}; this tree ${line("here")}; this tree slower in ${slower}`,
    );
  }
  other.close();
}
here.close();
