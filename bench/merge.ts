// Merges (src/store/merge.ts) on a sparse source sealed by the memory path: blocks and context
// time before and after one merge pass, the pass's cost, and what decoding a day's blocks costs in
// PostgreSQL (logpond_block_events, as the merge does) against in the application (openPayload +
// jsonbText). One logpond in-process on an embedded PostgreSQL of its own (or DATABASE_URL).
//   bun bench/merge.ts [generations=300] [events per request=4] [seal threads=2] [time|spread]
// Each generation: two requests flushed apart (the seal threads take batches in turn), then a seal:
// two small blocks. `time`: events in time order over one past day, the two requests' interleaved
// (each generation's two blocks overlap); `spread`: each request's events anywhere in the day, as a
// bench/scale.ts load sends them (every block spans most of the day and overlaps every other).
import { rmSync } from "node:fs";
import * as path from "node:path";
import { jsonbText } from "../src/codec/jsonb-text";
import { openPayload } from "../src/codec/pgp";
import { loadConfig } from "../src/config";
import { startLogpond } from "../src/server";
import postgres from "postgres";
import { benchDir, benchPostgres, fmt } from "./lib";
import { SERVICE_API_TOKEN } from "../test/helpers/service";
import { measureContext } from "./scale/reads";

const [generations = 300, perRequest = 4, threads = 2] = process.argv.slice(2, 5).map(Number);
const spread = process.argv[5] === "spread";
/** A fixed sequence (mulberry32): the same run twice sends the same times. */
let seed = 42;
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const work = benchDir("logpond-bench-merge-");
const pg = await benchPostgres(work);
const sql = postgres(pg.url, { max: 2, onnotice: () => {} });
const lp = await startLogpond(
  loadConfig({
    DATABASE_URL: pg.url,
    API_PORT: "0",
    INGEST_PORT: "0",
    API_TOKEN: SERVICE_API_TOKEN,
    DATA_DIR: path.join(work, "data"),
    SEAL_FROM: "memory",
    SEAL_WORKERS: String(threads),
    SEAL_INTERVAL_MS: "600000",
    MERGE_INTERVAL_MS: "0",
    FLUSH_INTERVAL_MS: "20",
  }),
  () => {},
);
const auth = { authorization: `Bearer ${SERVICE_API_TOKEN}` };
try {
  const created = await fetch(`${lp.apiUrl}/api/v1/sources`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name: "sparse", logs_retention: 3652 }),
  });
  const { data } = (await created.json()) as { data: { id: string; attributes: { token: string } } };
  const source = { id: Number(data.id), token: data.attributes.token, name: "sparse" };
  const base = Date.parse("2025-11-20T00:00:00Z");
  const step = Math.floor(86_400_000 / (generations * 2 * perRequest + 1));
  for (let g = 0; g < generations; g++) {
    for (const r of [0, 1]) {
      const events = Array.from({ length: perRequest }, (_, i) => {
        const n = g * 2 * perRequest + 2 * i + r;
        return {
          dt: new Date(base + (spread ? Math.floor(random() * 86_399_000) : n * step)).toISOString(),
          n,
          level: n % 5 === 0 ? "warn" : "info",
          message: `request ${n} served in ${n % 97} ms`,
        };
      });
      const response = await fetch(`${lp.ingestUrl}/`, {
        method: "POST",
        headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json" },
        body: JSON.stringify(events),
      });
      if (response.status !== 202) throw new Error(`ingest: ${response.status}`);
      await lp.flusher.flush();
    }
    await lp.sealer.sealNow();
  }
  const blocks = async () =>
    (await sql<{ n: number }[]>`select count(*)::int as n from log_blocks where source_id = ${source.id} and generation is null`)[0]!.n;
  const events = generations * 2 * perRequest;
  console.log(
    `${fmt(events)} events of one sparse source over one day (${spread ? "spread" : "time order"}), ${generations} seals, SEAL_FROM=memory, ${threads} seal threads`,
  );

  // Decoding the day's blocks: in PostgreSQL (what the merge reads) against in the application.
  const backendCpu = async (pid: number) => {
    const stat = (await Bun.file(`/proc/${pid}/stat`).text()).split(") ")[1]!.split(" ");
    return (Number(stat[11]) + Number(stat[12])) / 100;
  };
  const decode = postgres(pg.url, { max: 1, onnotice: () => {} });
  const [{ pid }] = (await decode`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
  for (let round = 0; round < 3; round++) {
    let cpu0 = await backendCpu(pid);
    let t0 = performance.now();
    const rows = await decode.unsafe(
      `select e.id::text, to_char(e.dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt, e.line,
         case jsonb_typeof(j.raw) when 'object' then (select coalesce(string_agg(key, ','), '') from jsonb_object_keys(j.raw) key) else '' end as shape,
         nullif(lower(left(j.raw->>'level', 40)), '') as level
       from log_blocks b cross join lateral logpond_block_events(b.min_id, b.min_dt, b.ids, b.dts, b.body, b.payload) e
         cross join lateral (select e.line::jsonb as raw) j
       where b.source_id = ${source.id} and b.generation is null`,
    );
    const inSql = { wall: performance.now() - t0, backend: (await backendCpu(pid)) - cpu0 };
    cpu0 = await backendCpu(pid);
    const app0 = process.cpuUsage();
    t0 = performance.now();
    const payloads = await decode<{ payload: Uint8Array }[]>`select payload from log_blocks where source_id = ${source.id} and generation is null`;
    let decoded = 0;
    for (const { payload } of payloads) {
      const lines = openPayload(payload).split("\n");
      for (let i = 2; i < lines.length; i++) {
        jsonbText(lines[i]!);
        decoded++;
      }
    }
    const app = process.cpuUsage(app0);
    const inApp = { wall: performance.now() - t0, backend: (await backendCpu(pid)) - cpu0, app: (app.user + app.system) / 1e6 };
    const us = (s: number, n: number) => fmt((s * 1e6) / n, 1);
    console.log(
      `decode round ${round + 1}: in SQL ${rows.length} events ${fmt(inSql.wall)} ms (backend ${us(inSql.backend, rows.length)} µs/event); ` +
        `in the app ${decoded} events ${fmt(inApp.wall)} ms (backend ${us(inApp.backend, decoded)} + logpond ${us(inApp.app, decoded)} µs/event, logpond's other threads included)`,
    );
  }
  await decode.end();

  const size = async () =>
    (
      await sql<{ bytes: number }[]>`
        select (select coalesce(sum(pg_column_size(b.*)), 0) from log_blocks b where b.source_id = ${source.id})
          + (select coalesce(sum(pg_column_size(f.*)), 0) from log_filters f where f.source_id = ${source.id})::float8 as bytes`
    )[0]!.bytes;
  const bytesBefore = await size();
  const before = await blocks();
  const contextBefore = await measureContext(lp.apiUrl, sql, source as never);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  // Passes until one finds nothing to do (a split takes one, the merges of its slices the next).
  const stats = { passes: 0, runs: 0, blocksMerged: 0, blocksWritten: 0, events: 0 };
  for (let pass = 0; pass < 20; pass++) {
    const one = await lp.merger.mergeNow();
    if (one.runs === 0) break;
    stats.passes++;
    for (const key of ["runs", "blocksMerged", "blocksWritten", "events"] as const) stats[key] += one[key];
  }
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const after = await blocks();
  const bytesAfter = await size();
  const idle0 = performance.now();
  await lp.merger.mergeNow();
  const idle = performance.now() - idle0;
  const contextAfter = await measureContext(lp.apiUrl, sql, source as never);
  console.log(
    `blocks: ${before} before, ${after} after (${stats.passes} passes, ${stats.runs} runs, ${stats.blocksMerged} merged, ${stats.blocksWritten} written, ${stats.events} events rewritten)`,
  );
  console.log(
    `merge passes: ${fmt(wall)} ms (the last one found nothing), ${fmt(stats.events / (wall / 1000))} events rewritten/s; logpond CPU ${fmt((cpu.user + cpu.system) / stats.events, 1)} µs/event rewritten (its seal thread, and the thread's start, included)`,
  );
  console.log(
    `blocks and filters, B/event: ${fmt(bytesBefore / events, 1)} before, ${fmt(bytesAfter / events, 1)} after; a pass with nothing to merge: ${fmt(idle, 1)} ms`,
  );
  console.log(`context ±50 before (with dt / id only): ${contextBefore}`);
  console.log(`context ±50 after  (with dt / id only): ${contextAfter}`);
} finally {
  await lp.stop();
  await sql.end();
  await pg.stop();
  rmSync(work, { recursive: true, force: true });
}
