// The bench's report: the rows table (both corpora), the throughput targets (targets() below) with ratio vs goal
// and met / not met, and the micro-benchmarks. Printed; the run's raw JSON goes to
// bench/out/results/<time>.json (gitignored: per-run JSONs were 580 KB of history for figures
// RESULTS.md already carries); a full run (no --quick, no --only) rewrites bench/RESULTS.md.
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { fmt, type Row } from "./lib";
import type { MicroResult } from "./micro";

export interface ReportInput {
  rows: Row[];
  micro: MicroResult[];
  machine: Record<string, string | number>;
  settings: { runs: number; seconds: number; flushIntervalMs: number; bufferMaxBytes: number; wrkNote: string; quick: boolean; only: string[] };
}

export interface Target {
  label: string;
  goal: string;
  figure: string;
  met: boolean | undefined;
}

export function targets({ rows, settings }: ReportInput): Target[] {
  const get = (name: string, corpus: string) => rows.find((r) => r.name === name && r.corpus === corpus);
  const out: Target[] = [];
  const ratioTarget = (label: string, name: string, corpus: string, goal: number) => {
    const row = get(name, corpus);
    out.push({
      label,
      goal: `≥ ${goal}×`,
      figure: row?.ratio ? `${row.ratio.value.toFixed(2)}× (${fmt(row.median.eventsPerSecond)} events/s)` : "not run",
      met: row?.ratio ? row.ratio.value >= goal : undefined,
    });
  };
  ratioTarget("realistic json-100 ÷ psql \\copy (1 stream), end-to-end", "json-100", "realistic", 1.2);
  ratioTarget("realistic msgpackr records ÷ psql \\copy", "msgpack-records-100", "realistic", 1.2);
  ratioTarget("realistic @logtail/node bodies ÷ psql \\copy", "logtail-gzip-msgpack-1000", "realistic", 1.2);
  for (const corpus of ["realistic", "synthetic"]) {
    const single = get("json-1", corpus);
    out.push({
      label: `${corpus} single-event JSON req/s ÷ bare Bun.serve (both wrk -c64)`,
      goal: "≥ 0.7×",
      figure: single?.ratio ? `${single.ratio.value.toFixed(2)}× (${fmt(single.median.requestsPerSecond)} req/s)` : "not run",
      met: single?.ratio ? single.ratio.value >= 0.7 : undefined,
    });
  }
  const limit = settings.bufferMaxBytes / 2 ** 20 + 200;
  const scenarios = rows.filter((r) => r.kind === "scenario");
  if (scenarios.length) {
    const worst = scenarios.reduce((a, b) => (Math.max(...b.runs.map((x) => x.peakRssMiB)) > Math.max(...a.runs.map((x) => x.peakRssMiB)) ? b : a));
    const peak = Math.max(...worst.runs.map((x) => x.peakRssMiB));
    out.push({
      label: "peak RSS, every scenario",
      goal: `≤ BUFFER_MAX_BYTES + 200 MiB = ${fmt(limit)} MiB`,
      figure: `${fmt(peak)} MiB (${worst.name}, ${worst.corpus})`,
      met: peak <= limit,
    });
  } else out.push({ label: "peak RSS, every scenario", goal: `≤ ${fmt(limit)} MiB`, figure: "not run", met: undefined });
  for (const corpus of ["realistic", "synthetic"]) {
    const half = get("json-100 at half load", corpus);
    out.push({
      label: `${corpus} buffered p99 at half load`,
      goal: "≤ 20 ms",
      figure: half ? `${fmt(half.median.p99, 1)} ms` : "not run",
      met: half ? half.median.p99 <= 20 : undefined,
    });
    const durable = get("durable json-100", corpus);
    const bound = settings.flushIntervalMs + 30;
    out.push({
      label: `${corpus} durable p99`,
      goal: `≤ FLUSH_INTERVAL_MS + 30 = ${bound} ms`,
      figure: durable ? `${fmt(durable.median.p99, 1)} ms` : "not run",
      met: durable ? durable.median.p99 <= bound : undefined,
    });
  }
  return out;
}

export function render(input: ReportInput, when: string): string {
  const { rows, micro, machine, settings } = input;
  const lines: string[] = [];
  lines.push(`# Bench results`, "");
  lines.push(
    `Written by \`npm run bench${settings.quick ? " -- --quick" : ""}\` on ${when.slice(0, 10)}: ${settings.runs} run(s) of ${settings.seconds} s per row, medians shown.`,
  );
  lines.push(
    `HTTP throughput rows: wrk -c64 (one thread), bodies pre-built; paced and durable rows: the JS generator. Same box for load generator, service and database.`,
    "",
  );
  lines.push(`| | |`, `|---|---|`);
  lines.push(
    `| CPU | ${machine.cpu} × ${machine.cores} |`,
    `| Bun | ${machine.bun} |`,
    `| PostgreSQL | ${machine.postgres} |`,
    `| commit | ${machine.commit} |`,
    `| load generator | ${settings.wrkNote} |`,
  );
  lines.push(
    `| settings | defaults: FLUSH_INTERVAL_MS=${settings.flushIntervalMs}, FLUSH_MAX_EVENTS=20000, FLUSH_STREAMS=2, BUFFER_MAX_BYTES=${settings.bufferMaxBytes / 2 ** 20} MiB |`,
    "",
  );
  lines.push(`Corpora: **synthetic** (one small event shape, ~200 B) and **realistic** (bench/corpus.ts, seeded: access logs, app logs with`);
  lines.push(`trace/span ids, UUIDs, k8s metadata, stack traces, Unicode, a few 50–200 KB events; ~600 B typical). events/s is sustained: the`);
  lines.push(`clock stops when the last acknowledged event is committed. Ratios: events/s ÷ \`psql \\copy\` of the same corpus's rows (1 stream);`);
  lines.push(`single-event JSON: req/s ÷ the bare Bun.serve's. CPU µs/req: the service process's CPU time per request (steadier than req/s`);
  lines.push(`when the machine is shared). Conservation: stored = acknowledged by the service; wrk's own count may be short by the`);
  lines.push(`requests in flight when it stops (≤ 64).`, "");
  for (const corpus of ["synthetic", "realistic", "—"]) {
    const group = rows.filter((r) => r.corpus === corpus);
    if (!group.length) continue;
    lines.push(`### ${corpus === "—" ? "Other rows" : `${corpus[0]!.toUpperCase()}${corpus.slice(1)} corpus`}`, "");
    lines.push(`| row | driven by | events/s | req/s | MB/s | p50 / p99 ms | ratio | peak RSS MiB | CPU µs/req | conservation |`);
    lines.push(`|---|---|---|---|---|---|---|---|---|---|`);
    for (const row of group) {
      const m = row.median;
      const ratio = !row.ratio
        ? row.kind === "ceiling"
          ? "ceiling"
          : "—"
        : `${row.ratio.value.toFixed(2)}× ${row.ratio.to.startsWith("bare") ? "bare" : "\\copy"}`;
      const conservation = row.kind !== "scenario" ? "—" : row.mismatch ? `**MISMATCH** ${row.mismatch}` : `stored = acked (${fmt(m.serverAcked)})`;
      lines.push(
        `| ${row.name} — ${row.note} | ${row.tool} | ${fmt(m.eventsPerSecond)} | ${m.requestsPerSecond ? fmt(m.requestsPerSecond) : "—"} | ${fmt(m.megabytesPerSecond, 1)} | ${m.p99 ? `${fmt(m.p50, 1)} / ${fmt(m.p99, 1)}` : "—"} | ${ratio} | ${m.peakRssMiB ? fmt(m.peakRssMiB) : "—"} | ${m.serviceCpuUsPerRequest ? fmt(m.serviceCpuUsPerRequest, 1) : "—"} | ${conservation} |`,
      );
    }
    lines.push("");
  }
  lines.push("## Targets", "", "| target | goal | figure | met |", "|---|---|---|---|");
  for (const t of targets(input)) lines.push(`| ${t.label} | ${t.goal} | ${t.figure} | ${t.met === undefined ? "not run" : t.met ? "yes" : "**no**"} |`);
  if (micro.length) {
    lines.push("", "## Micro-benchmarks (bench/micro.ts, one core, no I/O)", "", "| hop | events/s | µs per body |", "|---|---|---|");
    for (const m of micro) lines.push(`| ${m.name} | ${fmt(m.eventsPerSecond)} | ${fmt(m.microsecondsPerBody, 1)} |`);
  }
  lines.push("", "Every figure is from one `npm run bench`; ratios compare rows of the same run. Raw runs: `bench/out/results/` (not committed).", "");
  return lines.join("\n");
}

export function writeReport(input: ReportInput): string {
  const when = new Date().toISOString();
  const text = render(input, when);
  console.log(`\n${text}`);
  const dir = path.join(import.meta.dir, "out", "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `${when.replace(/[:.]/g, "-")}.json`), `${JSON.stringify({ when, ...input }, null, 2)}\n`);
  if (!input.settings.quick && input.settings.only.length === 0) writeFileSync(path.join(import.meta.dir, "RESULTS.md"), text);
  return text;
}
