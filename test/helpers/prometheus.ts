// A strict reader of the Prometheus text exposition format (0.0.4) for tests: it throws, naming
// the line, on anything Prometheus would refuse or misread — a malformed name, label or value, a
// bad escape, HELP or TYPE twice or after the family's samples, a family's samples split up, a
// sample that belongs to no declared family, a series twice, a histogram whose buckets are not
// cumulative or whose +Inf bucket is not its _count. promtool is not needed to run the suite.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const VALUE = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);
const SUFFIXES: Record<string, string[]> = { histogram: ["_bucket", "_sum", "_count"], summary: ["", "_sum", "_count"] };

export function parseExposition(text: string): Map<string, Family> {
  if (!text.endsWith("\n")) throw new Error("the exposition must end with a line feed");
  const families = new Map<string, Family>();
  const closed = new Set<string>(); // families whose samples have ended
  const series = new Set<string>();
  let current: Family | undefined;
  const lines = text.slice(0, -1).split("\n");
  lines.forEach((line, index) => {
    const fail = (why: string): never => {
      throw new Error(`line ${index + 1}: ${why}: ${JSON.stringify(line)}`);
    };
    if (line.startsWith("#")) {
      const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!meta) return; // a plain comment
      const [, kind, name, rest] = meta as unknown as [string, "HELP" | "TYPE", string, string];
      if (!METRIC_NAME.test(name)) fail("bad metric name");
      if (closed.has(name) || (families.get(name)?.samples.length ?? 0) > 0) fail(`${kind} after the family's samples`);
      const family = families.get(name) ?? { name, type: "untyped", help: "", samples: [] };
      families.set(name, family);
      if (kind === "HELP") {
        if (family.help !== "") fail("HELP twice");
        if (/\\[^\\n]|\\$/.test(rest.replace(/\\\\/g, ""))) fail("bad escape in HELP");
        family.help = rest.replace(/\\(\\|n)/g, (_, c: string) => (c === "n" ? "\n" : "\\"));
      } else {
        if ((family as Family & { typed?: true }).typed) fail("TYPE twice");
        if (!TYPES.has(rest)) fail("unknown type");
        family.type = rest;
        (family as Family & { typed?: true }).typed = true;
      }
      if (current && current.name !== name) closed.add(current.name);
      current = family;
      return;
    }
    if (line === "") fail("empty line");
    const sample = parseSample(line, fail);
    const family = familyOf(sample.name, families) ?? fail("sample of no declared family");
    if (closed.has(family.name)) fail(`samples of ${family.name} are split up`);
    if (current && current !== family) closed.add(current.name);
    current = family;
    const key = `${sample.name}{${Object.entries(sample.labels)
      .sort()
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(",")}}`;
    if (series.has(key)) fail("series twice");
    series.add(key);
    family.samples.push(sample);
  });
  for (const family of families.values()) if (family.type === "histogram") checkHistogram(family);
  return families;
}

function parseSample(line: string, fail: (why: string) => never): Sample {
  const name = /^[^{\s]+/.exec(line)?.[0] ?? fail("no metric name");
  if (!METRIC_NAME.test(name)) fail("bad metric name");
  let at = name.length;
  const labels: Record<string, string> = {};
  if (line[at] === "{") {
    at++;
    while (line[at] !== "}") {
      const labelName = /^[^=]*/.exec(line.slice(at))![0];
      if (!LABEL_NAME.test(labelName) || labelName.startsWith("__")) fail(`bad label name ${labelName}`);
      if (labelName in labels) fail(`label ${labelName} twice`);
      at += labelName.length;
      if (line[at] !== "=" || line[at + 1] !== '"') fail('label without ="');
      at += 2;
      let value = "";
      for (;;) {
        const c = line[at++] ?? fail("unterminated label value");
        if (c === '"') break;
        if (c === "\\") {
          const next = line[at++];
          if (next === "\\" || next === '"') value += next;
          else if (next === "n") value += "\n";
          else fail("bad escape in a label value");
        } else value += c;
      }
      labels[labelName] = value;
      if (line[at] === ",") at++;
      else if (line[at] !== "}") fail("labels not separated by a comma");
    }
    at++;
  }
  const rest = line.slice(at);
  const parts = /^ (\S+)(?: (-?\d+))?$/.exec(rest) ?? fail("no value, or more than value and timestamp");
  if (!VALUE.test(parts[1]!)) fail("bad value");
  const text = parts[1]!;
  const value = text.endsWith("Inf") ? (text.startsWith("-") ? -Infinity : Infinity) : Number(text);
  return { name, labels, value };
}

function familyOf(sampleName: string, families: Map<string, Family>): Family | undefined {
  const own = families.get(sampleName);
  if (own && !SUFFIXES[own.type]) return own;
  if (own && SUFFIXES[own.type]!.includes("")) return own;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!sampleName.endsWith(suffix)) continue;
    const family = families.get(sampleName.slice(0, -suffix.length));
    if (family && SUFFIXES[family.type]?.includes(suffix)) return family;
  }
  return undefined;
}

function checkHistogram(family: Family): void {
  const groups = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>();
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const group = groups.get(key) ?? { buckets: [] };
    groups.set(key, group);
    if (sample.name.endsWith("_bucket")) {
      if (le === undefined) throw new Error(`${family.name}: a bucket without le`);
      group.buckets.push([le === "+Inf" ? Infinity : Number(le), sample.value]);
    } else if (sample.name.endsWith("_sum")) group.sum = sample.value;
    else group.count = sample.value;
  }
  for (const [key, group] of groups) {
    const where = `${family.name}${key}`;
    if (group.sum === undefined || group.count === undefined) throw new Error(`${where}: no _sum or _count`);
    const { buckets } = group;
    if (buckets.length === 0 || buckets.at(-1)![0] !== Infinity) throw new Error(`${where}: no +Inf bucket last`);
    for (let i = 1; i < buckets.length; i++) {
      if (!(buckets[i]![0] > buckets[i - 1]![0])) throw new Error(`${where}: le not increasing`);
      if (buckets[i]![1] < buckets[i - 1]![1]) throw new Error(`${where}: buckets not cumulative`);
    }
    if (buckets.at(-1)![1] !== group.count) throw new Error(`${where}: +Inf bucket ${buckets.at(-1)![1]} is not _count ${group.count}`);
  }
}

/** The value of the one sample named `name` whose labels include `labels`; undefined if none. */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples(families, name, labels);
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${found.length} samples`);
  return found[0]?.value;
}

/** Every sample named `name` whose labels include `labels`. */
export function samples(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): Sample[] {
  const out: Sample[] = [];
  for (const family of families.values()) {
    for (const sample of family.samples) {
      if (sample.name === name && Object.entries(labels).every(([k, v]) => sample.labels[k] === v)) out.push(sample);
    }
  }
  return out;
}
