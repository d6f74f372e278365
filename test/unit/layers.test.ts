// The folders read as the data path, and imports point one way: down this list, never up, and
// no module imports itself through others (a cycle). codec/ is pure: no HTTP, no storage.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";

const SRC = path.join(import.meta.dir, "..", "..", "src");

/** Lower layers first; a module may import its own layer or lower ones. */
const LAYERS: Record<string, number> = {
  "errors.ts": 0,
  "config.ts": 0,
  "metrics.ts": 0,
  "types.d.ts": 0,
  metrics: 0,
  "timers.ts": 0,
  "periodic.ts": 0,
  "service.ts": 0,
  "rpc.ts": 0,
  // The numbers memory/ owns (pure data, no imports): the ring and the codec read them too.
  "memory/costs.ts": 0,
  codec: 1,
  store: 2,
  buffer: 3,
  memory: 4,
  http: 4,
  // Ingest worker processes: what runs them needs only the settings and the registry.
  cluster: 4,
  sources: 5,
  ingest: 5,
  query: 5,
  retention: 5,
  tail: 6,
  tokens: 6,
  views: 6,
  web: 6,
  "listeners.ts": 7,
  "stop.ts": 7,
  "server.ts": 8,
  "uncaught.ts": 8,
  "main.ts": 9,
};

function modules(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return modules(full);
    return /\.ts$/.test(entry.name) ? [path.relative(SRC, full)] : [];
  });
}

function importsOf(module: string): string[] {
  const text = readFileSync(path.join(SRC, module), "utf8");
  const found: string[] = [];
  for (const match of text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
    const target = path.normalize(path.join(path.dirname(module), match[1]!));
    found.push(target.endsWith(".ts") ? target : `${target}.ts`);
  }
  return found;
}

const layerOf = (module: string) => LAYERS[module.split(path.sep).join("/")] ?? LAYERS[module.split(path.sep)[0]!];
const all = modules();
const graph = new Map(all.map((module) => [module, importsOf(module)]));

test("every module belongs to a layer", () => {
  expect(all.filter((module) => layerOf(module) === undefined)).toEqual([]);
});

test("nothing imports upward", () => {
  const upward: string[] = [];
  for (const [module, targets] of graph) {
    for (const target of targets) if (layerOf(target)! > layerOf(module)!) upward.push(`${module} → ${target}`);
  }
  expect(upward).toEqual([]);
});

test("no import cycles", () => {
  const cycles: string[] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (module: string, trail: string[]) => {
    if (state.get(module) === "done") return;
    if (state.get(module) === "open") {
      cycles.push([...trail.slice(trail.indexOf(module)), module].join(" → "));
      return;
    }
    state.set(module, "open");
    for (const target of graph.get(module) ?? []) visit(target, [...trail, module]);
    state.set(module, "done");
  };
  for (const module of all) visit(module, []);
  expect(cycles).toEqual([]);
});

test("codec/ knows nothing of HTTP or storage", () => {
  // Besides the error type, only pure data: the config's defaults, the numbers memory/ owns.
  const allowed = new Set(["errors.ts", "config.ts", path.join("memory", "costs.ts")]);
  const reaching: string[] = [];
  for (const [module, targets] of graph) {
    if (!module.startsWith(`codec${path.sep}`)) continue;
    for (const target of targets) if (!target.startsWith(`codec${path.sep}`) && !allowed.has(target)) reaching.push(`${module} → ${target}`);
    if (/from "(elysia|postgres|drizzle-orm[^"]*)"/.test(readFileSync(path.join(SRC, module), "utf8")))
      reaching.push(`${module} → a server or database package`);
  }
  expect(reaching).toEqual([]);
});

test("query/, retention/ and tail/ name no table: they ask store/ (issue 32: one folder owns the tables)", () => {
  // Every table the migrations create (drizzle's last snapshot), the hot tier's and the days' partitions by prefix.
  const journal = JSON.parse(readFileSync(path.join(SRC, "..", "drizzle", "meta", "_journal.json"), "utf8")) as { entries: { idx: number }[] };
  const last = String(journal.entries.at(-1)!.idx).padStart(4, "0");
  const snapshot = JSON.parse(readFileSync(path.join(SRC, "..", "drizzle", "meta", `${last}_snapshot.json`), "utf8")) as { tables: Record<string, unknown> };
  const tables = Object.keys(snapshot.tables).map((name) => name.replace(/^public\./, ""));
  expect(tables).toContain("log_blocks");
  expect(tables).toContain("flush_batches");
  // A name where SQL takes a table, in code, not in a comment: comments say which tables a function reaches.
  const named = new RegExp(`\\b(?:from|join|into|update|table|truncate|lock)\\s+(?:only\\s+)?"?(${tables.join("|")})\\b`, "gi");
  const found: string[] = [];
  for (const module of all) {
    if (!/^(query|retention|tail)\//.test(module.split(path.sep).join("/"))) continue;
    const code = readFileSync(path.join(SRC, module), "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
    for (const match of code.matchAll(named)) found.push(`${module}: ${match[1]}`);
  }
  expect(found).toEqual([]);
});
