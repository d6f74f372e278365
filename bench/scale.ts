// The storage-and-search scale bench: what N realistic events cost on disk and how fast they are
// found again, next to the plain-file peers (the NDJSON itself, `zstd -3`, `grep -F`) measured in
// the same run over the same bytes. Storage v3 (sealed blocks, docs/storage-v3.md) is judged by
// these figures: database growth once everything is sealed, whether the sealer keeps up with a
// full-speed load and what it costs it, and the newest-100 read out of blocks.
//
//   npx bun bench/scale.ts [--events 2000000] [--order time|random] [--seal-interval-ms 60000]
//                          [--sources-split 90,9,1] [--senders 8] [--batch 1000]
//                          [--query-timeout-ms 5000] [--no-compare] [--keep] [--keep-sources]
//                          [--sustain RATE SECONDS]
//   INGEST_WORKERS=4 npx bun bench/scale.ts …   (logpond's settings pass through from the environment;
//                                                bench/workers.ts compares worker counts)
//
// 1. Generates N distinct events from bench/corpus.ts (a 128-bit seeded generator per chunk of
//    1,000, so chunks never repeat; large events made rare) over the 24 h before the run started,
//    spread over the sources by the split, with planted needles (3 unique request ids, 40 events
//    with http.bytes=123457). `--order time` (default): event k at k/N of the day, give or take
//    JITTER_MS, and every source's pending request is sent each `--batch` lines of the stream, so a
//    request covers a short stretch of time (a day replayed as shippers send it). `--order random`:
//    dt uniformly random over the day (a backfill; the worst case for time skipping). Streamed to
//    bench/out/scale-<time>.ndjson, never held in memory (20,000,000 events is ~12 GB of file).
// 2. Unless --no-compare (or DATABASE_URL, or --sustain): loads the file into a logpond of its own whose sealer
//    never fires during the load (SEAL_INTERVAL_MS=600000): ingest without the sealer, and the
//    unsealed layout's growth. Then removes it.
// 3. Starts `bun src/main.ts` with SEAL_INTERVAL_MS=--seal-interval-ms on its own embedded
//    PostgreSQL in a temporary DATA_DIR (or on DATABASE_URL), creates the sources, sends the file
//    to `POST /` as JSON arrays from concurrent senders (with --sustain: RATE × SECONDS events,
//    each request sent when its events are due at RATE), samples the hot tier, the sealer's
//    statements and the backlog (committed, not yet in blocks: scale/backlog.ts) while it loads,
//    waits until every event is stored, then until log_hot is empty (everything sealed), and
//    measures the total CPU per event kept (logpond + PostgreSQL, /proc), the WAL written and the
//    database's growth after a CHECKPOINT. --sustain also says whether the backlog stayed bounded
//    (its trend over the load's second half).
// 4. Reads through the query API (newest 100: median of 5, searches: median of 3, context around
//    20 random events of the dense and the sparse source: median and max, after a
//    warm-up), each search beside `grep -F`.
// 5. Prints a Markdown table and writes it to bench/out/scale-<time>.md. logpond is stopped, the
//    temporary directories and the NDJSON file are removed (the main run's kept with --keep), also
//    on error or Ctrl-C.
//
// The parts, in bench/scale/: options.ts (the flags), corpus.ts (1 and the request bodies),
// service.ts (logpond through test/helpers/service.ts, the sources, the clean-ups), load.ts (the
// senders), storage.ts (tiers, the sealer's progress, sizes, WAL), backlog.ts, reads.ts (4 and
// the peers), report.ts (5). This file runs them in order and words the figures.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import * as path from "node:path";
import { cpuPerEvent, cpuSince, cpuTotal, fmt, postmasterPid, progress, threadCpu, treeCpu, type Cpu } from "./lib";
import { JITTER_MS, type Plan, plan, writeCorpus } from "./scale/corpus";
import { type Load, load } from "./scale/load";
import { NO_SEAL_INTERVAL_MS, readOptions } from "./scale/options";
import { CONTEXT_ANCHORS, denseAndSparse, type Grep, grep, measureContext, measureRead, type ReadResult, readSpecs, run, zstd } from "./scale/reads";
import { BOUNDED_SHARE, floors, startBacklog, timeline as backlogTimeline, trend } from "./scale/backlog";
import { bytes, markdown } from "./scale/report";
import { Cleanups, type ScaleService, startScaleService } from "./scale/service";
import {
  blockColumns,
  busySeconds,
  counter,
  databaseSize,
  hotExact,
  metrics,
  SAMPLE_MS,
  startSampler,
  tierSize,
  sumSizes,
  tierTotal,
  waitForHotDropped,
  waitForMerges,
  waitForSealed,
  waitForStored,
  databaseNow,
  walBreakdown,
  walBytesSince,
  walFullPages,
  walPosition,
} from "./scale/storage";

const OPTIONS = readOptions();
const { events: EVENTS, split: SPLIT, senders: SENDERS, batch: BATCH, keep: KEEP, order: ORDER, queryTimeoutMs: QUERY_TIMEOUT_MS } = OPTIONS;
const SEAL_INTERVAL_MS = OPTIONS.sealIntervalMs;
const SUSTAIN = OPTIONS.sustain;
const ROOT = path.join(import.meta.dir, "..");
const OUT = path.join(import.meta.dir, "out");
const STAMP = new Date().toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");

const cleanups = new Cleanups();
/** Set by Ctrl-C / SIGTERM: what main() throws while the cleanup pulls things from under it is noise. */
let interrupted = false;

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    interrupted = true;
    progress(`${signal}: cleaning up`);
    await cleanups.run();
    process.exit(130);
  });
}

/** A logpond of the bench's, and the CPU of it and of its PostgreSQL (read from /proc). */
interface Measured extends ScaleService {
  cpu: () => Cpu;
}

async function startService(sealIntervalMs: number, keep: boolean): Promise<Measured> {
  const service = await startScaleService({ ...OPTIONS, sealIntervalMs, keep, label: STAMP }, cleanups);
  // On DATABASE_URL PostgreSQL is not logpond's child: its postmaster, when it runs here.
  const postmaster = process.env.DATABASE_URL ? await postmasterPid(service.sql) : undefined;
  return { ...service, cpu: () => treeCpu(service.logpond.proc.pid, postmaster) };
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
async function ingest(service: Measured, file: string, p: Plan): Promise<Ingest> {
  progress(
    `loading: ${SENDERS} senders, ${BATCH} events per request at most, ${ORDER} order${SUSTAIN ? `, ${fmt(SUSTAIN.rate)} events/s for ${SUSTAIN.seconds} s` : ""}`,
  );
  const since = await databaseNow(service.sql);
  const cpuBefore = service.cpu();
  const startedAt = performance.now();
  const loaded = await load(service.logpond.ingestUrl, service.sources, file, p, { ...OPTIONS, rate: SUSTAIN?.rate });
  const storedAt = await waitForStored(service.sql, service.sources, EVENTS, since);
  return { ...loaded, storedSeconds: (storedAt - startedAt) / 1000, cpu: cpuSince(cpuBefore, service.cpu()), cpuAtStart: cpuBefore, startedAt, storedAt };
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
  const p = plan(EVENTS, SPLIT, ORDER);
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
  if (OPTIONS.compare) {
    const service = await startService(NO_SEAL_INTERVAL_MS, false);
    await service.sql`checkpoint`;
    const before = await databaseSize(service.sql);
    without = await ingest(service, file, p);
    await service.sql`checkpoint`;
    const growth = (await databaseSize(service.sql)) - before;
    const hot = sumSizes(await tierSize(service.sql, "log_hot"), await tierSize(service.sql, "log_chunks"));
    say(`ingest without the sealer (SEAL_INTERVAL_MS=${NO_SEAL_INTERVAL_MS}, its own logpond)`, rate(without));
    say(
      "database growth bytes/event, unsealed (that run)",
      `${fmt(growth / EVENTS, 1)} (log_hot and log_chunks: heap ${fmt(hot.heap / EVENTS, 1)}, TOAST ${fmt(hot.toast / EVENTS, 1)}, indexes ${fmt(hot.indexes / EVENTS, 2)})`,
    );
    await service.stop();
  }

  // 3. The measured run: load with the sealer, wait until everything is sealed.
  const service = await startService(SEAL_INTERVAL_MS, KEEP);
  const { sql, sources, logpond } = service;
  await sql`checkpoint`;
  const sizeBefore = await databaseSize(sql);
  const blocksBefore = await tierSize(sql, "log_blocks");
  const hotBefore = sumSizes(await tierSize(sql, "log_hot"), await tierSize(sql, "log_chunks"));
  const filtersBefore = await tierSize(sql, "log_filters");
  const keyOrdersBefore = await tierSize(sql, "log_key_orders");
  const walBefore = await walPosition(sql);
  const fullPagesBefore = await walFullPages(sql);
  const sampler = startSampler(sql);
  cleanups.push(sampler.stop);
  const backlog = startBacklog(sql, logpond.apiUrl, sources);
  cleanups.push(backlog.stop);
  const loaded = await ingest(service, file, p);
  const hotAtStored = await hotExact(sql);
  say(`ingest with the sealer (SEAL_INTERVAL_MS=${SEAL_INTERVAL_MS})`, rate(loaded));
  if (without)
    say(
      "ingest with ÷ without the sealer",
      `**${fmt(without.storedSeconds / loaded.storedSeconds, 2)}** (events/s stored; acknowledged: ${fmt(without.seconds / loaded.seconds, 2)})`,
    );
  const cpuAtStored = service.cpu();
  const { at: sealedAt, text: sealer } = await waitForSealed(logpond.apiUrl, EVENTS, SEAL_INTERVAL_MS);
  const cpuAtSealed = service.cpu();
  const sealerCpu = sampler.sealerCpu();
  const droppedAt = await waitForHotDropped(sql, SEAL_INTERVAL_MS);
  await sampler.stop();
  await backlog.stop();
  const hotLeft = await hotExact(sql);
  if (hotLeft !== 0) throw new Error(`the sealer's counters show every event sealed, but the hot tier holds ${hotLeft} events`);
  // Then until the merges have nothing left to do: what they rewrite is part of keeping the events.
  if (OPTIONS.mergeIntervalMs > 0)
    progress(`waiting for the merges to settle (MERGE_INTERVAL_MS=${OPTIONS.mergeIntervalMs}, at most ${fmt(OPTIONS.mergeWaitMs / 1000, 0)} s)`);
  const merges = OPTIONS.mergeIntervalMs > 0 ? await waitForMerges(logpond.apiUrl, OPTIONS.mergeWaitMs) : undefined;
  const cpuAtMerged = service.cpu();
  const threadsAtMerged = threadCpu(logpond.proc.pid);
  const mergedAt = performance.now();
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
  const backlogPeak = backlog.samples.reduce((peak, s) => (s.rows > peak.rows ? s : peak), { at: loaded.startedAt, rows: 0 });
  say(
    "backlog over time (committed, not yet in blocks)",
    `peak ${fmt(backlogPeak.rows)} events ${fmt((backlogPeak.at - loaded.startedAt) / 1000, 0)} s after the first request; ${fmt(hotAtStored)} at the last commit (${fmt(loaded.storedSeconds, 0)} s), 0 at ${fmt((sealedAt - loaded.startedAt) / 1000, 0)} s; every second: logpond's flushed count − the sources' events in log_blocks; ${backlogTimeline(backlog.samples, loaded.startedAt, sealedAt)}`,
  );
  if (SUSTAIN) {
    // The load's second half, while the senders were still sending: a bounded backlog has no trend there.
    const loadEnd = loaded.startedAt + loaded.seconds * 1000;
    const half = trend(backlog.samples, (loaded.startedAt + loadEnd) / 2, loadEnd);
    const reached = EVENTS / loaded.seconds;
    const intervals = (loaded.seconds / 2) * (1000 / SEAL_INTERVAL_MS);
    const verdict = !half ? "not enough samples" : half.slope <= BOUNDED_SHARE * SUSTAIN.rate ? "**bounded**" : "**growing**";
    const lows = floors(backlog.samples, loaded.startedAt, loadEnd).map((n) => (n === undefined ? "—" : fmt(n)));
    say(
      `sustained load, ${fmt(SUSTAIN.rate)} events/s for ${SUSTAIN.seconds} s`,
      `${verdict}: over the load's last half the backlog ${half ? `went ${fmt(half.first)} → ${fmt(half.last)} (peak ${fmt(half.peak)}), a trend of ${fmt(half.slope)} events/s (least squares over ${half.samples} samples; bounded: ≤ ${fmt(BOUNDED_SHARE * 100, 0)} % of the rate)` : "could not be fitted"}; its lowest in each quarter of the load ${lows.join(" / ")}; sent ${fmt(reached)} events/s (${fmt((100 * reached) / SUSTAIN.rate, 0)} % of the rate${reached < 0.95 * SUSTAIN.rate ? ": **logpond did not take the load at this rate**" : ""}, ${fmt(loaded.retries)} resent after 503/429)${intervals < 2 ? `; the half spans ${fmt(intervals, 1)} SEAL_INTERVAL_MS only: its trend is the sawtooth's (use a --seal-interval-ms of SECONDS × 250 or less)` : ""}`,
    );
  }
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
    `${fmt(sealed)} events sealed (${fmt(counter(sealer, "logpond_sealer_events_dropped_total"))} dropped) into ${fmt(columns.blocks)} blocks (${fmt(sealed / Math.max(1, columns.blocks), 0)} events per block), ${fmt(counter(sealer, "logpond_sealer_events_from_memory_total"))} of them built from the flusher's commits (none read back), ${fmt(counter(afterDrops, "logpond_sealer_partitions_dropped_total"))} hot partitions dropped; seals running ${fmt(totalBusy, 1)} s${totalBusy > 0 ? ` = **${fmt(sealed / totalBusy)} events/s** while sealing` : ""} (sampled every ${SAMPLE_MS} ms in pg_stat_activity)`,
  );
  const wholeCpu = cpuSince(loaded.cpuAtStart, cpuAtSealed);
  say(
    "total CPU per event kept (load + sealing, this run)",
    `**${fmt((cpuTotal(wholeCpu) * 1e6) / EVENTS, 1)} µs**: ${cpuPerEvent(wholeCpu, EVENTS)}, from the first request until log_hot was empty (PostgreSQL: ${process.env.DATABASE_URL ? "the postmaster's tree on this machine, other clients' work included" : "the embedded postmaster and its backends, those that exited included"}); of it the sealer's backend(s) running the moves ${fmt((sealerCpu * 1e6) / EVENTS, 1)} µs/event (${fmt(EVENTS / Math.max(0.01, sealerCpu))} events per CPU-second)`,
  );
  const settledCpu = cpuSince(loaded.cpuAtStart, cpuAtMerged);
  say(
    "merges after the seal",
    merges === undefined
      ? "none (MERGE_INTERVAL_MS=0)"
      : `${merges.settledAt === undefined ? `**not settled after ${fmt((mergedAt - sealedAt) / 1000, 0)} s**` : `settled ${fmt((merges.settledAt - sealedAt) / 1000, 1)} s after everything was sealed`}: ${fmt(merges.events)} events moved (${fmt(merges.blocksMerged)} blocks rewritten as ${fmt(merges.blocksWritten)}) in ${fmt(merges.passes)} passes (MERGE_INTERVAL_MS=${OPTIONS.mergeIntervalMs}); ${cpuPerEvent(cpuSince(cpuAtSealed, cpuAtMerged), EVENTS)} kept, from the seal's end until then`,
  );
  say(
    "total CPU per event kept, merges included",
    `**${fmt((cpuTotal(settledCpu) * 1e6) / EVENTS, 1)} µs**: ${cpuPerEvent(settledCpu, EVENTS)}, from the first request until the merges had nothing left to do`,
  );
  const byThread = [...threadsAtMerged].sort((a, b) => b[1].seconds - a[1].seconds);
  const threadSeconds = byThread.reduce((sum, [, t]) => sum + t.seconds, 0);
  say(
    "logpond's CPU by thread",
    `${byThread.map(([kind, t]) => `${kind} ${fmt((t.seconds * 1e6) / EVENTS, 1)} µs/event (${fmt((100 * t.seconds) / Math.max(0.01, threadSeconds), 0)} %${t.threads > 1 ? `, ${t.threads} threads` : ""})`).join(", ")}; from logpond's start until the merges had nothing left to do, the threads alive then (Linux /proc/PID/task; one process: with INGEST_WORKERS > 1, the supervisor's)`,
  );
  if (without) {
    const extra = cpuTotal(wholeCpu) - cpuTotal(without.cpu);
    say(
      "sealing's CPU ÷ ingest's CPU",
      `**${fmt(extra / cpuTotal(without.cpu), 2)}** (this run's CPU per event − the run without the sealer's = ${fmt((extra * 1e6) / EVENTS, 1)} µs per event, ÷ ${fmt((cpuTotal(without.cpu) * 1e6) / EVENTS, 1)}; on a CPU-bound box, ingest that seals as fast as it loads runs at ~1 ÷ (1 + this) of its unsealed rate)`,
    );
  }
  if (sealed !== EVENTS) throw new Error(`the sealer sealed ${sealed} events, ${EVENTS} were sent`);

  // 4. Sizes, everything sealed. The WAL's make-up first: a checkpoint recycles its segments.
  const walKinds = await walBreakdown(sql, walBefore);
  await sql`checkpoint`;
  const growth = (await databaseSize(sql)) - sizeBefore;
  const wal = await walBytesSince(sql, walBefore);
  const blocks = await tierSize(sql, "log_blocks");
  const hot = sumSizes(await tierSize(sql, "log_hot"), await tierSize(sql, "log_chunks"));
  const blocksGrowth = tierTotal(blocks) - tierTotal(blocksBefore);
  const hotGrowth = tierTotal(hot) - tierTotal(hotBefore);
  const filtersGrowth = tierTotal(await tierSize(sql, "log_filters")) - tierTotal(filtersBefore);
  const keyOrdersGrowth = tierTotal(await tierSize(sql, "log_key_orders")) - tierTotal(keyOrdersBefore);
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
    `body or payload ${perEvent(columns.body)}, ids ${perEvent(columns.ids)}, dts ${perEvent(columns.dts)}; the rest of a block row ${perEvent(blocks.heap + blocks.toast - blocksBefore.heap - blocksBefore.toast - columns.body - columns.ids - columns.dts)} (tuple headers, TOAST chunk overhead, free space)`,
  );
  say(
    "hot tier, filters and the rest bytes/event",
    `log_hot and log_chunks ${perEvent(hotGrowth)} (${hot.partitions} partitions left), log_filters ${perEvent(filtersGrowth)} (the blocks' word filters), ` +
      `log_key_orders ${perEvent(keyOrdersGrowth)}, everything else ${perEvent(growth - blocksGrowth - hotGrowth - filtersGrowth - keyOrdersGrowth)} (catalog, flush_batches, free space maps)`,
  );
  say(
    "WAL bytes/event",
    `**${perEvent(wal)}** = ${fmt(wal / corpus.bytes, 2)} × NDJSON (${bytes(wal)} written from before the first request until everything was sealed and checkpointed)`,
  );
  say(
    "WAL full-page images",
    `${(((await walFullPages(sql)) - fullPagesBefore) / EVENTS).toFixed(3)} per event (pg_stat_wal, the whole server); by record type, until everything was sealed: ${walKinds ?? "not available (pg_walinspect missing, or the segments recycled)"}`,
  );

  // 5. Reads, before the peers: the default 30-minute window should still hold the newest events.
  const specs = readSpecs(sources, SPLIT, p);
  say("newest event's age at the first read", `${fmt((Date.now() - p.t0) / 60_000, 1)} min`);
  const reads: ReadResult[] = [];
  for (const spec of specs) reads.push(await measureRead(logpond.apiUrl, spec));
  const { dense, sparse } = denseAndSparse(sources, SPLIT);
  for (const [label, source] of [
    ["dense", dense],
    ["sparse", sparse],
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
    if (!greps.has(text)) greps.set(text, await grep(file, text, read.spec.grepRegex ? ["-E"] : []));
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
  const report = markdown(header, figures, reads, from, QUERY_TIMEOUT_MS);
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
  await cleanups.run();
}
