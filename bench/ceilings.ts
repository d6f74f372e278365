// The bench's ceilings, measured in the same run as the scenarios they divide:
// (a) `psql \copy` of the same rows from a file, one stream (and two, shown beside it): what the
//     database takes with no HTTP, no decoding; per corpus, the rows of its json-100 bodies, as the
//     COPY text a user's own loader would write (logpond itself sends binary COPY, codec/tuples.ts).
// (b) a bare Bun.serve that reads the body and answers 202, under the same wrk -c64 as logpond.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import * as path from "node:path";
import { microsOfMillis } from "../src/codec/time";
import { setIds, toText, tuplesOf } from "../src/codec/tuples";
import { decodeBody } from "../src/codec/decode";
import { encodeEvents, type Encoded } from "../src/codec/encode";
import { emptyRun, fmt, median, peakRss, cpuSeconds, resetPeakRss, type BenchContext, type Row, type Run } from "./lib";
import { payload, type Corpus, type PayloadName } from "./payloads";
import { runWrk, writeWrkFiles } from "./wrk";
import { unbounded } from "../src/codec/reception";

const LIMITS = { maxEventBytes: 1 << 20, maxDepth: 64 };

/** The tuples of a corpus's json-100 bodies, as logpond's encoder writes them (one buffer per body). */
function bodyTuples(corpus: Corpus): Uint8Array[] {
  return payload("json-100", corpus).bodies.map((b) =>
    Buffer.from((encodeEvents(decodeBody(Buffer.from(b), "json") as unknown[], "json", 1, unbounded(microsOfMillis(Date.now())), LIMITS) as Encoded).rows),
  );
}

/** `count` bodies' rows as COPY text lines with ids from firstId. */
function copyText(bodies: Uint8Array[], count: number, firstId: number): string {
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    const body = bodies[i % bodies.length]!;
    setIds(body, 100, firstId + i * 100);
    for (const tuple of tuplesOf(body)) lines.push(toText(tuple));
  }
  return lines.join("");
}

export async function copyCeilings(ctx: BenchContext, corpus: Corpus, events: number, clear: () => Promise<void>): Promise<Row[]> {
  const bodies = bodyTuples(corpus);
  const files = [path.join(ctx.work, `copy-${corpus}-a.txt`), path.join(ctx.work, `copy-${corpus}-b.txt`)];
  const half = events / 2 / 100;
  // Rows as the flusher writes them (storage v2): each line prefixed with its event id.
  files.forEach((file, f) => writeFileSync(file, copyText(bodies, half, 1 + f * half * 100)));
  const fileBytes = files.reduce((sum, f) => sum + Bun.file(f).size, 0);
  const psql = spawnSync("sh", ["-c", "command -v psql"], { encoding: "utf8" }).stdout.trim();
  if (!psql) throw new Error("psql is not installed: the COPY ceiling needs it (apt-get install -y postgresql-client)");

  const copy = async (streams: 1 | 2): Promise<number> => {
    await clear();
    const parts = streams === 1 ? [files] : files.map((f) => [f]);
    const started = performance.now();
    await Promise.all(
      parts.map(async (list) => {
        const commands = list.flatMap((f) => ["-c", `\\copy log_hot (id, source_id, dt, raw) from '${f}'`]);
        const proc = Bun.spawn([psql, ctx.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", ...commands], { stdout: "ignore", stderr: "pipe" });
        const err = await new Response(proc.stderr as ReadableStream).text();
        if ((await proc.exited) !== 0) throw new Error(`psql \\copy failed: ${err}`);
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const [{ n }] = (await ctx.sql`select count(*)::int as n from log_events where source_id = 1`) as unknown as [{ n: number }];
    if (n !== events) throw new Error(`COPY ceiling stored ${n} of ${events}`);
    return seconds;
  };

  await copy(2); // warm-up: WAL segments and caches, as later runs find them
  const out: Row[] = [];
  for (const streams of [1, 2] as const) {
    const runs: Run[] = [];
    for (let r = 0; r < ctx.runs; r++) {
      const seconds = await copy(streams);
      runs.push({
        ...emptyRun(),
        eventsPerSecond: events / seconds,
        megabytesPerSecond: fileBytes / seconds / 1e6,
        acked: events,
        serverAcked: events,
        stored: events,
      });
      ctx.progress(`ceiling: psql \\copy ${corpus}, ${streams} stream(s), run ${r + 1}: ${fmt(events / seconds)} events/s`);
    }
    out.push({
      name: `psql \\copy, ${streams} stream${streams > 1 ? "s" : ""}`,
      corpus,
      kind: "ceiling",
      tool: "psql",
      note: `${fmt(events)} events (${fmt(fileBytes / 1e6)} MB) of json-100's rows`,
      runs,
      median: median(runs),
    });
  }
  await clear();
  return out;
}

export async function startBare(ctx: BenchContext): Promise<{ url: string; pid: number; kill(): void }> {
  const proc = Bun.spawn([process.execPath, path.join(import.meta.dir, "bare-server.ts")], { stdout: "pipe", stderr: "inherit" });
  ctx.children.push(proc);
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { url: text.trim(), pid: proc.pid, kill: () => proc.kill("SIGTERM") };
}

/** Bare Bun.serve under wrk -c64, per payload; returns rows and the median req/s by payload name. */
export async function bareCeilings(ctx: BenchContext, corpus: Corpus, names: PayloadName[]): Promise<{ rows: Row[]; reqPerSecond: Record<string, number> }> {
  const bare = await startBare(ctx);
  const rows: Row[] = [];
  const reqPerSecond: Record<string, number> = {};
  try {
    for (const name of names) {
      const p = payload(name, corpus);
      const dir = writeWrkFiles(path.join(ctx.work, `wrk-bare-${name}-${corpus}`), p, ["bare"]);
      const runs: Run[] = [];
      for (let r = 0; r < ctx.runs; r++) {
        resetPeakRss(bare.pid);
        const cpu = cpuSeconds(bare.pid);
        const w = await runWrk(ctx.wrk!, bare.url, dir, p.bodies.length, ctx.seconds);
        const ok = w.statuses["202"] ?? 0;
        const bytes = (ok / p.bodies.length) * p.bodies.reduce((s, b) => s + b.byteLength, 0);
        runs.push({
          ...emptyRun(),
          eventsPerSecond: (ok * p.eventsPerBody) / w.seconds,
          requestsPerSecond: ok / w.seconds,
          megabytesPerSecond: bytes / w.seconds / 1e6,
          p50: w.p50,
          p99: w.p99,
          peakRssMiB: peakRss(bare.pid),
          serviceCpuUsPerRequest: ((cpuSeconds(bare.pid) - cpu) * 1e6) / Math.max(1, w.requests),
          generatorCpu: w.cpuSeconds / w.seconds,
          acked: ok * p.eventsPerBody,
          serverAcked: ok * p.eventsPerBody,
          refused: w.requests - ok,
        });
        ctx.progress(`ceiling: bare Bun.serve ${name} ${corpus}, run ${r + 1}: ${fmt(ok / w.seconds)} req/s, p99 ${fmt(w.p99, 1)} ms`);
      }
      const m = median(runs);
      rows.push({ name: `bare Bun.serve, ${name}`, corpus, kind: "ceiling", tool: "wrk", note: "reads the body, answers 202", runs, median: m });
      reqPerSecond[name] = m.requestsPerSecond;
    }
  } finally {
    bare.kill();
  }
  return { rows, reqPerSecond };
}
