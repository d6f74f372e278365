// The cost of computing PostgreSQL's jsonb text in the application (src/codec/jsonb-text.ts) on the
// realistic corpus as JSON.stringify writes it (what the flusher holds), against JSON.parse of the
// same texts for scale. Each line is read once (a character of it), as the sealer will: that makes
// the engine flatten the concatenated text, part of the cost. Timed in the process's CPU time (a shared box's waits don't count), the
// fastest of 15 rounds after a warm-up; one thread.
//   bun bench/jsonb-text.ts
import { jsonbText } from "../src/codec/jsonb-text";
import { realisticBatch } from "./corpus";

function fastest(rounds: number, work: () => void, count: number): number {
  const results: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const started = process.cpuUsage();
    let n = 0;
    let spent = 0;
    while (spent < 200_000) {
      work();
      n += count;
      const used = process.cpuUsage(started);
      spent = used.user + used.system;
    }
    if (r > 0) results.push(spent / n);
  }
  return Math.min(...results);
}

const texts = realisticBatch(16_000, 0).map((event) => JSON.stringify(event));
const small = texts.filter((t) => t.length < 10_000);
const typical = small.filter((t) => t.length >= 550 && t.length <= 650);
const chars = (list: string[]) => list.reduce((sum, t) => sum + t.length, 0) / list.length;
let sink = 0;
const rows: [string, string[]][] = [
  ["all (large ones included)", texts],
  ["under 10 KB", small],
  ["550–650 characters", typical],
];
console.log(`Bun ${Bun.version}`);
for (const [name, list] of rows) {
  const ours = fastest(15, () => list.forEach((t) => (sink += jsonbText(t).line.charCodeAt(100))), list.length);
  const parse = fastest(15, () => list.forEach((t) => (sink += JSON.parse(t) ? 1 : 0)), list.length);
  console.log(
    `${name.padEnd(26)} ${String(list.length).padStart(6)} events, ${chars(list).toFixed(0).padStart(5)} chars avg: jsonbText ${ours.toFixed(2)} µs/event (JSON.parse ${parse.toFixed(2)})`,
  );
}
if (sink === 0) console.log("");
