// The standalone benches of the storage layout (bench/storage.ts) and of the read path
// (bench/read.ts), run by a full `npm run bench` after the scenarios, each in its own process with
// its own PostgreSQL; what they print is appended to bench/RESULTS.md as it is. They print
// figures rather than table rows because each measures something of its own (a query's latency,
// a ratio of two ingest runs), with the conditions it was measured under beside it.
import { appendFileSync } from "node:fs";
import * as path from "node:path";

const STANDALONE = [
  { script: "storage.ts", title: "Storage layout (bench/storage.ts: index choice, the 50 ms query at 10M rows, ingest during a sweep)", args: [] as string[] },
  { script: "read.ts", title: "Read path (bench/read.ts: query latency, ingest with 50 tails open ÷ without)", args: [] as string[] },
];

/** Runs each standalone bench; appends its output to RESULTS.md when `results` is set. False if one failed. */
export async function runStandalone(progress: (line: string) => void, results?: string): Promise<boolean> {
  let ok = true;
  for (const { script, title, args } of STANDALONE) {
    progress(`standalone: bench/${script} …`);
    const proc = Bun.spawn([process.execPath, path.join(import.meta.dir, script), ...args], { stdout: "pipe", stderr: "pipe" });
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    const code = await proc.exited;
    if (code !== 0) ok = false;
    progress(`standalone: bench/${script} exited ${code}`);
    process.stdout.write(out);
    if (results) {
      const tail = code === 0 ? "" : `\n(exit ${code})\n${err.slice(-2000)}`;
      appendFileSync(results, `\n## ${title}\n\n\`\`\`\n${out.trim()}${tail}\n\`\`\`\n`);
    }
  }
  return ok;
}
