// bench/scale.ts's report: the figures as a Markdown table, then the reads beside grep.
import { fmt } from "../lib";
import { NEWEST_RUNS, type ReadResult } from "./reads";

export const bytes = (n: number) => (n >= 1 << 30 ? `${fmt(n / (1 << 30), 2)} GiB` : `${fmt(n / (1 << 20), 1)} MiB`);

export function markdown(header: string, figures: [string, string][], reads: ReadResult[], from: string, queryTimeoutMs: string): string {
  const lines = [header, "", "| figure | value |", "|---|---|", ...figures.map(([k, v]) => `| ${k} | ${v} |`), ""];
  lines.push(
    `Reads: query API, batch=100, after 1 warm-up the median of ${NEWEST_RUNS} (newest 100) or 3 (searches) (QUERY_TIMEOUT_MS ${queryTimeoutMs || "5000, the default"}; rows: of the last run that answered); default window: the last 30 minutes; 24 h window and searches: all sources from ${from} to now. grep: \`grep -F -c\` (\`grep -E -c\` for a regex) over the NDJSON file, median of 3 after 1 warm-up.`,
    "",
  );
  lines.push("| read | query | status | ms | rows | grep -c | grep ms | logpond ÷ grep |", "|---|---|---|---:|---:|---:|---:|---:|");
  for (const r of reads) {
    const q = r.spec.query ? `\`${r.spec.query}\`` : "—";
    const g = r.grep;
    // A 503 at QUERY_TIMEOUT_MS (or a connection closed by logpond): the search would have taken at least that long.
    const atLeast = r.status !== "200" ? "≥ " : "";
    lines.push(
      `| ${r.spec.name} | ${q} | ${r.status} | ${atLeast}${fmt(r.ms, 1)} | ${r.rows} | ${g ? fmt(g.count) : "—"} | ${g ? fmt(g.ms, 1) : "—"} | ${g ? `${atLeast}${fmt(r.ms / g.ms, 2)}` : "—"} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}
