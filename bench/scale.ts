// The storage-and-search scale bench: what N realistic events cost on disk and how fast they are
// found again, next to the plain-file peers (the NDJSON itself, `zstd -3`, `grep -F`) measured in
// the same run over the same bytes. Storage v3 (sealed blocks, docs/storage-v3.md) is judged by
// these figures: database growth once everything is sealed, whether the sealer keeps up with a
// full-speed load and what it costs it, and the newest-100 read out of blocks.
//
//   npx bun bench/scale.ts [--events 2000000] [--order time|random] [--seal-interval-ms 60000]
//                          [--sources-split 90,9,1] [--senders 8] [--batch 1000]
//                          [--query-timeout-ms 5000] [--no-compare] [--keep] [--keep-sources]
//
// 1. Generates N distinct events from bench/corpus.ts (a 128-bit seeded generator per chunk of
//    1,000, so chunks never repeat; large events made rare) over the 24 h before the run started,
//    spread over the sources by the split, with planted needles (3 unique request ids, 40 events
//    with http.bytes=123457). `--order time` (default): event k at k/N of the day, give or take
//    JITTER_MS, and every source's pending request is sent each `--batch` lines of the stream, so a
//    request covers a short stretch of time (a day replayed as shippers send it). `--order random`:
//    dt uniformly random over the day (a backfill; the worst case for time skipping). Streamed to
//    bench/out/scale-<time>.ndjson, never held in memory (20,000,000 events is ~12 GB of file).
// 2. Unless --no-compare (or DATABASE_URL): loads the file into a logpond of its own whose sealer
//    never fires during the load (SEAL_INTERVAL_MS=600000): ingest without the sealer, and the
//    unsealed layout's growth. Then removes it.
// 3. Starts `bun src/main.ts` with SEAL_INTERVAL_MS=--seal-interval-ms on its own embedded
//    PostgreSQL in a temporary DATA_DIR (or on DATABASE_URL), creates the sources, sends the file
//    to `POST /` as JSON arrays from concurrent senders, samples the hot tier and the sealer's
//    statements while it loads, waits until every event is stored, then until log_hot is empty
//    (everything sealed), and measures the database's growth after a CHECKPOINT.
// 4. Reads through the query API (newest 100: median of 5, searches: median of 3, context around
//    20 random events of the dense and the sparse source: median and max, after a
//    warm-up), each search beside `grep -F`.
// 5. Prints a Markdown table and writes it to bench/out/scale-<time>.md. logpond is stopped, the
//    temporary directories and the NDJSON file are removed (the main run's kept with --keep), also
//    on error or Ctrl-C.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { realisticEvent } from "./corpus";
import { benchDir, cpuSeconds, fmt, progress } from "./lib";

// ---- options -------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback;
};
const EVENTS = Number(option("events", "2000000"));
const SPLIT = option("sources-split", "90,9,1").split(",").map(Number);
const SENDERS = Number(option("senders", "8"));
const BATCH = Number(option("batch", "1000"));
const KEEP = argv.includes("--keep");
const ORDER = option("order", "time");
/** The main run's SEAL_INTERVAL_MS; the service's default unless given. */
const SEAL_INTERVAL_MS = Number(option("seal-interval-ms", "60000"));
/** Runs the load without the sealer first, for the ratio (not on a shared DATABASE_URL). */
const COMPARE = !argv.includes("--no-compare") && !process.env.DATABASE_URL;
/** logpond's QUERY_TIMEOUT_MS; unset = its default (5 s). Raise it to see what a 503 read would have taken. */
const QUERY_TIMEOUT_MS = option("query-timeout-ms", process.env.QUERY_TIMEOUT_MS ?? "");
if (!Number.isInteger(EVENTS) || EVENTS < 1000) throw new Error("--events must be a whole number ≥ 1000");
if (SPLIT.length < 1 || SPLIT.some((p) => !(p > 0))) throw new Error("--sources-split must be positive numbers, e.g. 90,9,1");
if (!(SENDERS >= 1) || !(BATCH >= 1)) throw new Error("--senders and --batch must be ≥ 1");
if (ORDER !== "time" && ORDER !== "random") throw new Error("--order must be time or random");
if (!Number.isInteger(SEAL_INTERVAL_MS) || SEAL_INTERVAL_MS < 100 || SEAL_INTERVAL_MS > 600_000)
  throw new Error("--seal-interval-ms must be 100 to 600000 (config.ts's range)");

const ROOT = path.join(import.meta.dir, "..");
const OUT = path.join(import.meta.dir, "out");
const STAMP = new Date().toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");
const API_TOKEN = "scale-bench-token-0123456789abcdef";
const DAY_MS = 86_400_000;
/** Events per generator chunk: each chunk has its own seed, so any chunk can be rebuilt alone. */
const CHUNK = 1000;
/** corpus.ts makes one event in 1,600 a 50–200 KB dump; here one in LARGE_EVERY (~0.6 B/event on average). */
const LARGE_EVERY = 200_000;
const SEED = 0x5ca1e;
const NEEDLES = 3;
const RARE_NUMBER = 123457;
const RARE_COUNT = 40;
/** Reads are timed to their last byte; a 503 at QUERY_TIMEOUT_MS is a result, a hang is not. */
const READ_TIMEOUT_MS = 300_000;
/** `--order time`: how far an event's dt strays from its place in the day (± this, uniform). */
const JITTER_MS = 2_500;
/** SEAL_INTERVAL_MS of the run without the sealer: its first tick comes after any load shorter than this. */
const NO_SEAL_INTERVAL_MS = 600_000;
/** How often the sealer's statements are looked for in pg_stat_activity (its busy time is counted in these). */
const SAMPLE_MS = 250;
/** The newest-100 reads are timed this many times (median), the 24 h searches 3. */
const NEWEST_RUNS = 5;
const AUTH = { authorization: `Bearer ${API_TOKEN}` };

// ---- the corpus ----------------------------------------------------------------------------

type Rand = () => number;

/**
 * sfc32: 128 bits of state. corpus.ts's mulberry32 has 2^32 states in one cycle, and 20M events
 * draw ~2·10^9 numbers: chunks seeded with it would overlap and repeat events.
 */
function sfc32(a: number, b: number, c: number, d: number): Rand {
  const next = () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 16; i++) next(); // mixes the seed in
  return next;
}

/** murmur3's finaliser: a bijection of 32-bit integers that scatters neighbours. */
function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Cumulative shares of the split, ending at exactly 1. */
const CUMULATIVE = SPLIT.map((_, i) => SPLIT.slice(0, i + 1).reduce((a, b) => a + b, 0) / SPLIT.reduce((a, b) => a + b, 0));

/**
 * The source of event k, from k alone: the loader reads it back from the line number, so the
 * NDJSON file holds the events exactly as sent (no routing field added to them).
 */
function sourceOf(k: number): number {
  const u = fmix32((k + SEED) >>> 0) / 4294967296;
  const at = CUMULATIVE.findIndex((c) => u < c);
  return at < 0 ? CUMULATIVE.length - 1 : at;
}

interface Plan {
  /** Generation start: every dt lies in (t0 − 24 h, t0]. */
  t0: number;
  n: number;
  needles: string[];
  needleAt: Map<number, string>;
  rareAt: Set<number>;
}

/** Where the needles go: spread over the stream; their words are new each run (crypto), so reruns on one DATABASE_URL never find an old run's needle. */
function plan(n: number): Plan {
  const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");
  const needles = Array.from({ length: NEEDLES }, () => `req-needle-${hex(8)}`);
  const needleAt = new Map(needles.map((needle, i) => [Math.floor(((i + 0.37) * n) / NEEDLES), needle] as const));
  const rareAt = new Set<number>();
  for (let i = 0; i < RARE_COUNT; i++) {
    let k = Math.floor(((i + 0.61) * n) / RARE_COUNT);
    while (needleAt.has(k)) k++; // a needle's event is not also a rare number's
    rareAt.add(k);
  }
  return { t0: Date.now(), n, needles, needleAt, rareAt };
}

interface Access {
  message: string;
  request_id: string;
  http: { status: number; bytes: number };
}

/** Sets an access event's byte count, in its field and in its access-log line. */
function setBytes(event: Access, bytes: number): void {
  event.message = event.message.replace(`" ${event.http.status} ${event.http.bytes} "`, `" ${event.http.status} ${bytes} "`);
  event.http.bytes = bytes;
}

/** An access event (corpus.ts's nginx shape): drawn until one comes, for the planted fields. */
function accessEvent(r: Rand, dt: string): Access {
  for (;;) {
    const event = realisticEvent(r, dt, 0);
    if ("http" in event) return event as unknown as Access;
  }
}

/** Event k's time: its share of the day give or take JITTER_MS (time order), or anywhere in it (random). */
function eventTime(r: Rand, k: number, p: Plan): string {
  if (ORDER === "random") return new Date(p.t0 - Math.floor(r() * DAY_MS)).toISOString();
  const at = p.t0 - DAY_MS + Math.floor(((k + 0.5) * DAY_MS) / p.n) + Math.floor((r() - 0.5) * 2 * JITTER_MS);
  return new Date(Math.min(p.t0, Math.max(p.t0 - DAY_MS + 1, at))).toISOString();
}

/** Event k of the stream. Index 0 to realisticEvent: its "large" slot is index 7 of 1,600, used here only once in LARGE_EVERY. */
function scaleEvent(r: Rand, k: number, p: Plan): Record<string, unknown> {
  const dt = eventTime(r, k, p);
  const needle = p.needleAt.get(k);
  if (needle !== undefined) {
    const event = accessEvent(r, dt);
    event.request_id = needle;
    event.message = event.message.replace(/req-\S+$/, needle);
    return event as unknown as Record<string, unknown>;
  }
  if (p.rareAt.has(k)) {
    const event = accessEvent(r, dt);
    setBytes(event, RARE_NUMBER);
    return event as unknown as Record<string, unknown>;
  }
  const event = realisticEvent(r, dt, k % LARGE_EVERY === LARGE_EVERY / 2 ? 7 : 0);
  // The rare number stays rare: one in 250,001 access events would draw it by chance.
  const http = (event as unknown as Partial<Access>).http;
  if (http?.bytes === RARE_NUMBER) setBytes(event as unknown as Access, RARE_NUMBER + 1);
  return event;
}

interface Corpus {
  file: string;
  bytes: number;
  seconds: number;
  perSource: number[];
}

/** Writes the N events to `file` chunk by chunk (NDJSON, one event per line). */
async function writeCorpus(file: string, n: number, p: Plan): Promise<Corpus> {
  const started = performance.now();
  const sink = Bun.file(file).writer({ highWaterMark: 4 << 20 });
  const perSource = SPLIT.map(() => 0);
  for (let chunk = 0; chunk * CHUNK < n; chunk++) {
    const r = sfc32(SEED, chunk, fmix32(chunk ^ 0x9e3779b9), 0x51ed270b);
    const lines: string[] = [];
    for (let k = chunk * CHUNK; k < Math.min(n, (chunk + 1) * CHUNK); k++) {
      lines.push(JSON.stringify(scaleEvent(r, k, p)));
      perSource[sourceOf(k)]!++;
    }
    sink.write(`${lines.join("\n")}\n`);
    if (chunk % 100 === 99) await sink.flush();
    if (chunk % 2000 === 1999) progress(`generated ${fmt((chunk + 1) * CHUNK)} of ${fmt(n)} events`);
  }
  await sink.end();
  return { file, bytes: statSync(file).size, seconds: (performance.now() - started) / 1000, perSource };
}

// ---- logpond -------------------------------------------------------------------------------

interface Logpond {
  proc: ReturnType<typeof Bun.spawn>;
  apiUrl: string;
  ingestUrl: string;
  databaseUrl: string;
  dataDir: string;
  output: () => string;
}

/** `bun src/main.ts` as users run it, its banner parsed for the URLs (as test/helpers/service.ts does). */
async function startLogpond(dataDir: string, sealIntervalMs: number): Promise<Logpond> {
  const proc = Bun.spawn([process.execPath, path.join(ROOT, "src", "main.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      API_PORT: "0",
      INGEST_PORT: "0",
      EMBEDDED_PG_PORT: "0",
      API_TOKEN,
      // No sweep during the run: it would read the partitions being measured.
      RETENTION_SWEEP_INTERVAL_MS: String(DAY_MS),
      SEAL_INTERVAL_MS: String(sealIntervalMs),
      ...(QUERY_TIMEOUT_MS ? { QUERY_TIMEOUT_MS } : {}),
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const part of stream) output = (output + decoder.decode(part, { stream: true })).slice(-100_000);
  };
  void collect(proc.stdout as ReadableStream<Uint8Array>);
  void collect(proc.stderr as ReadableStream<Uint8Array>);
  const deadline = Date.now() + 120_000;
  while (!/acknowledgement/.test(output)) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`logpond did not start:\n${output}`);
    }
    await Bun.sleep(50);
  }
  const apiUrl = /management API\s+(http\S+)\/api\/v1\/sources/.exec(output)![1]!;
  const ingestUrl = /ingestion\s+(http\S+)\//.exec(output)![1]!;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    // The banner redacts the password; the embedded database keeps it in DATA_DIR/pg-password.
    const redacted = /database\s+embedded PostgreSQL \S+ at (postgres:\/\/\S+)/.exec(output)![1]!;
    const password = readFileSync(path.join(dataDir, "pg-password"), "utf8").trim();
    databaseUrl = redacted.replace(":***@", `:${encodeURIComponent(password)}@`);
  }
  return { proc, apiUrl, ingestUrl, databaseUrl, dataDir, output: () => output };
}

/** SIGTERM by PID (logpond drains, then stops its PostgreSQL); SIGKILL and the postmaster by its PID if it hangs. */
async function stopLogpond(logpond: Logpond): Promise<void> {
  logpond.proc.kill("SIGTERM");
  let timer: Timer | undefined;
  const exited = await Promise.race([
    logpond.proc.exited.then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 90_000))),
  ]);
  clearTimeout(timer); // a pending timer would keep the bench alive for 90 s after logpond stopped
  if (exited) return;
  progress("logpond did not stop within 90 s of SIGTERM: SIGKILL");
  logpond.proc.kill("SIGKILL");
  const pidFile = path.join(logpond.dataDir, "pg", "cluster", "postmaster.pid");
  if (!process.env.DATABASE_URL && existsSync(pidFile)) {
    const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
    try {
      process.kill(pid, "SIGINT"); // PostgreSQL's fast shutdown
      for (let i = 0; i < 400 && isAlive(pid); i++) await Bun.sleep(50);
    } catch {}
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface Source {
  id: number;
  token: string;
  name: string;
}

async function createSource(apiUrl: string, name: string): Promise<Source> {
  const response = await fetch(`${apiUrl}/api/v1/sources`, { method: "POST", headers: AUTH, body: JSON.stringify({ name }) });
  if (response.status !== 201) throw new Error(`create source: ${response.status} ${await response.text()}`);
  const { data } = (await response.json()) as { data: { id: string; attributes: { token: string } } };
  return { id: Number(data.id), token: data.attributes.token, name };
}

async function deleteSource(apiUrl: string, id: number): Promise<void> {
  await fetch(`${apiUrl}/api/v1/sources/${id}`, { method: "DELETE", headers: AUTH }).then((r) => r.arrayBuffer());
}

// ---- loading -------------------------------------------------------------------------------

/** One source's JSON array being built from NDJSON lines, without decoding them. */
class BodyBuilder {
  private buffer = new Uint8Array(2 << 20);
  private length = 1;
  events = 0;

  add(line: Uint8Array): void {
    const needed = this.length + line.length + 2;
    if (needed > this.buffer.length) {
      const bigger = new Uint8Array(Math.max(needed, this.buffer.length * 2));
      bigger.set(this.buffer.subarray(0, this.length));
      this.buffer = bigger;
    }
    this.buffer[0] = 0x5b; // [
    if (this.events > 0) this.buffer[this.length++] = 0x2c; // ,
    this.buffer.set(line, this.length);
    this.length += line.length;
    this.events++;
  }

  take(): Uint8Array {
    this.buffer[this.length++] = 0x5d; // ]
    const body = this.buffer.slice(0, this.length);
    this.length = 1;
    this.events = 0;
    return body;
  }
}

interface Body {
  source: number;
  events: number;
  body: Uint8Array;
}

/**
 * The file's lines as request bodies of at most `batch` events of one source each, read as they are
 * sent. In time order every source's pending body also goes each `batch` lines of the stream, so a
 * sparse source's request covers seconds of its day (as a shipper's flush interval), not hours.
 */
async function* requestBodies(file: string, batch: number): AsyncGenerator<Body> {
  const builders = SPLIT.map(() => new BodyBuilder());
  let k = 0;
  let rest: Uint8Array | undefined;
  for await (const chunk of Bun.file(file).stream()) {
    let data = chunk;
    if (rest) {
      data = new Uint8Array(rest.length + chunk.length);
      data.set(rest);
      data.set(chunk, rest.length);
    }
    let start = 0;
    for (let end = data.indexOf(10, start); end >= 0; end = data.indexOf(10, start)) {
      const source = sourceOf(k++);
      const builder = builders[source]!;
      builder.add(data.subarray(start, end));
      start = end + 1;
      if (builder.events >= batch) yield { source, events: builder.events, body: builder.take() };
      if (ORDER === "time" && k % batch === 0) {
        for (const [other, pending] of builders.entries()) {
          if (pending.events > 0) yield { source: other, events: pending.events, body: pending.take() };
        }
      }
    }
    rest = start < data.length ? data.slice(start) : undefined;
  }
  for (const [source, builder] of builders.entries()) {
    if (builder.events > 0) yield { source, events: builder.events, body: builder.take() };
  }
}

interface Load {
  seconds: number;
  requests: number;
  retries: number;
}

/** POSTs every body; a 503 (or 429) is resent, same body, after Retry-After, as a client does. */
async function load(ingestUrl: string, sources: Source[], file: string, total: number): Promise<Load> {
  const bodies = requestBodies(file, BATCH);
  let acked = 0;
  let requests = 0;
  let retries = 0;
  const started = performance.now();
  const ticker = setInterval(
    () =>
      progress(`load: ${fmt(acked)} of ${fmt(total)} events acknowledged, ${fmt(acked / ((performance.now() - started) / 1000))} events/s, ${retries} retries`),
    10_000,
  );
  const sender = async () => {
    // Concurrent next() calls on one async generator are queued: each body goes to one sender.
    for (let next = await bodies.next(); !next.done; next = await bodies.next()) {
      const { source, events, body } = next.value;
      const headers = { authorization: `Bearer ${sources[source]!.token}`, "content-type": "application/json" };
      for (;;) {
        // A network error is not retried: the request may have been accepted, and a resend
        // would store its events twice (the count check would then fail the run).
        const response = await fetch(`${ingestUrl}/`, { method: "POST", headers, body, signal: AbortSignal.timeout(120_000) });
        const text = await response.text();
        requests++;
        if (response.status === 202) break;
        if (response.status !== 503 && response.status !== 429) throw new Error(`ingest: ${response.status} ${text.slice(0, 300)}`);
        retries++;
        await Bun.sleep(1000 * Number(response.headers.get("retry-after") ?? 1));
      }
      acked += events;
    }
  };
  try {
    await Promise.all(Array.from({ length: SENDERS }, sender));
  } finally {
    clearInterval(ticker);
  }
  if (acked !== total) throw new Error(`acknowledged ${acked} events, sent ${total}`);
  return { seconds: (performance.now() - started) / 1000, requests, retries };
}

// ---- storage -------------------------------------------------------------------------------

/** The bench's events in both tiers, in one snapshot (one statement): a move between them counts once. */
async function stored(sql: postgres.Sql, sources: Source[]): Promise<number> {
  const ids = sources.map((s) => s.id);
  const rows = await sql`
    select (select count(*) from log_hot where source_id = any(${ids}::bigint[]))
      + (select coalesce(sum(n), 0) from log_blocks where source_id = any(${ids}::bigint[])) as n`;
  return Number(rows[0]!.n);
}

async function metrics(apiUrl: string): Promise<string> {
  return (await fetch(`${apiUrl}/metrics`)).text();
}

const counter = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)`, "m").exec(text)?.[1] ?? 0);

/**
 * Waits until logpond has committed all `n` events (its flushed count, cheap to poll) and returns
 * when it saw that (performance.now()), then checks that both tiers hold exactly `n`.
 */
async function waitForStored(sql: postgres.Sql, apiUrl: string, sources: Source[], n: number): Promise<number> {
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    const flushed = counter(await metrics(apiUrl), "logpond_flush_events_total");
    if (flushed !== last) [last, lastChange] = [flushed, Date.now()];
    if (flushed >= n) break;
    if (Date.now() - lastChange > 120_000) throw new Error(`storage stalled: ${flushed} of ${n} events flushed, no progress for 120 s`);
    await Bun.sleep(250);
  }
  const at = performance.now();
  const count = await stored(sql, sources);
  if (count !== n) throw new Error(`log_hot and log_blocks hold ${count} events of the bench's sources, ${n} were sent`);
  return at;
}

/** Rows in log_hot as PostgreSQL's statistics count them (live rows; current within a second or so). */
async function hotEstimate(sql: postgres.Sql): Promise<number> {
  const rows = await sql`select coalesce(sum(n_live_tup), 0)::bigint as n from pg_stat_user_tables where relname like 'log\\_hot\\_%'`;
  return Number(rows[0]!.n);
}

async function hotExact(sql: postgres.Sql): Promise<number> {
  return Number((await sql`select count(*)::bigint as n from log_hot`)[0]!.n);
}

interface Sample {
  /** performance.now() */
  at: number;
  /** A seal of the sealer was running (its transaction holds a hot table in SHARE mode). */
  sealing: boolean;
  /** An autovacuum worker was processing a log_hot partition (it holds a lock the sealer's drop waits for). */
  vacuuming: boolean;
  /** log_hot's live rows (statistics), every 8th sample. */
  hot?: number;
}

/**
 * Every SAMPLE_MS: is one of the sealer's seals running (a transaction holding a log_hot partition
 * in SHARE mode, store/sealer.ts)? Their count × SAMPLE_MS is the sealer's busy time; every 2 s
 * also log_hot's rows.
 */
function startSampler(sql: postgres.Sql): { samples: Sample[]; sealerCpu: () => number; stop: () => Promise<void> } {
  const samples: Sample[] = [];
  /** The backends seen running a move, with their CPU seconds when first seen. */
  const sealers = new Map<number, number>();
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const next = performance.now() + SAMPLE_MS;
      const [row] = await sql`
        select array(select distinct l.pid from pg_locks l join pg_class c on c.oid = l.relation
                     where l.mode = 'ShareLock' and l.granted and c.relname like 'log\_hot\_%') as sealing,
          exists (select 1 from pg_stat_activity where backend_type = 'autovacuum worker' and query like '%log\_hot\_%') as vacuuming`;
      const pids = row!.sealing as number[];
      for (const pid of pids) if (!sealers.has(pid)) sealers.set(pid, cpuSeconds(pid));
      const sample: Sample = { at: performance.now(), sealing: pids.length > 0, vacuuming: row!.vacuuming as boolean };
      if (i % 8 === 0) sample.hot = await hotEstimate(sql);
      samples.push(sample);
      await Bun.sleep(Math.max(0, next - performance.now()));
    }
  })();
  return {
    samples,
    /** CPU seconds the sealer's backends used since first seen moving (PostgreSQL's side of sealing). */
    sealerCpu: () => [...sealers].reduce((sum, [pid, first]) => sum + cpuSeconds(pid) - first, 0),
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

const busySeconds = (samples: Sample[], from: number, to: number, what: "sealing" | "vacuuming" = "sealing") =>
  (samples.filter((s) => s.at >= from && s.at <= to && s[what]).length * SAMPLE_MS) / 1000;

interface Cpu {
  /** logpond's process (all its threads). */
  logpond: number;
  /** Its descendants: the embedded PostgreSQL's postmaster, backends and workers (0 on DATABASE_URL). */
  postgres: number;
}

/**
 * CPU seconds (user + system, Linux /proc, USER_HZ = 100) of a process and of its descendants,
 * each with the CPU of its children already reaped (a backend that exited still counts).
 */
function treeCpu(root: number): Cpu {
  const procs = new Map<number, { parent: number; seconds: number }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      procs.set(Number(entry), { parent: Number(fields[1]), seconds: ticks / 100 });
    } catch {} // gone in between
  }
  const within = (pid: number): boolean => {
    for (let at = procs.get(pid)?.parent; at !== undefined && at > 1; at = procs.get(at)?.parent) if (at === root) return true;
    return false;
  };
  let postgres = 0;
  for (const [pid, proc] of procs) if (within(pid)) postgres += proc.seconds;
  return { logpond: procs.get(root)?.seconds ?? 0, postgres };
}

const cpuSince = (from: Cpu, to: Cpu): Cpu => ({ logpond: to.logpond - from.logpond, postgres: to.postgres - from.postgres });
/** µs per event: logpond + PostgreSQL = total. */
const cpuPerEvent = (cpu: Cpu, events: number) => {
  const us = (seconds: number) => fmt((seconds * 1e6) / Math.max(1, events), 1);
  return `logpond ${us(cpu.logpond)} + PostgreSQL ${us(cpu.postgres)} = ${us(cpu.logpond + cpu.postgres)} µs CPU/event`;
};
const cpuTotal = (cpu: Cpu) => cpu.logpond + cpu.postgres;

/**
 * Waits until the sealer's counters account for all `n` events (added when a pass ends, after its
 * last move); returns when (performance.now()) and the /metrics text. Never counts log_hot meanwhile:
 * a count holds its lock for seconds, and a sealer that cannot lock log_hot keeps emptied partitions.
 */
async function waitForSealed(apiUrl: string, n: number): Promise<{ at: number; text: string }> {
  const deadline = Date.now() + 2 * SEAL_INTERVAL_MS + 120_000 + n; // a tick, a pass, then ≥ 1,000 events/s
  for (;;) {
    const text = await metrics(apiUrl);
    const at = performance.now();
    if (counter(text, "logpond_sealer_events_sealed_total") + counter(text, "logpond_sealer_events_dropped_total") >= n) return { at, text };
    if (Date.now() > deadline)
      throw new Error(`sealing stalled: the sealer's counters show ${counter(text, "logpond_sealer_events_sealed_total")} of ${n} events sealed`);
    await Bun.sleep(250);
  }
}

/**
 * log_hot's partitions besides the open generation and the default one: 0 once every sealed
 * partition is dropped. Catalog only (a vacuum may have cut an emptied one to 0 bytes meanwhile).
 */
async function hotSealedPartitions(sql: postgres.Sql): Promise<number> {
  const rows = await sql`
    select count(*)::int - 1 as n from pg_partition_tree('log_hot') t join pg_class c on c.oid = t.relid
    where t.isleaf and c.relname like 'log\_hot\_g%'`;
  return rows[0]!.n as number;
}

/**
 * Waits until the sealer has dropped the partitions it emptied (its next pass retries a drop whose
 * lock was busy): performance.now() then, or undefined when they are still there after two ticks.
 */
async function waitForHotDropped(sql: postgres.Sql): Promise<number | undefined> {
  const deadline = Date.now() + 2 * SEAL_INTERVAL_MS + 60_000;
  while ((await hotSealedPartitions(sql)) > 0) {
    if (Date.now() > deadline) return undefined;
    await Bun.sleep(500);
  }
  return performance.now();
}

async function databaseSize(sql: postgres.Sql): Promise<number> {
  return Number((await sql`select pg_database_size(current_database())::bigint as b`)[0]!.b);
}

async function walPosition(sql: postgres.Sql): Promise<string> {
  return (await sql`select pg_current_wal_lsn()::text as l`)[0]!.l as string;
}

async function walBytesSince(sql: postgres.Sql, from: string): Promise<number> {
  return Number((await sql`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from}::pg_lsn)::bigint as b`)[0]!.b);
}

interface TierSize {
  /** pg_table_size without TOAST: main fork, free space map, visibility map. */
  heap: number;
  /** The TOAST table and its index. */
  toast: number;
  indexes: number;
  partitions: number;
}

/** One tier's leaf partitions (log_hot or log_blocks). */
async function tierSize(sql: postgres.Sql, tier: "log_hot" | "log_blocks"): Promise<TierSize> {
  const [row] = await sql`
    select coalesce(sum(pg_table_size(c.oid) - coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)), 0)::bigint as heap,
      coalesce(sum(coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)), 0)::bigint as toast,
      coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint as indexes, count(*)::int as partitions
    from pg_partition_tree(${tier}::regclass) t join pg_class c on c.oid = t.relid where t.isleaf`;
  return { heap: Number(row!.heap), toast: Number(row!.toast), indexes: Number(row!.indexes), partitions: row!.partitions as number };
}

const tierTotal = (t: TierSize) => t.heap + t.toast + t.indexes;

/** The blocks' columns as stored (pg_column_size: compressed, without reading TOAST) and their number. */
async function blockColumns(sql: postgres.Sql, sources: Source[]): Promise<{ blocks: number; body: number; ids: number; dts: number }> {
  const [row] = await sql`
    select count(*)::bigint as blocks, coalesce(sum(pg_column_size(body)), 0)::bigint as body,
      coalesce(sum(pg_column_size(ids)), 0)::bigint as ids, coalesce(sum(pg_column_size(dts)), 0)::bigint as dts
    from log_blocks where source_id = any(${sources.map((s) => s.id)}::bigint[])`;
  return { blocks: Number(row!.blocks), body: Number(row!.body), ids: Number(row!.ids), dts: Number(row!.dts) };
}

// ---- peers ---------------------------------------------------------------------------------

async function run(command: string[]): Promise<{ ms: number; code: number; stdout: string }> {
  const started = performance.now();
  const proc = Bun.spawn(command, { stdout: "pipe", stderr: "inherit" });
  const stdout = await new Response(proc.stdout as ReadableStream).text();
  const code = await proc.exited;
  return { ms: performance.now() - started, code, stdout };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

interface Grep {
  ms: number;
  count: number;
}

/** `grep -F -c [flags] text file`: one run to warm the page cache, then the median of 3. */
async function grep(file: string, text: string, flags: string[] = []): Promise<Grep> {
  const once = async () => {
    const result = await run(["grep", "-F", ...flags, "-c", "--", text, file]);
    if (result.code > 1) throw new Error(`grep exited with ${result.code}`);
    return { ms: result.ms, count: Number(result.stdout.trim()) };
  };
  await once();
  const runs = [await once(), await once(), await once()];
  return { ms: median(runs.map((r) => r.ms)), count: runs[0]!.count };
}

/** `zstd -3` of the file (one thread, as the CLI defaults): compressed size and time. */
async function zstd(file: string): Promise<{ bytes: number; seconds: number } | string> {
  if ((await run(["sh", "-c", "command -v zstd"])).code !== 0) return "zstd not found: apt-get install zstd";
  const target = `${file}.zst`;
  try {
    const result = await run(["zstd", "-3", "-q", "-f", "-o", target, file]);
    if (result.code !== 0) return `zstd exited with ${result.code}`;
    return { bytes: statSync(target).size, seconds: result.ms / 1000 };
  } finally {
    rmSync(target, { force: true });
  }
}

// ---- reads ---------------------------------------------------------------------------------

interface ReadSpec {
  name: string;
  sources: Source[];
  query?: string;
  from?: string;
  /** The same search over the NDJSON file, for the ratio. */
  grep?: string;
  /** Timed runs after the warm-up (the median is shown). */
  runs: number;
  /** GET /api/v2/query/histogram with this many buckets instead of a page (rows: buckets counted). */
  buckets?: number;
}

interface ReadResult {
  spec: ReadSpec;
  status: string;
  ms: number;
  rows: number;
  grep?: Grep;
}

async function timedRead(url: string): Promise<{ status: number | string; ms: number; rows: number }> {
  const started = performance.now();
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, { headers: AUTH, signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
    text = await response.text();
  } catch (error) {
    // logpond closing the connection of a long read (its HTTP idle timeout) is a result too.
    return { status: (error as { code?: string }).code ?? "error", ms: performance.now() - started, rows: 0 };
  }
  const ms = performance.now() - started;
  if (response.status === 200) {
    // A histogram counted in part (QUERY_TIMEOUT_MS ran out): "200 partial", rows = buckets counted.
    const body = JSON.parse(text) as { data: { count?: number | null }[]; meta?: { complete?: boolean } };
    const rows = body.data.filter((row) => row.count !== null).length;
    return { status: body.meta?.complete === false ? "200 partial" : 200, ms, rows };
  }
  if (response.status !== 503) throw new Error(`${url}: ${response.status} ${text.slice(0, 300)}`);
  return { status: 503, ms, rows: 0 };
}

/** One warm-up, then the median of `runs`; the statuses of the runs (a 503 at QUERY_TIMEOUT_MS is a figure). */
async function measureRead(apiUrl: string, spec: ReadSpec): Promise<ReadResult> {
  const params = new URLSearchParams({ source_ids: spec.sources.map((s) => s.id).join(",") });
  if (spec.buckets) params.set("buckets", String(spec.buckets));
  else params.set("batch", "100");
  if (spec.query) params.set("query", spec.query);
  if (spec.from) params.set("from", spec.from);
  const url = `${apiUrl}/api/v2/query/${spec.buckets ? "histogram" : "live-tail"}?${params}`;
  await timedRead(url);
  const runs: Awaited<ReturnType<typeof timedRead>>[] = [];
  for (let i = 0; i < spec.runs; i++) runs.push(await timedRead(url));
  const kinds = [...new Set(runs.map((r) => r.status))];
  const statuses = kinds.length === 1 ? String(kinds[0]) : kinds.map((k) => `${k} ×${runs.filter((r) => r.status === k).length}`).join(", ");
  const answered = runs.filter((r) => r.status === 200 || r.status === "200 partial");
  const result = { spec, status: statuses, ms: median(runs.map((r) => r.ms)), rows: answered.length ? answered[answered.length - 1]!.rows : 0 };
  progress(`read ${spec.name}: ${statuses}, ${fmt(result.ms, 1)} ms, ${result.rows} rows`);
  return result;
}

function readSpecs(sources: Source[], p: Plan): ReadSpec[] {
  const dense = sources[SPLIT.indexOf(Math.max(...SPLIT))]!;
  const sparse = sources[SPLIT.lastIndexOf(Math.min(...SPLIT))]!;
  // The whole day of events, whenever the reads run: dts lie in (t0 − 24 h, t0].
  const from = new Date(p.t0 - DAY_MS - 1000).toISOString();
  const needle = p.needles[0]!;
  const part = needle.slice("req-needle-".length + 4, "req-needle-".length + 12);
  const absent = `req-absent-${Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex")}`;
  const search = 3;
  return [
    { name: `newest 100, dense source (${dense.name}), default window`, sources: [dense], runs: NEWEST_RUNS },
    { name: `newest 100, sparse source (${sparse.name}), default window`, sources: [sparse], runs: NEWEST_RUNS },
    { name: `newest 100, dense source, 24 h window`, sources: [dense], from, runs: NEWEST_RUNS },
    { name: `newest 100, sparse source, 24 h window`, sources: [sparse], from, runs: NEWEST_RUNS },
    { name: "needle, bare word", sources, from, query: needle, grep: needle, runs: search },
    { name: "needle, field:value", sources, from, query: `request_id:${needle}`, grep: needle, runs: search },
    { name: "needle, field=value", sources, from, query: `request_id=${needle}`, grep: needle, runs: search },
    { name: "word matching nothing", sources, from, query: absent, grep: absent, runs: search },
    { name: "part of a word (8 hex inside the needle)", sources, from, query: part, grep: part, runs: search },
    { name: "rare number", sources, from, query: `http.bytes=${RARE_NUMBER}`, grep: `"bytes":${RARE_NUMBER}`, runs: search },
    { name: "frequent word, first page", sources, from, query: "timeout", grep: "timeout", runs: search },
    { name: "histogram of 24 h, 96 buckets", sources, from, buckets: 96, runs: search },
    { name: "histogram of 24 h, 96 buckets, with a query", sources, from, query: "timeout", grep: "timeout", buckets: 96, runs: search },
  ];
}

/** Context reads are timed around this many random events of a source (after one warm-up). */
const CONTEXT_ANCHORS = 20;

/**
 * GET /api/v2/query/context (before=after=50) around random stored events of one source, each asked
 * with the row's dt and with its id only: the median and the slowest of each, and what was answered.
 */
async function measureContext(apiUrl: string, sql: postgres.Sql, source: Source): Promise<string> {
  const anchors = await sql<{ id: string; dt: string }[]>`
    select id::text as id, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt
    from (select id, dt from log_hot where source_id = ${source.id}
      union all select u.id, u.dt from log_blocks b cross join lateral unnest(b.ids, b.dts) as u(id, dt) where b.source_id = ${source.id}) e
    order by random() limit ${CONTEXT_ANCHORS + 1}`;
  const times: Record<"dt" | "id", number[]> = { dt: [], id: [] };
  const rows: number[] = [];
  for (const [i, anchor] of anchors.entries()) {
    for (const variant of ["dt", "id"] as const) {
      const params = new URLSearchParams({ source_id: String(source.id), id: anchor.id, ...(variant === "dt" ? { dt: anchor.dt } : {}) });
      const started = performance.now();
      const response = await fetch(`${apiUrl}/api/v2/query/context?${params}`, { headers: AUTH, signal: AbortSignal.timeout(READ_TIMEOUT_MS) });
      const text = await response.text();
      const ms = performance.now() - started;
      if (response.status !== 200) throw new Error(`context around ${anchor.id}: ${response.status} ${text.slice(0, 300)}`);
      if (i === 0) continue; // the warm-up
      times[variant].push(ms);
      rows.push((JSON.parse(text) as { data: unknown[] }).data.length);
    }
  }
  const summary = (ms: number[]) => `median ${fmt(median(ms), 1)} ms, max ${fmt(Math.max(...ms), 1)} ms`;
  return `${summary(times.dt)} / ${summary(times.id)} (${Math.min(...rows)}–${Math.max(...rows)} rows)`;
}

// ---- report --------------------------------------------------------------------------------

const bytes = (n: number) => (n >= 1 << 30 ? `${fmt(n / (1 << 30), 2)} GiB` : `${fmt(n / (1 << 20), 1)} MiB`);

function markdown(header: string, figures: [string, string][], reads: ReadResult[], from: string): string {
  const lines = [header, "", "| figure | value |", "|---|---|", ...figures.map(([k, v]) => `| ${k} | ${v} |`), ""];
  lines.push(
    `Reads: query API, batch=100, after 1 warm-up the median of ${NEWEST_RUNS} (newest 100) or 3 (searches) (QUERY_TIMEOUT_MS ${QUERY_TIMEOUT_MS || "5000, the default"}; rows: of the last run that answered); default window: the last 30 minutes; 24 h window and searches: all sources from ${from} to now. grep: \`grep -F -c\` over the NDJSON file, median of 3 after 1 warm-up.`,
    "",
  );
  lines.push("| read | query | status | ms | rows | grep -F -c | grep ms | logpond ÷ grep |", "|---|---|---|---:|---:|---:|---:|---:|");
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

// ---- main ----------------------------------------------------------------------------------

const cleanups: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | undefined;
/** Set by Ctrl-C / SIGTERM: what main() throws while the cleanup pulls things from under it is noise. */
let interrupted = false;

/** Runs the cleanups once, newest first, each whatever the others did. */
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) await step().catch((error) => console.error(`cleanup: ${(error as Error).message}`));
  })();
  return cleaning;
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    interrupted = true;
    progress(`${signal}: cleaning up`);
    await cleanUp();
    process.exit(130);
  });
}

interface Service {
  logpond: Logpond;
  sql: postgres.Sql;
  sources: Source[];
  /** Stops logpond, removes its folder unless kept; safe to call again from the cleanups. */
  stop: () => Promise<void>;
}

/** A logpond of its own (temporary DATA_DIR, embedded PostgreSQL unless DATABASE_URL) and the sources. */
async function startService(sealIntervalMs: number, keep: boolean): Promise<Service> {
  const work = benchDir("logpond-bench-scale-");
  const remove = async () => rmSync(work, { recursive: true, force: true });
  if (!keep) cleanups.push(remove);
  progress(
    `starting logpond, SEAL_INTERVAL_MS=${sealIntervalMs} (DATA_DIR ${work}/data${process.env.DATABASE_URL ? ", DATABASE_URL" : ", embedded PostgreSQL"})`,
  );
  const logpond = await startLogpond(path.join(work, "data"), sealIntervalMs);
  cleanups.push(() => stopLogpond(logpond));
  const sql = postgres(logpond.databaseUrl, { max: 4, onnotice: () => {} });
  const end = () => sql.end({ timeout: 5 });
  cleanups.push(end);
  const sources: Source[] = [];
  for (const [i, share] of SPLIT.entries()) sources.push(await createSource(logpond.apiUrl, `scale ${STAMP} ${i + 1} (${share}%)`));
  // On a shared DATABASE_URL the events go with their sources (purged in the background).
  if (process.env.DATABASE_URL && !keep)
    cleanups.push(async () => {
      if (!argv.includes("--keep-sources")) for (const s of sources) await deleteSource(logpond.apiUrl, s.id);
    });
  const stop = async () => {
    await end();
    await stopLogpond(logpond);
    if (!keep) await remove();
  };
  return { logpond, sql, sources, stop };
}

interface Ingest extends Load {
  /** From the first request until logpond had committed the last event. */
  storedSeconds: number;
  /** logpond's and PostgreSQL's CPU from the first request to the last commit. */
  cpu: Cpu;
  /** Their CPU counters when the first request went (to measure what follows the load). */
  cpuAtStart: Cpu;
  /** performance.now() of the first request and of the last commit seen. */
  startedAt: number;
  storedAt: number;
}

/** Sends the file and waits until every event is committed (and counted in the two tiers). */
async function ingest(service: Service, file: string): Promise<Ingest> {
  progress(`loading: ${SENDERS} senders, ${BATCH} events per request at most, ${ORDER} order`);
  const pid = service.logpond.proc.pid;
  const cpuBefore = treeCpu(pid);
  const startedAt = performance.now();
  const loaded = await load(service.logpond.ingestUrl, service.sources, file, EVENTS);
  const storedAt = await waitForStored(service.sql, service.logpond.apiUrl, service.sources, EVENTS);
  return { ...loaded, storedSeconds: (storedAt - startedAt) / 1000, cpu: cpuSince(cpuBefore, treeCpu(pid)), cpuAtStart: cpuBefore, startedAt, storedAt };
}

const rate = (load: Ingest) =>
  `${fmt(EVENTS / load.storedSeconds)} events/s stored (${fmt(load.storedSeconds, 1)} s from the first request to the last commit; acknowledged ${fmt(EVENTS / load.seconds)} events/s; ${fmt(load.requests)} requests incl. ${fmt(load.retries)} resent after 503/429); ${cpuPerEvent(load.cpu, EVENTS)}`;

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, `scale-${STAMP}.ndjson`);
  const cpu = cpus();
  const commit = (await run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])).stdout.trim();
  const header = `## logpond scale bench, ${fmt(EVENTS)} events, ${ORDER} order — ${new Date().toISOString().slice(0, 16)}Z, ${cpu.length} × ${cpu[0]?.model ?? "cpu"}, ${fmt(totalmem() / (1 << 30), 0)} GiB RAM, Bun ${Bun.version}, commit ${commit} (+ working tree), load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`;
  console.log(header);
  const figures: [string, string][] = [];
  const say = (name: string, value: string) => {
    figures.push([name, value]);
    progress(`${name}: ${value}`);
  };

  // 1. The corpus, to the file.
  const p = plan(EVENTS);
  if (!KEEP) cleanups.push(async () => rmSync(file, { force: true }));
  progress(`generating ${fmt(EVENTS)} events to ${path.relative(ROOT, file)}`);
  const corpus = await writeCorpus(file, EVENTS, p);
  const spread =
    ORDER === "time"
      ? `dt in stream order over the 24 h before ${new Date(p.t0).toISOString().slice(0, 19)}Z (± ${JITTER_MS / 1000} s), every source's pending request sent each ${fmt(BATCH)} lines`
      : `dt uniformly random over the 24 h before ${new Date(p.t0).toISOString().slice(0, 19)}Z`;
  say("events", `${fmt(EVENTS)} over ${SPLIT.length} sources (${corpus.perSource.map((n) => fmt(n)).join(" / ")}; split ${SPLIT.join("/")}), ${spread}`);
  say("NDJSON bytes/event", `${fmt(corpus.bytes / EVENTS, 1)} (file ${bytes(corpus.bytes)}, generated in ${fmt(corpus.seconds, 1)} s)`);

  // 2. The same load without the sealer, on a logpond of its own.
  let without: Ingest | undefined;
  if (COMPARE) {
    const service = await startService(NO_SEAL_INTERVAL_MS, false);
    await service.sql`checkpoint`;
    const before = await databaseSize(service.sql);
    without = await ingest(service, file);
    await service.sql`checkpoint`;
    const growth = (await databaseSize(service.sql)) - before;
    const hot = await tierSize(service.sql, "log_hot");
    say(`ingest without the sealer (SEAL_INTERVAL_MS=${NO_SEAL_INTERVAL_MS}, its own logpond)`, rate(without));
    say(
      "database growth bytes/event, unsealed (that run)",
      `${fmt(growth / EVENTS, 1)} (log_hot: heap ${fmt(hot.heap / EVENTS, 1)}, TOAST ${fmt(hot.toast / EVENTS, 1)}, indexes ${fmt(hot.indexes / EVENTS, 2)})`,
    );
    await service.stop();
  }

  // 3. The measured run: load with the sealer, wait until everything is sealed.
  const service = await startService(SEAL_INTERVAL_MS, KEEP);
  const { sql, sources, logpond } = service;
  await sql`checkpoint`;
  const sizeBefore = await databaseSize(sql);
  const blocksBefore = await tierSize(sql, "log_blocks");
  const hotBefore = await tierSize(sql, "log_hot");
  const walBefore = await walPosition(sql);
  const sampler = startSampler(sql);
  cleanups.push(sampler.stop);
  const loaded = await ingest(service, file);
  const hotAtStored = await hotExact(sql);
  say(`ingest with the sealer (SEAL_INTERVAL_MS=${SEAL_INTERVAL_MS})`, rate(loaded));
  if (without)
    say(
      "ingest with ÷ without the sealer",
      `**${fmt(without.storedSeconds / loaded.storedSeconds, 2)}** (events/s stored; acknowledged: ${fmt(without.seconds / loaded.seconds, 2)})`,
    );
  const cpuAtStored = treeCpu(logpond.proc.pid);
  const { at: sealedAt, text: sealer } = await waitForSealed(logpond.apiUrl, EVENTS);
  const cpuAtSealed = treeCpu(logpond.proc.pid);
  const sealerCpu = sampler.sealerCpu();
  const droppedAt = await waitForHotDropped(sql);
  await sampler.stop();
  const hotLeft = await hotExact(sql);
  if (hotLeft !== 0) throw new Error(`the sealer's counters show every event sealed, but log_hot holds ${hotLeft} rows`);
  const afterDrops = await metrics(logpond.apiUrl);
  const samples = sampler.samples;
  const during = samples.filter((s) => s.at <= loaded.storedAt);
  const hotPeak = Math.max(0, ...during.map((s) => s.hot ?? 0));
  const loadBusy = busySeconds(samples, loaded.startedAt, loaded.storedAt);
  const timeline = during
    .filter((s) => s.hot !== undefined && s.at >= loaded.startedAt)
    .filter((_, i, all) => i % Math.max(1, Math.round(all.length / 12)) === 0);
  say(
    "hot tier during the load",
    `peak ${fmt(hotPeak)} rows (statistics, every 2 s), ${fmt(hotAtStored)} at the last commit (exact); sealer's seals running ${fmt((100 * loadBusy) / loaded.storedSeconds, 0)} % of the load's time; rows at ${timeline.map((s) => `${fmt((s.at - loaded.startedAt) / 1000, 0)} s: ${fmt(s.hot!)}`).join(", ")}`,
  );
  const firstMove = samples.find((s) => s.at > loaded.storedAt && s.sealing);
  const drainBusy = busySeconds(samples, loaded.storedAt, sealedAt);
  const drainCpu = cpuSince(cpuAtStored, cpuAtSealed);
  say(
    "sealing after the load",
    `everything sealed ${fmt((sealedAt - loaded.storedAt) / 1000, 1)} s after the last commit (${fmt(hotAtStored)} rows hot then; the first move ${firstMove ? `${fmt((firstMove.at - loaded.storedAt) / 1000, 1)} s after it, at the next tick or when the running pass reached them` : "not seen"}); moves running ${fmt(drainBusy, 1)} s${drainBusy > 0 ? ` = ${fmt(hotAtStored / drainBusy)} events/s` : ""}; ${cpuPerEvent(drainCpu, hotAtStored)} moved; hot partitions dropped ${droppedAt === undefined ? `**not yet ${fmt((2 * SEAL_INTERVAL_MS) / 1000 + 60, 0)} s after that** (their pages stay until a pass gets log_hot's lock)` : `${fmt((droppedAt - sealedAt) / 1000, 1)} s after that`}; autovacuum on a log_hot partition ${fmt(busySeconds(samples, loaded.storedAt, droppedAt ?? Infinity, "vacuuming"), 1)} s of that time (${fmt(busySeconds(samples, 0, Infinity, "vacuuming"), 1)} s in the whole run)`,
  );
  const sealed = counter(sealer, "logpond_sealer_events_sealed_total");
  const totalBusy = busySeconds(samples, 0, Infinity);
  const columns = await blockColumns(sql, sources);
  say(
    "sealer, whole run",
    `${fmt(sealed)} events sealed (${fmt(counter(sealer, "logpond_sealer_events_dropped_total"))} dropped) into ${fmt(columns.blocks)} blocks (${fmt(sealed / Math.max(1, columns.blocks), 0)} events per block), ${fmt(counter(afterDrops, "logpond_sealer_partitions_dropped_total"))} hot partitions dropped; seals running ${fmt(totalBusy, 1)} s${totalBusy > 0 ? ` = **${fmt(sealed / totalBusy)} events/s** while sealing` : ""} (sampled every ${SAMPLE_MS} ms in pg_stat_activity)`,
  );
  const wholeCpu = cpuSince(loaded.cpuAtStart, cpuAtSealed);
  say(
    "CPU, load + sealing (this run)",
    `${cpuPerEvent(wholeCpu, EVENTS)}, from the first request until log_hot was empty; of it the sealer's backend(s) running the moves ${fmt((sealerCpu * 1e6) / EVENTS, 1)} µs/event (${fmt(EVENTS / Math.max(0.01, sealerCpu))} events per CPU-second)`,
  );
  if (without) {
    const extra = cpuTotal(wholeCpu) - cpuTotal(without.cpu);
    say(
      "sealing's CPU ÷ ingest's CPU",
      `**${fmt(extra / cpuTotal(without.cpu), 2)}** (this run's CPU per event − the run without the sealer's = ${fmt((extra * 1e6) / EVENTS, 1)} µs per event, ÷ ${fmt((cpuTotal(without.cpu) * 1e6) / EVENTS, 1)}; on a CPU-bound box, ingest that seals as fast as it loads runs at ~1 ÷ (1 + this) of its unsealed rate)`,
    );
  }
  if (sealed !== EVENTS) throw new Error(`the sealer sealed ${sealed} events, ${EVENTS} were sent`);

  // 4. Sizes, everything sealed.
  await sql`checkpoint`;
  const growth = (await databaseSize(sql)) - sizeBefore;
  const wal = await walBytesSince(sql, walBefore);
  const blocks = await tierSize(sql, "log_blocks");
  const hot = await tierSize(sql, "log_hot");
  const blocksGrowth = tierTotal(blocks) - tierTotal(blocksBefore);
  const hotGrowth = tierTotal(hot) - tierTotal(hotBefore);
  const perEvent = (n: number) => fmt(n / EVENTS, 1);
  say(
    "database growth bytes/event",
    `**${perEvent(growth)}** (pg_database_size after − before = ${bytes(growth)}, everything sealed, after CHECKPOINT, no VACUUM) = ${fmt(growth / corpus.bytes, 3)} × NDJSON`,
  );
  say(
    "log_blocks bytes/event",
    `${perEvent(blocksGrowth)}: heap ${perEvent(blocks.heap - blocksBefore.heap)}, TOAST ${perEvent(blocks.toast - blocksBefore.toast)}, indexes ${fmt((blocks.indexes - blocksBefore.indexes) / EVENTS, 2)} (${blocks.partitions} partitions${process.env.DATABASE_URL ? "; whole table, other sources included" : ""})`,
  );
  say(
    "block columns bytes/event (pg_column_size, as stored)",
    `body ${perEvent(columns.body)}, ids ${perEvent(columns.ids)}, dts ${perEvent(columns.dts)}; the rest of a block row ${perEvent(blocks.heap + blocks.toast - blocksBefore.heap - blocksBefore.toast - columns.body - columns.ids - columns.dts)} (tuple headers, TOAST chunk overhead, free space)`,
  );
  say(
    "log_hot and the rest bytes/event",
    `log_hot ${perEvent(hotGrowth)} (${hot.partitions} partitions left), everything else ${perEvent(growth - blocksGrowth - hotGrowth)} (catalog, flush_batches, free space maps)`,
  );
  say("WAL bytes/event", `${perEvent(wal)} (${bytes(wal)} written during the load and the sealing)`);

  // 5. Reads, before the peers: the default 30-minute window should still hold the newest events.
  const specs = readSpecs(sources, p);
  say("newest event's age at the first read", `${fmt((Date.now() - p.t0) / 60_000, 1)} min`);
  const reads: ReadResult[] = [];
  for (const spec of specs) reads.push(await measureRead(logpond.apiUrl, spec));
  for (const [label, source] of [
    ["dense", sources[SPLIT.indexOf(Math.max(...SPLIT))]!],
    ["sparse", sources[SPLIT.lastIndexOf(Math.min(...SPLIT))]!],
  ] as const) {
    const context = await measureContext(logpond.apiUrl, sql, source);
    say(`context ±50 around ${CONTEXT_ANCHORS} random events, ${label} source: with dt / id only`, context);
  }

  // 6. Peers over the same file.
  const z = await zstd(file);
  if (typeof z === "string") say("zstd -3", z);
  else
    say(
      "zstd -3 bytes/event",
      `${fmt(z.bytes / EVENTS, 1)} (${bytes(z.bytes)}, ${fmt(z.seconds, 1)} s = ${fmt(corpus.bytes / (1 << 20) / z.seconds, 0)} MiB/s, one thread); database growth ÷ zstd = ${fmt(growth / z.bytes, 2)}`,
    );
  const needle = p.needles[0]!;
  const plain = await grep(file, needle);
  const folded = await grep(file, needle, ["-i"]);
  say("grep -F -c needle", `${fmt(plain.ms, 1)} ms (${plain.count} line), ${fmt(corpus.bytes / (1 << 20) / (plain.ms / 1000), 0)} MiB/s`);
  say("grep -F -i -c needle", `${fmt(folded.ms, 1)} ms (${folded.count} line)`);
  const greps = new Map<string, Grep>([[needle, plain]]);
  for (const read of reads) {
    const text = read.spec.grep;
    if (text === undefined) continue;
    if (!greps.has(text)) greps.set(text, await grep(file, text));
    read.grep = greps.get(text);
  }

  // 7. Report. The machine may be shared: the load average at the end tells how much.
  say(
    "load average at the end",
    loadavg()
      .map((l) => l.toFixed(2))
      .join(" "),
  );
  const from = specs.find((s) => s.from)!.from!;
  const report = markdown(header, figures, reads, from);
  console.log(`\n${report}`);
  const reportFile = path.join(OUT, `scale-${STAMP}.md`);
  writeFileSync(reportFile, report);
  progress(
    `report written to ${path.relative(ROOT, reportFile)}${KEEP ? `; kept ${path.relative(ROOT, file)} and the main run's DATA_DIR (${logpond.dataDir})` : ""}`,
  );
}

try {
  await main();
} catch (error) {
  if (!interrupted) console.error(error);
  process.exitCode = 1;
} finally {
  await cleanUp();
}
