// The README's configuration table is the settings' documentation: it must name every variable
// config.ts reads, and give each default as config.ts's DEFAULTS has it, so the two cannot drift.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { DEFAULTS } from "../../src/config";

const ROOT = path.join(import.meta.dir, "..", "..");
const README = readFileSync(path.join(ROOT, "README.md"), "utf8");
const CONFIG = readFileSync(path.join(ROOT, "src", "config.ts"), "utf8");

/** `| `A` / `B` | 3000 / 3001 | … |` → [["A", "3000"], ["B", "3001"]], for the rows under "## Configuration". */
function documented(): Map<string, string> {
  const section = README.slice(README.indexOf("## Configuration"), README.indexOf("\n## ", README.indexOf("## Configuration") + 5));
  const rows = new Map<string, string>();
  for (const line of section.split("\n")) {
    const cells = line.split("|").map((cell) => cell.trim());
    if (cells.length < 4 || !cells[1]!.startsWith("`")) continue;
    const names = [...cells[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
    const defaults = cells[2]!.split(" / ");
    names.forEach((name, i) => rows.set(name, (defaults[i] ?? defaults[0]!).trim()));
  }
  return rows;
}

/** "20 MiB" → 20971520, "`3000`" → 3000, "1,000,000" → 1000000, "`0` (off)" → 0, "`./.data`" → "./.data". */
function parse(text: string): string | number {
  const plain = text
    .replaceAll("`", "")
    .replace(/\s*\(.*\)$/, "")
    .trim();
  const mib = /^([\d.]+) MiB$/.exec(plain);
  if (mib) return Number(mib[1]) * 1024 * 1024;
  if (/^[\d,]+$/.test(plain)) return Number(plain.replaceAll(",", ""));
  return plain;
}

const read = new Set([...CONFIG.matchAll(/(?:int|oneOf|text)\("([A-Z_]+)"/g)].map((m) => m[1]!));

test("every variable config.ts reads is in the README's table, and nothing else", () => {
  expect([...documented().keys()].sort()).toEqual([...read].sort());
});

test("every default in the README's table is config.ts's", () => {
  const rows = documented();
  const wrong = Object.entries(DEFAULTS)
    .filter(([name, value]) => parse(rows.get(name) ?? "missing") !== value)
    .map(([name, value]) => `${name}: README says ${rows.get(name)}, config.ts has ${value}`);
  expect(wrong).toEqual([]);
});
