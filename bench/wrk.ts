// The native load generator for the bench's HTTP throughput rows: finds `wrk` (or installs
// Debian's package when running as root), writes a scenario's pre-built bodies to files for
// bench/wrk.lua, runs it, and parses the one result line. A JavaScript generator saturates before
// Bun.serve does (on the 2-core box: ~37k req/s from the JS generator, 60k+ from wrk on the same box).
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { Payload } from "./payloads";

export const WRK_CONNECTIONS = 64;
export const WRK_THREADS = 1;

export interface WrkResult {
  requests: number;
  seconds: number;
  statuses: Record<string, number>;
  errors: Record<string, number>;
  p50: number;
  p99: number;
  cpuSeconds: number;
}

/** The path of wrk, or why there is none (the bench then skips wrk rows and says so). */
export function findWrk(progress: (line: string) => void): { path?: string; note: string } {
  const which = () => spawnSync("sh", ["-c", "command -v wrk"], { encoding: "utf8" }).stdout.trim();
  let found = which();
  if (found) return { path: found, note: `wrk found at ${found}` };
  if (process.getuid?.() === 0) {
    progress("wrk not found; trying apt-get install -y wrk …");
    const apt = spawnSync("apt-get", ["install", "-y", "wrk"], { encoding: "utf8", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
    found = which();
    if (found) return { path: found, note: `wrk installed with apt-get (${found})` };
    return { note: `wrk is not installed and apt-get install -y wrk failed (${(apt.stderr || "").trim().split("\n").pop()}); HTTP throughput rows skipped` };
  }
  return { note: "wrk is not installed and the bench is not root (run: sudo apt-get install -y wrk); HTTP throughput rows skipped" };
}

/** Writes what bench/wrk.lua reads; returns the directory. */
export function writeWrkFiles(dir: string, payload: Payload, tokens: string[]): string {
  mkdirSync(dir, { recursive: true });
  payload.bodies.forEach((body, i) => writeFileSync(path.join(dir, `body-${i + 1}.bin`), body));
  const headers = [`Content-Type: ${payload.contentType}`, ...(payload.contentEncoding ? [`Content-Encoding: ${payload.contentEncoding}`] : [])];
  writeFileSync(path.join(dir, "headers.txt"), `${headers.join("\n")}\n`);
  writeFileSync(path.join(dir, "tokens.txt"), `${tokens.join("\n")}\n`);
  return dir;
}

/** Runs wrk -c64 for `seconds` against `url` with the bodies in `dir`. */
export async function runWrk(wrk: string, url: string, dir: string, bodies: number, seconds: number, connections = WRK_CONNECTIONS): Promise<WrkResult> {
  const script = path.join(import.meta.dir, "wrk.lua");
  const args = [
    wrk,
    `-t${Math.min(WRK_THREADS, connections)}`,
    `-c${connections}`,
    `-d${seconds}s`,
    "--timeout",
    "10s",
    "-s",
    script,
    url,
    "--",
    dir,
    String(bodies),
  ];
  const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout as ReadableStream).text(), new Response(proc.stderr as ReadableStream).text()]);
  const code = await proc.exited;
  const line = out.split("\n").find((l) => l.startsWith("WRK-RESULT "));
  if (code !== 0 || !line) throw new Error(`wrk failed (exit ${code}): ${err || out}`);
  const r = JSON.parse(line.slice("WRK-RESULT ".length)) as {
    requests: number;
    durationUs: number;
    statuses: Record<string, number>;
    errors: Record<string, number>;
    p50Us: number;
    p99Us: number;
  };
  const usage = proc.resourceUsage();
  const cpuSeconds = usage ? Number(usage.cpuTime.user + usage.cpuTime.system) / 1e6 : 0;
  return { requests: r.requests, seconds: r.durationUs / 1e6, statuses: r.statuses, errors: r.errors, p50: r.p50Us / 1000, p99: r.p99Us / 1000, cpuSeconds };
}
