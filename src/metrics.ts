// The /metrics registry: each module declares its own series beside its code and keeps the handle
// (a counter, a labelled counter, a histogram) or gives a function read at scrape (a gauge, a
// counter it keeps itself). This file knows no module: it hands out handles and renders them
// (Prometheus text format, metrics/exposition.ts) in the order they were declared, then process_*.
// Handles are bumped on the hot path once per request or per batch, never per event, without
// allocating; a series declared twice under one name is the same series (a second flusher in a
// test counts into the first's).
import { Exposition, labels } from "./metrics/exposition";
import { Histogram } from "./metrics/histogram";
import { writeProcessMetrics } from "./metrics/process";

export { BUCKETS, Histogram } from "./metrics/histogram";
export { type Exposition, labels } from "./metrics/exposition";

/** A counter a module bumps. */
export interface Counter {
  inc(by?: number): void;
  readonly value: number;
}

/** A counter with one label: a series per value, in the order first counted (`values`: rendered from the start). */
export interface CounterBy {
  inc(value: string, by?: number): void;
  get(value: string): number;
}

/** What a module declares its /metrics series with. */
export interface Registry {
  /** A counter this module bumps (its name ends in `_total`). */
  counter(name: string, help: string): Counter;
  /** A counter kept elsewhere, read at each scrape (its name ends in `_total`). */
  counter(name: string, help: string, read: () => number): void;
  /** A counter by one label; `values` are rendered from the start (zero until counted). */
  counterBy(name: string, help: string, label: string, values?: readonly string[]): CounterBy;
  /** A gauge read at each scrape. */
  gauge(name: string, help: string, read: () => number): void;
  /** A histogram of one series, `buckets` its upper bounds. */
  histogram(name: string, help: string, buckets: readonly number[]): Histogram;
  /** A histogram per value of one label, every one rendered from the start. */
  histogramBy<V extends string>(name: string, help: string, buckets: readonly number[], label: string, values: readonly V[]): Record<V, Histogram>;
  /** A family whose samples its module writes at each scrape (labels of its own). */
  family(name: string, type: "counter" | "gauge", help: string, write: (sample: (labels: string, value: number) => void) => void): void;
}

interface Family {
  readonly type: "counter" | "gauge" | "histogram";
  readonly help: string;
  /** The handle given out, returned again for the same name. */
  readonly handle?: unknown;
  write(out: Exposition, name: string): void;
}

class CounterHandle implements Counter {
  value = 0;
  inc(by = 1): void {
    this.value += by;
  }
}

class CounterByHandle implements CounterBy {
  readonly counts = new Map<string, number>();
  constructor(values: readonly string[]) {
    for (const value of values) this.counts.set(value, 0);
  }
  inc(value: string, by = 1): void {
    this.counts.set(value, (this.counts.get(value) ?? 0) + by);
  }
  get(value: string): number {
    return this.counts.get(value) ?? 0;
  }
}

export class Metrics implements Registry {
  /** Every family, in the order declared. */
  private readonly families = new Map<string, Family>();

  counter(name: string, help: string): Counter;
  counter(name: string, help: string, read: () => number): void;
  counter(name: string, help: string, read?: () => number): Counter | undefined {
    if (read) {
      this.families.set(name, { type: "counter", help, write: (out) => out.sample(name, "", read()) });
      return undefined;
    }
    return this.declare(name, "counter", help, () => {
      const counter = new CounterHandle();
      return { handle: counter, write: (out: Exposition) => out.sample(name, "", counter.value) };
    });
  }

  counterBy(name: string, help: string, label: string, values: readonly string[] = []): CounterBy {
    return this.declare(name, "counter", help, () => {
      const counter = new CounterByHandle(values);
      return { handle: counter, write: (out: Exposition) => counter.counts.forEach((n, value) => out.sample(name, labels({ [label]: value }), n)) };
    });
  }

  gauge(name: string, help: string, read: () => number): void {
    this.families.set(name, { type: "gauge", help, write: (out) => out.sample(name, "", read()) });
  }

  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.declare(name, "histogram", help, () => {
      const histogram = new Histogram(buckets);
      return { handle: histogram, write: (out: Exposition) => out.histogram(name, "", histogram) };
    });
  }

  histogramBy<V extends string>(name: string, help: string, buckets: readonly number[], label: string, values: readonly V[]): Record<V, Histogram> {
    return this.declare(name, "histogram", help, () => {
      const histograms = Object.fromEntries(values.map((value) => [value, new Histogram(buckets)])) as Record<V, Histogram>;
      return { handle: histograms, write: (out: Exposition) => values.forEach((value) => out.histogram(name, labels({ [label]: value }), histograms[value])) };
    });
  }

  family(name: string, type: "counter" | "gauge", help: string, write: (sample: (labels: string, value: number) => void) => void): void {
    this.families.set(name, { type, help, write: (out) => write((labels, value) => out.sample(name, labels, value)) });
  }

  /**
   * A family whose samples are written whole, their names included (a histogram's `_bucket`,
   * `_sum`, `_count`): series gathered from other processes (cluster/gather.ts). Gathered into a
   * family this process declared too, each sample is the sum of both.
   */
  gathered(
    name: string,
    type: "counter" | "gauge" | "histogram",
    help: string,
    write: (sample: (sampleName: string, labels: string, value: number) => void) => void,
  ): void {
    const own = this.families.get(name);
    if (own === undefined) {
      this.families.set(name, { type, help, write: (out) => write((sampleName, labels, value) => out.sample(sampleName, labels, value)) });
      return;
    }
    // This process counts the family too: each sample is its own value plus the gathered ones.
    this.families.set(name, {
      ...own,
      write: (out) => {
        const mine = new Exposition();
        own.write(mine, name);
        const sums = new Map<string, number>();
        for (const line of mine.text().split("\n")) {
          const match = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
          if (match) sums.set(`${match[1]}\u0000${match[2] ?? ""}`, Number(match[3]));
        }
        write((sampleName, labels, value) => {
          const key = `${sampleName}\u0000${labels}`;
          sums.set(key, (sums.get(key) ?? 0) + value);
        });
        for (const [key, value] of sums) {
          const at = key.indexOf("\u0000");
          out.sample(key.slice(0, at), key.slice(at + 1), value);
        }
      },
    });
  }

  /** The exposition: every declared family, in the order declared, then process_*. */
  render(): string {
    const out = new Exposition();
    for (const [name, family] of this.families) {
      out.family(name, family.type, family.help);
      family.write(out, name);
    }
    writeProcessMetrics(out);
    return out.text();
  }

  /**
   * A series' value as a scrape shows it, summed over the samples whose labels include `match`
   * (for tests and benches; a histogram's are `name_count`, `name_sum`). 0 when none.
   */
  value(name: string, match: Readonly<Record<string, string | number>> = {}): number {
    const wanted = Object.entries(match).map(([label, value]) => labels({ [label]: value }));
    let sum = 0;
    for (const line of this.render().split("\n")) {
      if (!line.startsWith(name) || (line[name.length] !== " " && line[name.length] !== "{")) continue;
      const space = line.lastIndexOf(" ");
      const labelText = line[name.length] === "{" ? line.slice(name.length + 1, line.lastIndexOf("}")) : "";
      if (wanted.every((pair) => labelText.split(",").includes(pair))) sum += Number(line.slice(space + 1));
    }
    return sum;
  }

  private declare<H>(name: string, type: Family["type"], help: string, make: () => { handle: H; write: Family["write"] }): H {
    const known = this.families.get(name);
    if (known?.handle !== undefined) {
      if (known.type !== type) throw new Error(`metric ${name} declared as a ${known.type} and a ${type}`);
      return known.handle as H;
    }
    const { handle, write } = make();
    this.families.set(name, { type, help, handle, write });
    return handle;
  }
}
