// Flush connections broken under load (docs/durability.md, "When PostgreSQL misbehaves"): logpond on
// an external PostgreSQL (the embedded binaries, started here) through a loopback TCP proxy that
// resets (RST) the flush connections every 20–700 ms — all of them (resetall), about half (reset) —
// or drops their traffic for 0.2–3 s and then resets them (blackhole), while test/helpers'
// generator sends numbered events (6 senders, 20 a request). One JSON line: the longest time no
// event was flushed, tries that waited out FLUSH_TIMEOUT_MS, 503s, and stored against acknowledged.
// Exit 1 on a lost or duplicated event or a gap past 9 s. Written by a tester who had not seen the code.
//   bun bench/pg-proxy-chaos.ts <reset|resetall|blackhole> [faultSeconds=20]
//   LP_ENV='{"INGEST_ACK":"durable","INGEST_WORKERS":"3"}' bun bench/pg-proxy-chaos.ts resetall
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { startEmbeddedPostgres } from "../src/store/embedded";
import { Generator, verify } from "../test/helpers/conservation";
import { createSource, spawnService } from "../test/helpers/service";
import { waitFor } from "../test/helpers/wait";

const [mode = "reset", secondsArg = "20"] = process.argv.slice(2);
const overrides = JSON.parse(process.env.LP_ENV ?? "{}") as Record<string, string>;
const FAULT_MS = Number(secondsArg) * 1000;
const rand = (lo: number, hi: number) => lo + Math.random() * (hi - lo);
const ts = (line: string) => Date.parse(line.slice(0, 24));

const pgDir = mkdtempSync(path.join(tmpdir(), "lp-proxy-pg-"));
const lpDir = mkdtempSync(path.join(tmpdir(), "lp-proxy-lp-"));
const pg = await startEmbeddedPostgres(pgDir, 0);
const pgPort = Number(new URL(pg.url).port);

interface Pair {
  client: net.Socket;
  server: net.Socket;
  flush: boolean;
  held: boolean;
}
const pairs = new Set<Pair>();
const proxy = net.createServer((client) => {
  const server = net.connect(pgPort, "127.0.0.1");
  const pair: Pair = { client, server, flush: false, held: false };
  pairs.add(pair);
  let first = true;
  client.on("data", (d) => {
    if (first) {
      first = false;
      pair.flush = d.includes("logpond-flush");
    }
    if (!pair.held) server.write(d);
  });
  server.on("data", (d) => {
    if (!pair.held) client.write(d);
  });
  const end = () => {
    pairs.delete(pair);
    client.destroy();
    server.destroy();
  };
  client.on("error", end).on("close", end);
  server.on("error", end).on("close", end);
});
await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
const proxyUrl = pg.url.replace(`:${pgPort}/`, `:${(proxy.address() as net.AddressInfo).port}/`);

const events: string[] = [];
const note = (s: string) => events.push(`${new Date().toISOString()} ${s}`);
const service = await spawnService({ DATABASE_URL: proxyUrl, DATA_DIR: lpDir, ...overrides });
const own = postgres(pg.url, { max: 1, onnotice: () => {} });
try {
  const source = await createSource(service, `proxy ${mode}`);
  const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: 6, batch: 20, pauseMs: 2 });
  const samples: [number, number][] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        const text = await fetch(`${service.apiUrl}/metrics`, { signal: AbortSignal.timeout(2000) }).then((r) => r.text());
        const m = /^logpond_flush_events_total (\d+)/m.exec(text);
        if (m) samples.push([Date.now(), Number(m[1])]);
      } catch {}
      await Bun.sleep(100);
    }
  })();
  generator.start();
  await Bun.sleep(3000);
  const faultStart = Date.now();
  let faults = 0;
  while (Date.now() - faultStart < FAULT_MS) {
    const flush = [...pairs].filter((p) => p.flush);
    if (mode === "reset" || mode === "resetall") {
      const victims = mode === "resetall" ? flush : flush.filter(() => Math.random() < 0.5);
      for (const p of victims) {
        p.client.resetAndDestroy();
        p.server.destroy();
      }
      note(`reset ${victims.length}/${flush.length}`);
      await Bun.sleep(rand(20, 700));
    } else if (mode === "blackhole") {
      // Silently drop both directions for a while, then reset: PostgreSQL is reachable again at once.
      const victims = flush.filter(() => Math.random() < 0.5);
      for (const p of victims) p.held = true;
      const ms = rand(200, 3000);
      note(`blackhole ${victims.length}/${flush.length} for ${Math.round(ms)} ms then reset`);
      await Bun.sleep(ms);
      for (const p of victims) {
        p.client.resetAndDestroy();
        p.server.destroy();
      }
      await Bun.sleep(rand(100, 1500));
    }
    faults++;
  }
  const faultEnd = Date.now();
  await Bun.sleep(4000);
  await generator.stop();
  await waitFor(
    "the buffer to be written",
    async () => (await fetch(`${service.apiUrl}/metrics`).then((r) => r.text())).includes("logpond_buffer_events 0\n"),
    {
      timeoutMs: 60_000,
      intervalMs: 100,
    },
  );
  sampling = false;
  await sampler;
  const verdict = await verify(own, source.id, generator.acked);
  let gap = 0;
  let gapAt = 0;
  let last: [number, number] | undefined;
  for (const s of samples) {
    if (s[0] < faultStart - 500 || !last) {
      last = s;
      continue;
    }
    if (s[1] > last[1]) {
      if (s[0] - last[0] > gap) [gap, gapAt] = [s[0] - last[0], last[0]];
      last = s;
    }
  }
  const out = service.output();
  const lines = out.split("\n");
  const failed = lines.filter((l) => /flush: .* not written/.test(l));
  const back = lines.filter((l) => /flush: storage is back/.test(l));
  let episode = 0;
  for (const f of failed) {
    const t = ts(f);
    const b = back.map(ts).find((x) => x >= t);
    if (b !== undefined && b - t > episode) episode = b - t;
  }
  const deadline = lines.filter((l) => /within \d+ ms \(FLUSH_TIMEOUT_MS\)/.test(l));
  const bad = lines.filter((l) => /uncaught|unhandled|LOST|TypeError|RangeError|crash/i.test(l) && !/not written/.test(l));
  const exposition = await fetch(`${service.apiUrl}/metrics`).then((r) => r.text());
  const flushBuckets = Object.fromEntries(
    [...exposition.matchAll(/^logpond_flush_duration_seconds_bucket\{le="([^"]+)"\} (\d+)/gm)]
      .filter(([, le]) => Number(le) >= 1 || le === "+Inf")
      .map(([, le, n]) => [le, Number(n)]),
  );
  const exit = await service.stop();
  console.log(
    JSON.stringify({
      mode: `proxy-${mode}`,
      env: overrides,
      faults,
      faultS: Math.round((faultEnd - faultStart) / 100) / 10,
      verdict,
      longestNoFlushGapS: Math.round(gap / 100) / 10,
      gapAt: new Date(gapAt).toISOString(),
      longestFailEpisodeS: Math.round(episode / 100) / 10,
      notWrittenLines: failed.length,
      deadlineLines: deadline.length,
      flushBucketsGe1s: flushBuckets,
      statuses: Object.fromEntries(generator.statuses),
      exit,
    }),
  );
  for (const l of deadline.slice(0, 3)) console.log("DEADLINE:", l.slice(0, 300));
  for (const l of bad.slice(0, 5)) console.log("BAD:", l.slice(0, 300));
  if (gap > 5000) {
    for (const e of events.filter((e) => Math.abs(ts(e) - gapAt) < 12_000)) console.log("  ", e);
    for (const l of lines.filter((l) => Math.abs(ts(l) - gapAt) < 12_000 && /flush/.test(l)).slice(0, 20)) console.log("  LOG", l.slice(0, 250));
  }
  await Bun.write(`/tmp/lp-proxy-last-${mode}.log`, `${out}\n--- faults ---\n${events.join("\n")}\n`);
  if (verdict.lost > 0 || verdict.duplicates > 0 || gap > 9000) process.exitCode = 1;
} finally {
  await own.end({ timeout: 1 }).catch(() => {});
  if (service.proc.exitCode === null && service.proc.signalCode === null) {
    service.proc.kill("SIGKILL");
    await service.proc.exited;
  }
  for (const p of pairs) p.client.destroy(), p.server.destroy();
  proxy.close();
  await pg.stop();
  rmSync(pgDir, { recursive: true, force: true });
  rmSync(lpDir, { recursive: true, force: true });
}
