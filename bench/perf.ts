// Linux perf's split of the service process's CPU by where the code lives — Bun's native code, the
// kernel, JIT-compiled JavaScript (logpond's own code and the libraries') — under wrk, one payload:
//   bun bench/perf.ts [payload=json-1] [corpus=realistic] [--paused]     (needs `apt-get install linux-perf`)
// Bun's binary has no symbols, so native time is not split further.
import * as path from "node:path";
import type { Corpus, PayloadName } from "./payloads";
import { startProbe } from "./probe";

const [name = "json-1", corpus = "realistic"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const probe = await startProbe("logpond-perf-", name as PayloadName, corpus as Corpus);
try {
  await probe.load(3); // warm-up
  const load = probe.load(8);
  await Bun.sleep(1000);
  const data = path.join(probe.work, "perf.data");
  await Bun.spawn(["perf", "record", "-F", "2000", "-g", "-p", String(probe.service.proc.pid), "-o", data, "--", "sleep", "5"], { stdout: "ignore", stderr: "ignore" }).exited;
  await load;
  const report = Bun.spawn(["sh", "-c", `perf report -i ${data} --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep '%'`], { stdout: "pipe" });
  console.log(await new Response(report.stdout as ReadableStream).text());
} finally {
  await probe.stop();
}
