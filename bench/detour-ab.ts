// A/B of the exact-number decision on json-100 bodies of both corpora, interleaved in one process
// (best of 7 rounds, so a shared machine's noise hits every variant alike):
//   bun bench/detour-ab.ts
// "before issue 10": the whole-text regexes sent every realistic body through the reviver;
// "strings cut out": numbers.ts's needsExactNumbers alone; "parse, walk, then cut": decode.ts now.
import { payload } from "./payloads";
import { keepExactNumbers } from "../src/codec/decode";
import { needsExactNumbers, hasCandidate, holdsDoubtfulNumber } from "../src/codec/numbers";
const A=/\d{16}/, B=/[eE][+-]?\d{3}/;
const variants: Record<string, (t: string) => unknown> = {
  "before issue 10 (whole-text regex)": (t: string) => (A.test(t) || B.test(t) ? JSON.parse(t, keepExactNumbers as any) : JSON.parse(t)),
  "strings cut out": (t) => (needsExactNumbers(t) ? JSON.parse(t, keepExactNumbers as any) : JSON.parse(t)),
  "parse, walk, then cut": (t) => { if (!hasCandidate(t)) return JSON.parse(t); const v = JSON.parse(t); if (!holdsDoubtfulNumber(v) || !needsExactNumbers(t)) return v; return JSON.parse(t, keepExactNumbers as any); },
};
for (const c of ["synthetic","realistic"] as const) {
  const texts = payload("json-100", c).bodies.map(b => new TextDecoder().decode(b));
  const best: Record<string, number> = {};
  for (let round = 0; round < 7; round++) for (const [label, f] of Object.entries(variants)) {
    let n = 0; const t0 = performance.now(); while (performance.now() - t0 < 200) { for (const t of texts) f(t); n += texts.length; }
    const us = (performance.now() - t0) * 1000 / n; best[label] = Math.min(best[label] ?? Infinity, us);
  }
  for (const [label, us] of Object.entries(best)) console.log(c.padEnd(10), label.padEnd(36), us.toFixed(1), "µs/body (best of 7 interleaved rounds)");
}
