// Every background job runs on src/periodic.ts's periodic() (single flight, abortable, re-armed,
// errors counted): no module under src/ calls setInterval itself. A source scan, as
// test/unit/layers.test.ts does for imports. src/web/ is left out: its scripts run in the browser,
// where periodic() is not served.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";

const SRC = path.join(import.meta.dir, "..", "..", "src");

/** Modules allowed to name setInterval (periodic.ts names it only in its comments). */
const ALLOWED = new Set(["periodic.ts"]);

function modules(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return full === path.join(SRC, "web") ? [] : modules(full);
    return /\.[cm]?[jt]s$/.test(entry.name) ? [path.relative(SRC, full).split(path.sep).join("/")] : [];
  });
}

/** The code without its comments, so that a comment may name what the code must not call. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/** The lines of `text` that use setInterval (a call, a reference, an import from node:timers). */
function intervalsIn(text: string): string[] {
  return code(text)
    .split("\n")
    .filter((line) => /\bsetInterval\b/.test(line))
    .map((line) => line.trim());
}

test("the scan finds a setInterval in code, not one named in a comment", () => {
  expect(intervalsIn("const t = setInterval(() => tick(), 200);")).toEqual(["const t = setInterval(() => tick(), 200);"]);
  expect(intervalsIn('import { setInterval as every } from "node:timers";')).toHaveLength(1);
  expect(intervalsIn("// setInterval's cadence\n/** like setInterval */\nrun();")).toEqual([]);
});

test("no module under src/ but periodic.ts calls setInterval: background jobs use periodic()", () => {
  const all = modules();
  // The scan reads the modules that run background jobs (a wrong path would make it pass on nothing).
  expect(all).toEqual(expect.arrayContaining(["buffer/flusher.ts", "tail/hub.ts", "retention/scheduler.ts", "periodic.ts"]));
  const found = all
    .filter((module) => !ALLOWED.has(module))
    .flatMap((module) => intervalsIn(readFileSync(path.join(SRC, module), "utf8")).map((line) => `${module}: ${line}`));
  expect(found).toEqual([]);
});
