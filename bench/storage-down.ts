// What storage going away costs the senders (docs/durability.md): a logpond running its own
// PostgreSQL, with its default settings (LP_ENV overrides some), under a steady load of numbered
// events (test/helpers/conservation.ts's generator: 6 senders, 20 events a request), then one of
//   kill       the postmaster killed (kill -9): how long flushes fail, /ready says 503, senders get 503
//   disk-full  DATA_DIR on a 192 MiB tmpfs (root only), filled: seconds of 202s after the first
//              failed flush, when the refusal began; with --kill the postmaster is killed too (it
//              cannot start again until there is room); the space is freed after `hold` seconds:
//              time until flushes succeed and 202s come back
// Every run ends by counting what its PostgreSQL holds: stored must equal acknowledged.
//   bun bench/storage-down.ts kill [runs=3]
//   bun bench/storage-down.ts disk-full [runs=3] [hold=10] [--kill]
//   LP_ENV='{"INGEST_REFUSE_AFTER_FLUSH_FAILING_MS":"2000"}' bun bench/storage-down.ts disk-full
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { Generator, verify } from "../test/helpers/conservation";
import { embeddedPostmaster, embeddedUrl, mountSmallDisk, tmpfsRefusal } from "../test/helpers/faults";
import { createSource, spawnService, type Service } from "../test/helpers/service";
import { waitFor } from "../test/helpers/wait";

const [mode = "kill", runsArg = "3", holdArg = "10"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const killToo = process.argv.includes("--kill");
const overrides = JSON.parse(process.env.LP_ENV ?? "{}") as Record<string, string>;
const LOAD = { workers: 6, batch: 20, pauseMs: 2 };
const WARM_MS = 3_000;

const at = (output: string, pattern: RegExp, after = 0): number | undefined =>
  output
    .split("\n")
    .filter((line) => pattern.test(line))
    .map((line) => Date.parse(line.slice(0, 24)))
    .find((t) => t >= after);
const seconds = (ms: number | undefined) => (ms === undefined ? null : Math.round(ms / 100) / 10);

/** Waits for a condition; returns when it was seen (Date.now()). */
const until = (what: string, condition: () => boolean | Promise<boolean>) =>
  waitFor(what, condition, { timeoutMs: 60_000, intervalMs: 50 }).then(() => Date.now());

async function ready(service: Service): Promise<number> {
  try {
    return (await fetch(`${service.apiUrl}/ready`, { signal: AbortSignal.timeout(3_000) })).status;
  } catch {
    return 0;
  }
}

/** Polls /ready every 100 ms; returns what stops it and the time it answered 503. */
function watchReady(service: Service): { stop(): Promise<number> } {
  let running = true;
  let unready = 0;
  const loop = (async () => {
    while (running) {
      const began = Date.now();
      if ((await ready(service)) !== 200) unready += Date.now() - began + 100;
      await Bun.sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return unready;
    },
  };
}

async function run(dataDir: string, fault: (service: Service, generator: Generator) => Promise<Record<string, unknown>>) {
  const service = await spawnService({ DATABASE_URL: "", DATA_DIR: dataDir, ...overrides });
  try {
    const source = await createSource(service, `storage down ${mode}`);
    const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, ...LOAD });
    generator.start();
    await Bun.sleep(WARM_MS);
    const result = await fault(service, generator);
    await Bun.sleep(2_000);
    await generator.stop();
    const own = postgres(embeddedUrl(service.output(), dataDir), { max: 1, onnotice: () => {} });
    await until("the buffer to be written", async () => (await fetch(`${service.apiUrl}/metrics`).then((r) => r.text())).includes("logpond_buffer_events 0\n"));
    const verdict = await verify(own, source.id, generator.acked);
    // How long the flushes that succeeded took (a slow flush is no failure; only one past
    // FLUSH_TIMEOUT_MS is): the histogram's buckets from 0.25 s up.
    const exposition = await fetch(`${service.apiUrl}/metrics`).then((r) => r.text());
    const flushSeconds = Object.fromEntries(
      [...exposition.matchAll(/^logpond_flush_duration_seconds_bucket\{le="([^"]+)"\} (\d+)/gm)]
        .filter(([, le]) => Number(le) >= 0.25 || le === "+Inf")
        .map(([, le, n]) => [`le${le}`, Number(n)]),
    );
    await own.end();
    const exit = await service.stop();
    const perSecond = Math.round(generator.ackedEvents / ((Date.now() - generator.answers[0]![0]) / 1000));
    console.log(JSON.stringify({ mode, ...result, verdict, exit, eventsPerSecond: perSecond, flushSeconds, statuses: Object.fromEntries(generator.statuses) }));
    if (verdict.lost > 0 || verdict.duplicates > 0) process.exitCode = 1;
  } finally {
    if (service.proc.exitCode === null && service.proc.signalCode === null) service.proc.kill("SIGKILL");
    await service.proc.exited;
  }
}

async function killRun(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-bench-down-"));
  try {
    await run(dataDir, async (service, generator) => {
      const watch = watchReady(service);
      const killedAt = Date.now();
      process.kill(embeddedPostmaster(dataDir), "SIGKILL");
      // A backend may still commit a moment after its postmaster died: what counts is the first
      // commit once a new postmaster runs.
      await until("the restart", () => at(service.output(), /embedded PostgreSQL is running again/, killedAt) !== undefined);
      const restartedAt = at(service.output(), /embedded PostgreSQL is running again/, killedAt)!;
      // No flush may have failed at all (none was under way, and the next one came after the
      // restart): then there is no "storage is back" to wait for.
      const failed = () => at(service.output(), /flush: .* not written/, killedAt - 1_000);
      await until(
        "flushes to succeed again",
        () => at(service.output(), /flush: storage is back/, restartedAt - 1_000) !== undefined || (failed() === undefined && Date.now() > restartedAt + 2_000),
      );
      const unreadyMs = await watch.stop();
      const out = service.output();
      const failedAt = failed();
      const backAt = failedAt === undefined ? undefined : at(out, /flush: storage is back/, restartedAt - 1_000)!;
      const refused = generator.answers.filter(([t, s]) => s === "503" && t >= killedAt).length;
      return {
        postmasterBackS: seconds(restartedAt - killedAt),
        // null: no flush failed.
        flushesFailingS: failedAt === undefined ? null : seconds(backAt! - failedAt),
        killToFlushS: failedAt === undefined ? null : seconds(backAt! - killedAt),
        readyUnavailableS: seconds(unreadyMs),
        refused503: refused,
      };
    });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function diskFullRun(holdS: number): Promise<void> {
  const disk = mountSmallDisk(192 * 1024 * 1024);
  const dataDir = path.join(disk.dir, "data");
  try {
    await run(dataDir, async (service, generator) => {
      const filledAt = Date.now();
      disk.fill();
      await until("a failed flush", () => at(service.output(), /flush: .* not written/, filledAt - 1_000) !== undefined);
      const failedAt = at(service.output(), /flush: .* not written/, filledAt - 1_000)!;
      const refusedAt = await until("a 503", () => generator.answers.some(([t, s]) => s === "503" && t > failedAt));
      if (killToo) process.kill(embeddedPostmaster(dataDir), "SIGKILL");
      await Bun.sleep(holdS * 1000);
      const freedAt = Date.now();
      const acks = generator.answers.filter(([t, s]) => s === "202" && t > failedAt && t < freedAt);
      const lateAcks = acks.filter(([t]) => t > refusedAt);
      disk.free();
      const readyAt = await until("/ready", async () => (await ready(service)) === 200);
      const backAt = await until("202s again", () => generator.answers.some(([t, s]) => s === "202" && t > freedAt));
      const out = service.output();
      return {
        killed: killToo,
        acked202AfterFirstFailureS: seconds(acks.length === 0 ? 0 : acks.at(-1)![0] - failedAt),
        acked202Requests: acks.length,
        acked202AfterRefusalBegan: lateAcks.length,
        firstRefusalAfterFailureS: seconds(generator.answers.find(([t, s]) => s === "503" && t > failedAt)![0] - failedAt),
        freedToFlushS: seconds(at(out, /flush: storage is back/, freedAt)! - freedAt),
        freedTo202S: seconds(backAt - freedAt),
        freedToReadyS: seconds(readyAt - freedAt),
        restartFailures: (out.match(/could not restart the embedded PostgreSQL|still down after/g) ?? []).length,
      };
    });
  } finally {
    disk.unmount();
  }
}

if (mode === "disk-full") {
  const refusal = tmpfsRefusal();
  if (refusal) {
    console.log(`disk-full needs a tmpfs: ${refusal}`);
    process.exit(2);
  }
}
for (let i = 0; i < Number(runsArg); i++) {
  if (mode === "kill") await killRun();
  else if (mode === "disk-full") await diskFullRun(Number(holdArg));
  else throw new Error(`unknown mode ${mode}: kill or disk-full`);
}
