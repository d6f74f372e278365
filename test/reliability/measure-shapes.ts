// Measures every hostile shape against logpond in its own process: status, time to answer, peak
// RSS of the logpond process while it was handled, and the worst latency a small concurrent
// request saw meanwhile (the event loop's longest stall, roughly). Prints one row per shape.
//   npx bun test/reliability/measure-shapes.ts [maxDecompressedBytes]
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { startEmbeddedPostgres } from "../../src/store/embedded";
import { createSource, spawnService, type Service } from "../helpers/service";
import { buildShapes, type Shape } from "./shapes";

const MIB = 1024 * 1024;

export function rssOf(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

export interface Measured {
  name: string;
  status: number | string;
  ms: number;
  peakRssMiB: number;
  worstProbeMs: number;
}

export async function measure(service: Service, token: string, shape: Shape): Promise<Measured> {
  const pid = service.proc.pid;
  let peak = rssOf(pid);
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, rssOf(pid));
      await Bun.sleep(5);
    }
  })();
  let worstProbe = 0;
  const prober = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${service.ingestUrl}/`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: '{"probe":1}',
          signal: AbortSignal.timeout(60_000),
        });
        await response.arrayBuffer();
      } catch {}
      worstProbe = Math.max(worstProbe, performance.now() - started);
      await Bun.sleep(20);
    }
  })();
  const started = performance.now();
  let status: number | string;
  try {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, "content-type": shape.contentType };
    if (shape.encoding) headers["content-encoding"] = shape.encoding;
    const response = await fetch(`${service.ingestUrl}/`, { method: "POST", headers, body: shape.body, signal: AbortSignal.timeout(120_000) });
    const text = await response.text();
    status = response.status === 202 ? 202 : `${response.status} ${text.slice(0, 90)}`;
  } catch (error) {
    status = `no answer (${(error as Error).message})`;
  }
  const ms = performance.now() - started;
  running = false;
  await Promise.all([sampler, prober]);
  return { name: shape.name, status, ms: Math.round(ms), peakRssMiB: Math.round(peak / MIB), worstProbeMs: Math.round(worstProbe) };
}

if (import.meta.main) {
  // One logpond per shape: RSS rarely goes back down, so a shared process would carry peaks over.
  const limit = Number(process.argv[2] ?? 100 * MIB);
  const dir = mkdtempSync(path.join(tmpdir(), "logpond-measure-"));
  const pg = await startEmbeddedPostgres(path.join(dir, "pg"), 0);
  try {
    console.log(`INGEST_MAX_DECOMPRESSED_BYTES=${limit}`);
    for (const shape of buildShapes({ maxDecompressedBytes: limit })) {
      const service = await spawnService({ DATABASE_URL: pg.url, DATA_DIR: dir, INGEST_MAX_DECOMPRESSED_BYTES: String(limit) });
      try {
        const source = await createSource(service, "measure");
        await Bun.sleep(2_000); // the decode workers start and warm up after the banner; not part of a request
        const idle = Math.round(rssOf(service.proc.pid) / MIB);
        const m = await measure(service, source.token, shape);
        const died = service.proc.exitCode !== null || service.proc.signalCode !== null;
        console.log(
          `| ${m.name} | ${shape.body.length} B | ${m.status}${died ? " (process died)" : ""} | ${m.ms} ms | ${m.peakRssMiB} MiB (idle ${idle}) | ${m.worstProbeMs} ms |`,
        );
      } finally {
        await service.stop();
      }
    }
  } finally {
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
