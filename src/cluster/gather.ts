// The series counted where events are taken in and written are counted, with ingest workers, in
// the workers: the ingestion series (`logpond_ingest_*`: per protocol and source, the request
// durations, the in-flight bytes), the buffer's and the flushes' (`logpond_buffer_*`,
// `logpond_flush*`) and what they lose or set aside. Each worker sends those families of its own
// scrape with its counters every second (cluster/worker.ts); the supervisor's /metrics shows each
// family once, every sample summed over the workers (a histogram's buckets too) and added to the
// supervisor's own where it counts the same (its buffer takes a spill replay's events), so a
// dashboard reads the same names as with one process. A worker that exits leaves its counters and
// histograms behind, added to its successor's, so no series goes back; its gauges go with it.
import type { Metrics } from "../metrics";

/** The families forwarded (names or prefixes): what an ingest process counts. */
const FORWARDED = [
  "logpond_ingest_",
  "logpond_buffer_",
  "logpond_flush",
  "logpond_events_lost_total",
  "logpond_dead_letter_events_total",
  "logpond_durable_timeouts_total",
] as const;

const forwarded = (name: string) => FORWARDED.some((prefix) => name.startsWith(prefix));

type Type = "counter" | "gauge" | "histogram";

interface Family {
  type: Type;
  help: string;
  /** `sampleName\u0000labels` → value, in the order the worker wrote them. */
  samples: Map<string, number>;
}

/** The forwarded families of an exposition (a worker's own scrape), as text to send. */
export function forwardedText(exposition: string): string {
  return exposition
    .split("\n")
    .filter((line) => forwarded(line.startsWith("# HELP ") || line.startsWith("# TYPE ") ? line.slice(7) : line))
    .join("\n");
}

function parse(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  let current: Family | undefined;
  let help = "";
  for (const line of text.split("\n")) {
    if (line.startsWith("# HELP ")) {
      help = line.slice(line.indexOf(" ", 7) + 1);
    } else if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ") as [string, Type];
      current = { type, help, samples: new Map() };
      families.set(name, current);
    } else if (current !== undefined) {
      const match = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (match) current.samples.set(`${match[1]}\u0000${match[2] ?? ""}`, Number(match[3]));
    }
  }
  return families;
}

/** One worker index's forwarded families: its current process's last report, and what its predecessors left. */
export class Gathered {
  private current = new Map<string, Family>();
  private readonly left = new Map<string, Family>();

  report(text: string): void {
    this.current = parse(text);
  }

  /** The process exited: its counters and histograms stay (a successor's are added to them). */
  exited(): void {
    for (const [name, family] of this.current) {
      if (family.type === "gauge") continue;
      let kept = this.left.get(name);
      if (kept === undefined) this.left.set(name, (kept = { type: family.type, help: family.help, samples: new Map() }));
      for (const [key, value] of family.samples) kept.samples.set(key, (kept.samples.get(key) ?? 0) + value);
    }
    this.current = new Map();
  }

  families(): Iterable<[string, Family]> {
    return [...this.left, ...this.current];
  }
}

/** Declares, at each report, the forwarded families not declared yet; each sums every worker's samples at a scrape. */
export function gatherInto(metrics: Metrics, workers: readonly Gathered[]): () => void {
  const declared = new Set<string>();
  return () => {
    for (const worker of workers) {
      for (const [name, { type, help }] of worker.families()) {
        if (declared.has(name)) continue;
        declared.add(name);
        metrics.gathered(name, type, help, (sample) => {
          const sums = new Map<string, number>();
          for (const other of workers)
            for (const [otherName, family] of other.families())
              if (otherName === name) for (const [key, value] of family.samples) sums.set(key, (sums.get(key) ?? 0) + value);
          for (const [key, value] of sums) {
            const at = key.indexOf("\u0000");
            sample(key.slice(0, at), key.slice(at + 1), value);
          }
        });
      }
    }
  };
}
