// Writes the Prometheus text exposition format (version 0.0.4): per family one HELP and one TYPE
// line before its samples, label values and help text escaped, histograms as cumulative
// `_bucket{le=…}` lines ending at "+Inf", then `_sum` and `_count`. Runs once per scrape, never on
// the ingest path. A family written twice is a bug in the caller: it throws.
import type { Histogram } from "./histogram";

export type MetricType = "counter" | "gauge" | "histogram";

export class Exposition {
  private readonly lines: string[] = [];
  private readonly families = new Set<string>();

  /** HELP and TYPE of a family; its samples follow. Counter names end in `_total` (OpenMetrics' rule). */
  family(name: string, type: MetricType, help: string): this {
    if (this.families.has(name)) throw new Error(`metric family ${name} written twice`);
    if (type === "counter" && !name.endsWith("_total")) throw new Error(`counter ${name} must end in _total`);
    this.families.add(name);
    this.lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    return this;
  }

  /** One sample; `labels` as made by `labels()` ("" for none). */
  sample(name: string, labels: string, value: number): this {
    this.lines.push(labels === "" ? `${name} ${formatValue(value)}` : `${name}{${labels}} ${formatValue(value)}`);
    return this;
  }

  /** A histogram's series: cumulative buckets, sum, count; `labels` without `le`. */
  histogram(name: string, labels: string, histogram: Histogram): this {
    const { bounds, counts } = histogram;
    const prefix = labels === "" ? "" : `${labels},`;
    let cumulative = 0;
    for (let i = 0; i < bounds.length; i++) {
      cumulative += counts[i]!;
      this.sample(`${name}_bucket`, `${prefix}le="${formatValue(bounds[i]!)}"`, cumulative);
    }
    this.sample(`${name}_bucket`, `${prefix}le="+Inf"`, histogram.count);
    this.sample(`${name}_sum`, labels, histogram.sum);
    return this.sample(`${name}_count`, labels, histogram.count);
  }

  text(): string {
    return `${this.lines.join("\n")}\n`;
  }
}

/** `name="value",…` with values escaped (backslash, double quote, line feed). */
export function labels(pairs: Readonly<Record<string, string | number>>): string {
  let out = "";
  for (const name in pairs) out += `${out === "" ? "" : ","}${name}="${escapeLabel(String(pairs[name]))}"`;
  return out;
}

export function escapeLabel(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`));
}

function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (c) => (c === "\n" ? "\\n" : "\\\\"));
}

/** Go's ParseFloat reads what JavaScript prints (1e-7, 12345.678); the infinities and NaN are spelt its way. */
export function formatValue(value: number): string {
  if (Number.isFinite(value)) return String(value);
  if (Number.isNaN(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}
