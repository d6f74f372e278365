// The live stream's matcher per event (src/query/match.ts), for the query language's patterns and
// the forms beside them: the automaton of src/query/automaton.ts against JavaScript's own RegExp on
// the same written pattern (which the stream never runs: it backtracks), and whole matchers
// (printing the event as jsonb does included, for `/…/` and words). Pure: no HTTP, no database.
//   bun bench/patterns.ts          prints a table
import { compileRegex } from "../src/query/automaton";
import { compileMatcher, jsonbText } from "../src/query/match";
import { parseQuery } from "../src/query/parse";
import { parseRegex, postgresPattern } from "../src/query/regex";

const N = 100_000;
const events = Array.from({ length: N }, (_, i) => ({
  level: ["info", "warn", "error"][i % 3],
  message: `GET /api/v${i % 3}/users/${i} served in ${i % 500} ms${i % 97 === 0 ? " after timeout" : ""}`,
  service: "checkout",
  host: `web-${i % 7}`,
  http: { method: "GET", status: 200 + (i % 5) * 100, path: `/api/v1/users/${i}` },
  trace_id: `${((i * 2654435761) >>> 0).toString(16).padStart(8, "0")}deadbeefcafebabe`,
}));
const lines = events.map((event) => jsonbText(event));

/** Nanoseconds per item, the best of three passes after one to warm up. */
function time(items: number, run: () => number): { ns: number; hits: number } {
  let hits = run();
  let best = Infinity;
  for (let pass = 0; pass < 3; pass++) {
    const start = performance.now();
    hits = run();
    best = Math.min(best, performance.now() - start);
  }
  return { ns: (best / items) * 1e6, hits };
}

const rows: string[][] = [];
for (const source of ["time(out|d)", "(?i)TIMEOUT", '^\\{.*"status": 5[0-9][0-9]', "users/[0-9]+7 served"]) {
  const regex = parseRegex(source);
  const automaton = compileRegex(regex);
  const native = new RegExp(postgresPattern(regex), "su");
  const ours = time(N, () => lines.filter((line) => automaton(line)).length);
  const theirs = time(N, () => lines.filter((line) => native.test(line)).length);
  rows.push([`/${source}/ on the event's text`, ours.ns.toFixed(0), theirs.ns.toFixed(0), String(ours.hits)]);
}
for (const query of ["/time(out|d)/", 'message=~"time(out|d)"', "timeout", "message:timeout", "message:get*", "level:error", "trace_id:*"]) {
  const match = compileMatcher(parseQuery(query)!);
  const result = time(N, () => events.filter((event) => match(event)).length);
  rows.push([`matcher ${query}`, result.ns.toFixed(0), "", String(result.hits)]);
}
const mean = Math.round(lines.reduce((sum, line) => sum + line.length, 0) / N);
console.log(`${N} events of ${mean} characters on average; ns per event (Bun ${Bun.version})`);
console.log(["", "ours", "RegExp", "matched"].map((h, k) => (k === 0 ? h.padEnd(48) : h.padStart(8))).join(""));
for (const row of rows) console.log(row.map((cell, k) => (k === 0 ? cell.padEnd(48) : cell.padStart(8))).join(""));
