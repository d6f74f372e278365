// The diagnostic probe: one service under wrk -c64 with one payload, looked at one way per mode —
// the evidence behind hot-path and flusher changes. Every mode starts the same way: an embedded
// PostgreSQL in a temporary folder, `bun src/main.ts` on it, one source, wrk's files for the payload.
//   bun bench/probe.ts cpu-split [payload=json-100] [corpus=realistic] [seconds=10] [--paused] [--pre=<payload>]
//   bun bench/probe.ts perf      [payload=json-1] [corpus=realistic] [--paused]      (apt-get install linux-perf)
//   bun bench/probe.ts profile   [payload=json-1] [corpus=realistic] [seconds=6] [--paused]
//   bun bench/probe.ts timeline  [payload=logtail-gzip-msgpack-1000] [corpus=realistic] [seconds=8] [--quiet]
// --paused: the source is paused (events decoded, validated and dropped: no ring, no COPY), which
// isolates the request path from the flusher's and PostgreSQL's share of the machine.
// LP_ENV='{"FLUSH_STREAMS":"4"}': the service's settings, to try one in any mode.
// The service and PostgreSQL are stopped by their handles and the folder removed at the end; only
// `profile` leaves a folder behind, the one holding its profiles.
import { readdirSync, readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import { createSource, SERVICE_API_TOKEN, spawnService, type Service } from "../test/helpers/service";
import { benchDir, benchPostgres, metricSum } from "./lib";
import { CORPORA, payload, SCENARIO_FORMATS, type Corpus, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles, type WrkResult } from "./wrk";

interface Args {
  name: PayloadName;
  corpus: Corpus;
  seconds: number;
  paused: boolean;
  /** What a mode reads of the command line beyond the shared arguments (e.g. `--pre=`). */
  argv: string[];
}

interface Probe {
  work: string;
  service: Service;
  /** Runs wrk -c64 with the payload (or another one) for `seconds`. */
  load(seconds: number, other?: PayloadName): Promise<WrkResult>;
  /** Stops the service (SIGTERM: it drains and exits); once, however often it is called. */
  stopService(): Promise<void>;
  /** Stops the service and PostgreSQL and removes the folder. */
  stop(): Promise<void>;
}

async function startProbe(mode: string, args: Args, command?: string[]): Promise<Probe> {
  const wrk = findWrk(() => {});
  if (!wrk.path) throw new Error(wrk.note);
  const work = benchDir(`logpond-${mode}-`);
  const pg = await benchPostgres(work);
  const tried = JSON.parse(process.env.LP_ENV ?? "{}") as Record<string, string>;
  const service = await spawnService({ DATABASE_URL: pg.url, DATA_DIR: path.join(work, "data"), ...tried }, { command });
  let stopped: Promise<void> | undefined;
  const stopService = () =>
    (stopped ??= (async () => {
      await service.stop();
    })());
  const stop = async () => {
    await stopService();
    await pg.stop();
    rmSync(work, { recursive: true, force: true });
  };
  try {
    const source = await createSource(service, "probe");
    if (args.paused) {
      const response = await fetch(`${service.apiUrl}/api/v1/sources/${source.id}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` },
        body: JSON.stringify({ ingesting_paused: true }),
      });
      if (!response.ok) throw new Error(`pause: ${response.status} ${await response.text()}`);
    }
    const load = (seconds: number, other?: PayloadName) => {
      const used = payload(other ?? args.name, args.corpus);
      const dir = writeWrkFiles(path.join(work, `wrk-${other ?? args.name}`), used, [source.token]);
      return runWrk(wrk.path!, `${service.ingestUrl}/`, dir, used.bodies.length, seconds);
    };
    return { work, service, load, stopService, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

const metric = async (service: Service, key: string) => metricSum(await (await fetch(`${service.apiUrl}/metrics`)).text(), key)!;

/**
 * CPU seconds so far of each process (or thread) under `dir` (/proc, /proc/<pid>/task), summed by
 * the key `keyOf` gives its id and name.
 */
function cpuUnder(dir: string, keyOf: (id: number, comm: string) => string): Map<string, number> {
  const seconds = new Map<string, number>();
  for (const id of readdirSync(dir)) {
    if (!/^\d+$/.test(id)) continue;
    try {
      const stat = readFileSync(`${dir}/${id}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const key = keyOf(Number(id), comm);
      seconds.set(key, (seconds.get(key) ?? 0) + (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {} // it ended while it was read
  }
  return seconds;
}

/** What was spent between two readings, largest first, leaving out what is below 0.05 s. */
const spent = (before: Map<string, number>, after: Map<string, number>) =>
  [...after]
    .map(([key, total]) => [key, total - (before.get(key) ?? 0)] as const)
    .filter(([, s]) => s > 0.05)
    .sort((x, y) => y[1] - x[1]);

/**
 * Where the box's CPU goes during the load — logpond, PostgreSQL's processes, the kernel's
 * writeback — per event, and the end-to-end rate (accepted events until the last is committed).
 * --pre=<payload>: 5 s of another payload first, on the same service (the full bench runs every
 * scenario on one service). A 3 s warm-up precedes the measured run. How binary COPY's end-to-end
 * figures in docs/storage.md were taken.
 */
async function cpuSplit(probe: Probe, { name, corpus, seconds, paused, argv }: Args) {
  const { service } = probe;
  const pre = argv.find((a) => a.startsWith("--pre="))?.slice(6) as PayloadName | undefined;
  const cpuByProcess = () => cpuUnder("/proc", (pid, comm) => (pid === service.proc.pid ? "logpond" : comm.startsWith("postgres") ? "postgres" : comm));
  const cpuByThread = () => cpuUnder(`/proc/${service.proc.pid}/task`, (tid, comm) => (tid === service.proc.pid ? "main" : comm));
  const received = () => metric(service, "logpond_ingest_events_received_total");
  const drained = async () => {
    const total = await received();
    while (!paused && (await metric(service, "logpond_flush_events_total")) < total) await Bun.sleep(20);
  };
  if (pre) {
    await probe.load(5, pre);
    await drained();
    console.log(
      `pre: ${pre} for 5 s, drained; RSS now ${Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${service.proc.pid}/status`, "utf8"))![1]) / 1024)} MiB`,
    );
  }
  await probe.load(3); // warm-up
  await drained();
  const before = cpuByProcess();
  const threadsBefore = cpuByThread();
  const receivedBefore = await received();
  const started = performance.now();
  const run = await probe.load(seconds);
  await drained();
  const endToEnd = (performance.now() - started) / 1000;
  const events = (await received()) - receivedBefore;
  const used = spent(before, cpuByProcess());
  const threads = spent(threadsBefore, cpuByThread());
  console.log(
    `${name} ${corpus}${paused ? " (paused)" : ""}: ${(run.requests / run.seconds).toFixed(0)} req/s sent, ${events} events accepted; end to end (drain included, ${endToEnd.toFixed(1)} s): ${(events / endToEnd).toFixed(0)} events/s`,
  );
  for (const [key, s] of used)
    console.log(`  ${key.padEnd(16)} ${s.toFixed(2)} s  ${((s / endToEnd) * 100).toFixed(0)}% of a core  ${((s * 1e6) / events).toFixed(2)} µs/event`);
  console.log(`  logpond's threads: ${threads.map(([key, s]) => `${key} ${((s * 1e6) / events).toFixed(2)}`).join(", ")} µs/event`);
}

/**
 * Linux perf's split of the service process's CPU by where the code lives — Bun's native code,
 * the kernel, JIT-compiled JavaScript (logpond's own code and the libraries') — 5 s recorded
 * inside 8 s of load, after a 3 s warm-up. Bun's binary has no symbols, so native time is not
 * split further.
 */
async function perf(probe: Probe) {
  await probe.load(3); // warm-up
  const load = probe.load(8);
  await Bun.sleep(1000);
  const data = path.join(probe.work, "perf.data");
  await Bun.spawn(["perf", "record", "-F", "2000", "-g", "-p", String(probe.service.proc.pid), "-o", data, "--", "sleep", "5"], {
    stdout: "ignore",
    stderr: "ignore",
  }).exited;
  await load;
  const report = Bun.spawn(["sh", "-c", `perf report -i ${data} --no-children --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep '%'`], {
    stdout: "pipe",
  });
  console.log(await new Response(report.stdout as ReadableStream).text());
}

/**
 * A CPU profile of the service (`bun --cpu-prof --cpu-prof-md`, 250 µs sampling) under the load;
 * the profile is written when the service exits on SIGTERM. Prints where the .cpuprofile and its
 * markdown summary are (open the first in Chrome DevTools → Performance).
 */
async function profile(probe: Probe, { name, corpus, seconds }: Args, profiles: string) {
  const r = await probe.load(seconds);
  console.log(
    `${name} (${corpus}): ${Math.round((r.statuses["202"] ?? 0) / r.seconds)} req/s acknowledged, statuses ${JSON.stringify(r.statuses)}, p99 ${r.p99} ms`,
  );
  await probe.stopService();
  for (const file of readdirSync(profiles)) console.log(path.join(profiles, file));
}

/**
 * What the flusher commits while wrk loads the service, every 250 ms, then the end-to-end rate.
 * How the flusher's stall under load was seen: with the flush connections on the main thread,
 * nothing was committed for the first 3.5 s of 1000-event @logtail/node bodies (store/flush-thread.ts).
 * --quiet: the last line only.
 */
async function timeline(probe: Probe, { name, corpus, seconds, argv }: Args) {
  const quiet = argv.includes("--quiet");
  const counts = async () => {
    const text = await (await fetch(`${probe.service.apiUrl}/metrics`)).text();
    const value = (key: string) => metricSum(text, key) ?? NaN;
    return { received: value("logpond_ingest_events_received_total"), flushed: value("logpond_flush_events_total"), buffered: value("logpond_buffer_events") };
  };
  const started = performance.now();
  const elapsed = () => ((performance.now() - started) / 1000).toFixed(2);
  let loaded = false;
  const load = probe.load(seconds).finally(() => (loaded = true));
  let last = await counts();
  if (!quiet) console.log("seconds  accepted  committed  buffered");
  while (!loaded || last.buffered > 0) {
    await Bun.sleep(250);
    const now = await counts();
    if (!quiet)
      console.log(
        `${elapsed().padStart(7)}  ${String(now.received - last.received).padStart(8)}  ${String(now.flushed - last.flushed).padStart(9)}  ${String(now.buffered).padStart(8)}`,
      );
    last = now;
  }
  const run = await load;
  const total = (performance.now() - started) / 1000;
  console.log(
    `${name} ${corpus}: ${last.received} events accepted, all committed at ${elapsed()} s: ${Math.round(last.received / total)} events/s end to end; ${run.statuses["202"] ?? 0} × 202, ${run.statuses["503"] ?? 0} × 503 seen by wrk`,
  );
}

/** Each mode's default payload and seconds (perf times itself), and what it does. */
const MODES = {
  "cpu-split": {
    payload: "json-100",
    seconds: 10,
    about: "CPU per event by process (logpond, PostgreSQL, kernel writeback) and by logpond's threads, end to end",
  },
  perf: { payload: "json-1", seconds: 0, about: "Linux perf: the service's CPU in Bun's native code, the kernel, JIT-compiled JS" },
  profile: { payload: "json-1", seconds: 6, about: "a .cpuprofile (and its markdown summary) of the service under wrk" },
  timeline: { payload: "logtail-gzip-msgpack-1000", seconds: 8, about: "accepted / committed / buffered every 250 ms under wrk, then events/s end to end" },
} as const satisfies Record<string, { payload: PayloadName; seconds: number; about: string }>;
type Mode = keyof typeof MODES;

function usage(problem?: string): never {
  if (problem) console.error(`bench/probe.ts: ${problem}\n`);
  const lines = readFileSync(import.meta.path, "utf8").split("\n");
  console.error(
    lines
      .slice(
        0,
        lines.findIndex((l) => !l.startsWith("//")),
      )
      .map((l) => l.slice(3))
      .join("\n"),
  ); // this file's opening comment
  console.error(
    `\nmodes:\n${Object.entries(MODES)
      .map(([m, d]) => `  ${m.padEnd(10)} ${d.about}`)
      .join("\n")}`,
  );
  console.error(`payloads: ${SCENARIO_FORMATS.join(", ")}; corpora: ${CORPORA.join(", ")}`);
  process.exit(2);
}

const [mode, ...rest] = process.argv.slice(2);
if (!mode || !(mode in MODES)) usage(mode ? `no mode "${mode}"` : undefined);
const defaults = MODES[mode as Mode];
const [name = defaults.payload, corpus = "realistic", seconds = String(defaults.seconds)] = rest.filter((a) => !a.startsWith("--"));
if (!(SCENARIO_FORMATS as readonly string[]).includes(name)) usage(`no payload "${name}"`);
if (!(CORPORA as readonly string[]).includes(corpus)) usage(`no corpus "${corpus}"`);
const args: Args = { name: name as PayloadName, corpus: corpus as Corpus, seconds: Number(seconds), paused: rest.includes("--paused"), argv: rest };

// The profiles outlive the probe's folder, which holds PostgreSQL's cluster and is removed.
const profiles = mode === "profile" ? benchDir("logpond-profile-") : "";
const command =
  mode === "profile"
    ? [
        process.execPath,
        "--cpu-prof",
        "--cpu-prof-md",
        "--cpu-prof-interval=250",
        `--cpu-prof-dir=${profiles}`,
        path.join(import.meta.dir, "..", "src", "main.ts"),
      ]
    : undefined;
const probe = await startProbe(mode!, args, command);
try {
  if (mode === "cpu-split") await cpuSplit(probe, args);
  else if (mode === "perf") await perf(probe);
  else if (mode === "profile") await profile(probe, args, profiles);
  else await timeline(probe, args);
} finally {
  await probe.stop();
}
