// Micro-benchmark of one request through the ingest path in-process (src/ingest/accept.ts, no HTTP,
// no PostgreSQL): authenticate, admit, read, decode, encode, append to the ring, count. What a
// per-request cost on that path (the metrics' counting and timing) adds shows here, where
// bench/micro.ts times only the codec and `npm run bench` is dominated by HTTP.
//   bun bench/accept.ts            prints µs per request (wall and this process's CPU time, which a
//                                  loaded machine disturbs less), the medians of 7 rounds of 500 ms
import { Ring } from "../src/buffer/ring";
import type { Flusher } from "../src/buffer/flusher";
import { acceptRequest, type IngestDeps } from "../src/ingest/accept";
import { GcPacer } from "../src/ingest/gcpace";
import { InFlight } from "../src/ingest/inflight";
import { DecodeWorker } from "../src/ingest/offload";
import { RateLimiter } from "../src/ingest/ratelimit";
import { Metrics } from "../src/metrics";
import { SourceCache } from "../src/sources/cache";
import { payload, type PayloadName } from "./payloads";

const SOURCES = 50;
const cache = new SourceCache();
for (let id = 1; id <= SOURCES; id++) cache.put({ id, token: `token-${id}`, ingestingPaused: false });
const ring = new Ring({ maxEvents: 1_000_000, maxBytes: 256 << 20 });
const deps: IngestDeps = {
  cache, ring, flusher: { pushed() {} } as unknown as Flusher, metrics: new Metrics(),
  limits: { maxBodyBytes: 20 << 20, maxDecompressedBytes: 100 << 20, maxEventBytes: 1 << 20, maxDepth: 64, maxEventsPerRequest: 100_000, bufferMaxEvents: 1_000_000, ringMaxBytes: 256 << 20 },
  inFlight: new InFlight(512 << 20), decodeWorker: new DecodeWorker(), gcPacer: new GcPacer(Infinity), ackMode: "buffered",
  durableTimeoutMs: 10_000, rateLimiter: new RateLimiter(0), accepting: () => true,
};

async function run(name: PayloadName, rounds = 7): Promise<{ wall: number; cpu: number }> {
  const { bodies, contentType } = payload(name, "realistic");
  const wall: number[] = [];
  const cpu: number[] = [];
  let n = 0;
  for (let r = 0; r <= rounds; r++) {
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    let requests = 0;
    while (performance.now() - started < 500) {
      const request = new Request("http://logpond/", {
        method: "POST",
        headers: { authorization: `Bearer token-${(n % SOURCES) + 1}`, "content-type": contentType },
        body: bodies[n++ % bodies.length],
      });
      const response = await acceptRequest(request, deps);
      if (response.status !== 202) throw new Error(`${response.status} ${await response.text()}`);
      requests++;
      if (ring.pendingEvents > 100_000) ring.release(ring.take(1_000_000));
    }
    const used = process.cpuUsage(cpuStarted);
    if (r > 0) {
      wall.push(((performance.now() - started) * 1000) / requests);
      cpu.push((used.user + used.system) / requests);
    }
  }
  const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]!;
  return { wall: median(wall), cpu: median(cpu) };
}

for (const name of ["json-1", "json-100"] as const) {
  const { wall, cpu } = await run(name);
  console.log(`${name} realistic: ${wall.toFixed(2)} µs/request wall, ${cpu.toFixed(2)} µs CPU`);
}
deps.decodeWorker.close();
