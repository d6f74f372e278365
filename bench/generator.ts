// The JS load generator (paced and latency rows; throughput rows use wrk), run as its own process (so its CPU shows apart from the service's):
//   bun bench/generator.ts '<json config>'
// Keeps `concurrency` requests in flight on keep-alive connections for `seconds`, or paces them
// to `rate` requests per second in total. Prints one JSON line: requests, statuses, acknowledged
// events and bytes, latency percentiles (of acknowledged requests), and its own CPU time.
import { payload, type Corpus, type PayloadName } from "./payloads";

interface Config {
  url: string;
  tokens: string[];
  payload: PayloadName;
  corpus?: Corpus;
  seconds: number;
  concurrency: number;
  rate?: number;
}

const config = JSON.parse(process.argv[2]!) as Config;
const { bodies, contentType, contentEncoding, eventsPerBody } = payload(config.payload, config.corpus ?? "synthetic");
const headerSets = config.tokens.map((token) => ({
  authorization: `Bearer ${token}`,
  "content-type": contentType,
  ...(contentEncoding ? { "content-encoding": contentEncoding } : {}),
}));

const latencies: number[] = [];
const statuses: Record<string, number> = {};
let acked = 0;
let ackedBytes = 0;
let next = 0;
const cpuBefore = process.cpuUsage();
const started = performance.now();
const until = started + config.seconds * 1000;
const interval = config.rate ? (1000 * config.concurrency) / config.rate : 0;

async function worker(w: number): Promise<void> {
  let due = started + (interval * w) / config.concurrency;
  while (performance.now() < until) {
    if (interval > 0) {
      const wait = due - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      due += interval;
    }
    const n = next++;
    const body = bodies[n % bodies.length]!;
    const t0 = performance.now();
    let status = "error";
    try {
      const response = await fetch(config.url, { method: "POST", headers: headerSets[n % headerSets.length]!, body });
      await response.arrayBuffer();
      status = String(response.status);
      if (response.status === 202) {
        acked += eventsPerBody;
        ackedBytes += body.byteLength;
      } else if (response.status === 503 || response.status === 429) {
        // As a well-behaved client does: wait as told (capped), instead of hammering a full buffer.
        await Bun.sleep(Math.min(1000, 1000 * Number(response.headers.get("retry-after") ?? 1)));
      }
    } catch {
      await Bun.sleep(5);
    }
    // Latency of acknowledged requests only: a quick 503 from a full buffer is not a fast answer.
    if (status === "202") latencies.push(performance.now() - t0);
    statuses[status] = (statuses[status] ?? 0) + 1;
  }
}

await Promise.all(Array.from({ length: config.concurrency }, (_, w) => worker(w)));
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
console.log(
  JSON.stringify({
    requests: Object.values(statuses).reduce((a, b) => a + b, 0),
    statuses,
    ackedEvents: acked,
    ackedBytes,
    seconds,
    p50: pct(0.5),
    p99: pct(0.99),
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  }),
);
