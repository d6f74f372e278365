// A first, simple load run: starts logpond (embedded PostgreSQL in a temp DATA_DIR, or
// DATABASE_URL) as its own process, sends 100-event batches from this process for a fixed time
// with a fixed concurrency, then waits until PostgreSQL holds every acknowledged event and
// fails the run if it does not. Prints events/s, req/s and latency percentiles.
//   npx bun bench/load.ts [json|msgpack-records|both] [seconds=10] [concurrency=16]
import { Packr } from "msgpackr";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";

const [mode = "both", secondsArg = "10", concurrencyArg = "16"] = process.argv.slice(2);
const seconds = Number(secondsArg);
const concurrency = Number(concurrencyArg);
const BATCH = 100;
const API_TOKEN = "bench-token-0123456789abcdef";

const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-bench-"));
const service = Bun.spawn([process.execPath, path.join(import.meta.dir, "..", "src", "main.ts")], {
  env: { ...process.env, API_PORT: "0", INGEST_PORT: "0", EMBEDDED_PG_PORT: "0", API_TOKEN, DATA_DIR: dataDir },
  stdout: "pipe",
  stderr: "inherit",
});
let banner = "";
for await (const part of service.stdout as ReadableStream<Uint8Array>) {
  banner += new TextDecoder().decode(part);
  if (/acknowledgement/.test(banner)) break;
}
const apiUrl = /management API\s+(http\S+)\/api\/v1/.exec(banner)![1]!;
const ingestUrl = /ingestion\s+(http\S+)\//.exec(banner)![1]!;
const databaseUrl = process.env.DATABASE_URL ?? `postgres://logpond:${(await Bun.file(path.join(dataDir, "pg-password")).text()).trim()}@127.0.0.1:${/127\.0\.0\.1:(\d+)\/logpond/.exec(banner)![1]}/logpond`;
const sql = postgres(databaseUrl, { max: 1 });

function event(i: number) {
  return { dt: Date.now(), level: "info", message: `request ${i} served in ${i % 97} ms`, context: { user: { id: `u${i % 1000}` }, path: "/api/items", status: 200 } };
}

async function scenario(name: string, contentType: string, makeBody: (n: number) => Uint8Array | string) {
  const created = (await (await fetch(`${apiUrl}/api/v1/sources`, { method: "POST", headers: { authorization: `Bearer ${API_TOKEN}` }, body: JSON.stringify({ name }) })).json()) as any;
  const headers = { authorization: `Bearer ${created.data.attributes.token}`, "content-type": contentType };
  const latencies: number[] = [];
  let acked = 0;
  let refused = 0;
  let bytes = 0;
  const until = performance.now() + seconds * 1000;
  let n = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const body = makeBody(n++);
        const t0 = performance.now();
        const response = await fetch(`${ingestUrl}/`, { method: "POST", headers, body });
        latencies.push(performance.now() - t0);
        if (response.status === 202) {
          acked += BATCH;
          bytes += typeof body === "string" ? body.length : body.byteLength;
        } else refused++;
        await response.arrayBuffer();
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  // Conservation: wait until every acknowledged event is stored.
  let stored = 0;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    [{ stored }] = await sql`select count(*)::int as stored from log_events where source_id = ${Number(created.data.id)}`;
    if (stored >= acked) break;
    await Bun.sleep(100);
  }
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))]!.toFixed(1);
  console.log(
    `${name.padEnd(16)} ${(acked / elapsed).toFixed(0).padStart(8)} ev/s  ${(latencies.length / elapsed).toFixed(0).padStart(6)} req/s  ` +
      `${(bytes / elapsed / 1e6).toFixed(1).padStart(5)} MB/s  p50 ${pct(0.5)} ms  p99 ${pct(0.99)} ms  refused ${refused}  ` +
      `acked ${acked} stored ${stored} ${stored === acked ? "OK" : "MISMATCH"}`,
  );
  return stored === acked;
}

let ok = true;
try {
  if (mode === "json" || mode === "both") {
    ok &&= await scenario("json-100", "application/json", (n) => JSON.stringify(Array.from({ length: BATCH }, (_, i) => event(n * BATCH + i))));
  }
  if (mode === "msgpack-records" || mode === "both") {
    const packr = new Packr({ useRecords: true });
    ok &&= await scenario("msgpack-records", "application/msgpack", (n) => packr.pack(Array.from({ length: BATCH }, (_, i) => event(n * BATCH + i))));
  }
} finally {
  await sql.end();
  service.kill("SIGTERM");
  await service.exited;
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
