// Linux perf's split of the service process's CPU by where the code lives — Bun's native code, the
// kernel, JIT-compiled JavaScript (logpond's own code and the libraries') — under wrk, one payload:
//   bun bench/perf.ts [payload=json-1] [corpus=realistic] [--paused]     (needs `apt-get install linux-perf`)
// Bun's binary has no symbols, so native time is not split further.
import { rmSync } from "node:fs";
import * as path from "node:path";
import { createSource, SERVICE_API_TOKEN, spawnService } from "../test/helpers/service";
import { benchDir, benchPostgres } from "./lib";
import { payload, type Corpus, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";
const [name = "json-1", corpus = "realistic"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const work = benchDir("logpond-perf-");
const pg = await benchPostgres(work);
const svc = await spawnService({ DATABASE_URL: pg.url, DATA_DIR: path.join(work, "data") });
try {
  const src = await createSource(svc, "perf");
  if (process.argv.includes("--paused")) await fetch(`${svc.apiUrl}/api/v1/sources/${src.id}`, { method: "PATCH", headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` }, body: JSON.stringify({ ingesting_paused: true }) });
  const p = payload(name as PayloadName, corpus as Corpus);
  const dir = writeWrkFiles(path.join(work, "wrk"), p, [src.token]);
  const wrk = findWrk(() => {}).path!;
  await runWrk(wrk, svc.ingestUrl + "/", dir, p.bodies.length, 3);
  const load = runWrk(wrk, svc.ingestUrl + "/", dir, p.bodies.length, 8);
  await Bun.sleep(1000);
  const rec = Bun.spawn(["perf", "record", "-F", "2000", "-g", "-p", String(svc.proc.pid), "-o", path.join(work, "perf.data"), "--", "sleep", "5"], { stdout: "ignore", stderr: "ignore" });
  await rec.exited;
  await load;
  const rep = Bun.spawn(["sh", "-c", `perf report -i ${path.join(work, "perf.data")} --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep '%' | head -70`], { stdout: "pipe" });
  console.log(await new Response(rep.stdout as ReadableStream).text());
} finally {
  svc.proc.kill("SIGTERM"); await svc.proc.exited; await pg.stop(); rmSync(work, { recursive: true, force: true });
}
