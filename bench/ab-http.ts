// This tree's service against another checkout's, over HTTP, both running at once on one
// PostgreSQL: wrk -c64 bursts of 3 s alternate between them (order flipped every pair), and each
// burst's service CPU per request is read from /proc. Separate `npm run bench` runs on a busy
// machine differ by more than a small change could; paired bursts share its load.
//   bun bench/ab-http.ts --against DIR [--pairs 20] [--payload json-1]
//   (DIR: e.g. `git archive <commit> | tar -x -C DIR && ln -s $PWD/node_modules DIR/`)
import { rmSync } from "node:fs";
import * as path from "node:path";
import { createSource, spawnService, type Service } from "../test/helpers/service";
import { benchDir, benchPostgres, cpuSeconds, fmt } from "./lib";
import { payload, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";

const argv = process.argv.slice(2);
const option = (name: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : undefined);
const against = option("against");
if (!against) throw new Error("usage: bun bench/ab-http.ts --against DIR [--pairs 20] [--payload json-1]");
const PAIRS = Number(option("pairs") ?? 20);
const name = (option("payload") ?? "json-1") as PayloadName;
const wrk = findWrk(console.log).path;
if (!wrk) throw new Error("wrk is needed");

const trees = { [path.resolve(against)]: path.resolve(against), "this tree": path.join(import.meta.dir, "..") };
const work = benchDir("logpond-ab-http-");
const { url, stop } = await benchPostgres(work);
const services = new Map<string, { service: Service; dir: string; cpu: number[]; rps: number[] }>();
try {
  const p = payload(name, "realistic");
  for (const [label, root] of Object.entries(trees)) {
    const service = await spawnService(
      { DATABASE_URL: url, DATA_DIR: path.join(work, `data-${services.size}`), FLUSH_INTERVAL_MS: "200" },
      {
        command: [process.execPath, path.join(root, "src", "main.ts")],
      },
    );
    services.set(label, { service, dir: "", cpu: [], rps: [] });
    const tokens: string[] = [];
    for (let i = 0; i < 8; i++) tokens.push((await createSource(service, `ab-http ${services.size} ${i}`)).token);
    services.get(label)!.dir = writeWrkFiles(path.join(work, `wrk-${services.size}`), p, tokens);
  }
  const labels = [...services.keys()];
  for (let r = 0; r <= PAIRS; r++) {
    for (const label of r % 2 === 0 ? labels : [...labels].reverse()) {
      const side = services.get(label)!;
      const before = cpuSeconds(side.service.proc.pid);
      const w = await runWrk(wrk, `${side.service.ingestUrl}/`, side.dir, p.bodies.length, 3);
      const used = cpuSeconds(side.service.proc.pid) - before;
      if (r > 0) side.cpu.push((used * 1e6) / Math.max(1, w.requests)), side.rps.push((w.statuses["202"] ?? 0) / w.seconds);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
  for (const [label, side] of services)
    console.log(
      `${name} realistic, ${label}: ${fmt(median(side.rps))} req/s, ${fmt(median(side.cpu), 1)} service CPU µs/request (medians of ${side.cpu.length} bursts)`,
    );
  const [other, here] = labels.map((label) => services.get(label)!.cpu);
  console.log(`this tree used more CPU per request in ${here!.filter((x, i) => x > other![i]!).length} of ${here!.length} paired bursts`);
} finally {
  for (const { service } of services.values()) {
    await service.stop();
  }
  await stop();
  rmSync(work, { recursive: true, force: true });
}
