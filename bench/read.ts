// The read path's figures, standalone (prints them; writes nothing):
//   bun bench/read.ts [--seconds 8] [--rate 150000] [--tails 50]
// Against `bun src/main.ts` on the embedded PostgreSQL in a temporary DATA_DIR (or DATABASE_URL):
//   1. ingest throughput (json-100, 16 connections) without tails, then with `--tails` SSE
//      streams open and read on the source being ingested: the ratio with ÷ without. Each run
//      ends by checking that PostgreSQL holds every acknowledged event (else the figure is void);
//   2. query latency over what that stored: the newest page, a page deep in a cursor walk, and a
//      `field:value` query over the default 30 minutes while the generator ingests at `--rate`
//      events/s in the background (paced; what the box reaches is printed next to it).
// Two cores shared with PostgreSQL and the generator: figures are this box's, not a ceiling.
import { rmSync } from "node:fs";
import { cpus } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { createSource, spawnService, SERVICE_API_TOKEN, type Service } from "../test/helpers/service";
import { benchDir, benchPostgres } from "./lib";
import { waitFor } from "../test/helpers/wait";

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] ? argv[at + 1]! : fallback;
};
const SECONDS = Number(option("seconds", "8"));
const RATE = Number(option("rate", "150000"));
const TAILS = Number(option("tails", "50"));
const AUTH = { authorization: `Bearer ${SERVICE_API_TOKEN}` };
const fmt = (n: number, digits = 0) => n.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const say = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

interface Generated {
  ackedEvents: number;
  seconds: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
}

function generate(url: string, token: string, seconds: number, rate?: number): { done: Promise<Generated>; stop(): void } {
  const proc = Bun.spawn(
    [
      process.execPath,
      path.join(import.meta.dir, "generator.ts"),
      JSON.stringify({ url, tokens: [token], payload: "json-100", seconds, concurrency: 16, rate: rate ? rate / 100 : undefined }),
    ],
    { stdout: "pipe", stderr: "inherit" },
  );
  const done = (async () => {
    const out = await new Response(proc.stdout as ReadableStream).text();
    if ((await proc.exited) !== 0) throw new Error(`generator failed: ${out}`);
    return JSON.parse(out) as Generated;
  })();
  return { done, stop: () => proc.kill() };
}

/** `count` SSE streams on the source, read and counted until `close()`. */
async function openTails(service: Service, sourceId: number, count: number) {
  const controllers: AbortController[] = [];
  let rows = 0;
  let dropped = 0;
  const readers = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const controller = new AbortController();
      controllers.push(controller);
      const query = i % 5 === 0 ? "&query=level:warn" : "";
      const response = await fetch(`${service.apiUrl}/api/v2/query/live-tail/stream?source_ids=${sourceId}${query}`, {
        headers: AUTH,
        signal: controller.signal,
      });
      if (response.status !== 200) throw new Error(`stream: ${response.status}`);
      // Wrapped: an async function returning a promise would wait for it (for the whole stream).
      return {
        loop: (async () => {
          const decoder = new TextDecoder();
          try {
            for await (const part of response.body as ReadableStream<Uint8Array>) {
              const text = decoder.decode(part, { stream: true });
              for (let at = text.indexOf("\ndata: {"); at >= 0; at = text.indexOf("\ndata: {", at + 1)) rows++;
              const drop = /event: dropped\ndata: \{"count":(\d+)/g;
              for (let m = drop.exec(text); m; m = drop.exec(text)) dropped += Number(m[1]);
            }
          } catch {}
        })(),
      };
    }),
  );
  return {
    counts: () => ({ rows, dropped }),
    async close() {
      for (const c of controllers) c.abort();
      await Promise.allSettled(readers.map((reader) => reader.loop));
    },
  };
}

async function timeGet(url: string): Promise<{ ms: number; body: any }> {
  const t0 = performance.now();
  const response = await fetch(url, { headers: AUTH });
  const body = await response.json();
  const ms = performance.now() - t0;
  if (response.status !== 200) throw new Error(`${url}: ${response.status} ${JSON.stringify(body)}`);
  return { ms, body };
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

async function main() {
  const work = benchDir("logpond-bench-read-");
  const { url, stop: stopPostgres } = await benchPostgres(work);
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  const service = await spawnService({ DATABASE_URL: url, DATA_DIR: path.join(work, "data") });
  const stored = async (sourceId: number) => Number((await sql`select count(*) as n from log_events where source_id = ${sourceId}`)[0]!.n);
  const results: [string, string][] = [];
  try {
    // ---- 1. ingest with and without tails ----
    const plain = await createSource(service, "bench plain");
    say(`ingest without tails, ${SECONDS} s`);
    const without = await generate(`${service.ingestUrl}/`, plain.token, SECONDS).done;
    say(`acknowledged ${fmt(without.ackedEvents)} events; checking PostgreSQL`);
    await waitStored(() => stored(plain.id), without.ackedEvents);

    const tailed = await createSource(service, "bench tailed");
    const tails = await openTails(service, tailed.id, TAILS);
    say(`ingest with ${TAILS} tails open, ${SECONDS} s`);
    const withTails = await generate(`${service.ingestUrl}/`, tailed.token, SECONDS).done;
    await waitStored(() => stored(tailed.id), withTails.ackedEvents);
    const seen = tails.counts();
    await tails.close();
    const rateWithout = without.ackedEvents / without.seconds;
    const rateWith = withTails.ackedEvents / withTails.seconds;
    results.push(["ingest json-100, no tails", `${fmt(rateWithout)} events/s (p99 ${fmt(without.p99, 1)} ms)`]);
    results.push([
      `ingest json-100, ${TAILS} tails open`,
      `${fmt(rateWith)} events/s (p99 ${fmt(withTails.p99, 1)} ms); tails got ${fmt(seen.rows)} rows, ${fmt(seen.dropped)} dropped`,
    ]);
    results.push(["  ratio with ÷ without", fmt(rateWith / rateWithout, 3)]);

    // ---- 2. query latency over what is stored ----
    const base = `${service.apiUrl}/api/v2/query/live-tail?source_ids=${plain.id},${tailed.id}`;
    const newest: number[] = [];
    for (let i = 0; i < 20; i++) newest.push((await timeGet(base)).ms);
    results.push([
      `newest page (100 rows, 2 sources, ${fmt((await stored(plain.id)) + (await stored(tailed.id)))} rows stored)`,
      `median ${fmt(median(newest), 1)} ms, max ${fmt(Math.max(...newest), 1)} ms`,
    ]);

    let next: string | null = `${base}&batch=1000`;
    let pages = 0;
    const walk: number[] = [];
    while (next && pages < 100) {
      const { ms, body }: { ms: number; body: any } = await timeGet(next);
      walk.push(ms);
      next = body.pagination.next;
      pages++;
    }
    results.push([
      `cursor walk, 1,000-row pages`,
      `first ${fmt(walk[0]!, 1)} ms, page ${pages} ${fmt(walk[walk.length - 1]!, 1)} ms, median ${fmt(median(walk), 1)} ms`,
    ]);

    say(`field:value query while ingesting at ${fmt(RATE)} events/s (paced)`);
    const background = generate(`${service.ingestUrl}/`, tailed.token, SECONDS * 2, RATE);
    await Bun.sleep(1000);
    const filtered: number[] = [];
    const deadline = performance.now() + (SECONDS - 1) * 1000;
    while (performance.now() < deadline && filtered.length < 20) {
      filtered.push((await timeGet(`${base}&query=${encodeURIComponent("context.user.plan:pro")}`)).ms);
    }
    // A query that matches nothing reads the whole window; past QUERY_TIMEOUT_MS it is cancelled
    // with a 503, by design: that is a figure too, not a failure of the bench.
    const rare: number[] = [];
    let cancelled = 0;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const response = await fetch(`${base}&query=${encodeURIComponent("context.request_id:req-nope")}`, { headers: AUTH });
      await response.arrayBuffer();
      if (response.status === 503) cancelled++;
      else if (response.status !== 200) throw new Error(`no-match query: ${response.status}`);
      rare.push(performance.now() - t0);
    }
    const ingesting = await background.done;
    results.push([
      "`context.user.plan:pro`, last 30 min, while ingesting",
      `median ${fmt(median(filtered), 1)} ms (${filtered.length} queries; ingest reached ${fmt(ingesting.ackedEvents / ingesting.seconds)} events/s)`,
    ]);
    results.push([
      "`context.request_id:req-nope` (no match: scans the window)",
      `median ${fmt(median(rare), 1)} ms${cancelled ? ` (${cancelled} of 3 cancelled with 503 at QUERY_TIMEOUT_MS)` : ""}`,
    ]);
  } finally {
    await service.stop();
    await sql.end({ timeout: 5 });
    await stopPostgres();
    rmSync(work, { recursive: true, force: true });
  }
  const width = Math.max(...results.map(([name]) => name.length));
  console.log(`\nlogpond read path — ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Bun ${Bun.version}, ${SECONDS} s runs`);
  for (const [name, value] of results) console.log(`${name.padEnd(width)}  ${value}`);
}

/** A figure counts only once PostgreSQL holds every acknowledged event. */
async function waitStored(count: () => Promise<number>, acked: number): Promise<void> {
  const probe = async () => {
    const n = await count();
    if (process.env.BENCH_DEBUG) say(`stored ${n} of ${acked}`);
    return n;
  };
  // More than acknowledged ends the wait at once: the run is void either way.
  const n = await waitFor(`the ${acked} acknowledged events to be stored`, probe, { timeoutMs: 60_000, intervalMs: 100, until: (n) => n >= acked });
  if (n !== acked) throw new Error(`stored ${n} events, acknowledged ${acked}: the run is void`);
}

await main();
