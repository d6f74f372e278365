// Ingest workers (INGEST_WORKERS > 1, Linux): this process keeps DATA_DIR, storage, the
// management listener, the live tail and the maintenance (server.ts), and runs INGEST_WORKERS
// processes of this build with ROLE=ingest on its store's URL, each with its own ring, flusher,
// decode threads, memory gate and spill folder (DATA_DIR/spill/worker-<i>), all listening on
// INGEST_PORT (SO_REUSEPORT: the kernel spreads new connections). The port was checked free before
// storage started (server.ts), so a second logpond still exits with its message. Exactly once needs
// nothing more: ids, batches and the commit order come from PostgreSQL (store/copy.ts), whichever
// process commits, and the tail here reads every worker's batch back by its NOTIFY (tail/hub.ts).
//
// A worker that exits is started again under the same index (its spill folder replayed by itself
// before it listens), after a backoff that doubles while workers die young. Each worker reports
// its counters and its ingestion series over IPC every second (cluster/worker.ts); the scrape here
// shows the last reports, the ingestion series summed over the workers (cluster/gather.ts).
// The stop: SIGTERM to every worker, which drains its buffer (or spills it) and exits; one still
// running at the deadline is killed.
import { availableParallelism } from "node:os";
import * as path from "node:path";
import { type Config, SPILL_RESERVE_VARIABLE, WORKER_INDEX_VARIABLE } from "../config";
import type { Metrics, Registry } from "../metrics";
import { Gathered, gatherInto } from "./gather";
import { type Service, timeLeft } from "../service";
import { backoff } from "../timers";
import type { Stager } from "../store/staging";
import { workerStager } from "./stagers";
import type { StageAnswer, StageCall, SupervisorMessage, WorkerMessage } from "./worker";

const MAIN = path.join(import.meta.dir, "..", "main.ts");
/** How long a worker may take from its spawn to its listener (a spill replay is part of it). */
const READY_TIMEOUT_MS = 120_000;
/** Restarts: 0.25 s, doubling to 30 s while workers die within RAN_LONG_MS of their start. */
const RESTART_BACKOFF = { firstMs: 250, maxMs: 30_000 };
const RAN_LONG_MS = 30_000;
/** A worker's SHUTDOWN_TIMEOUT_MS: this share of its supervisor's, which stops storage after the workers. */
const WORKER_SHUTDOWN_SHARE = 0.6;

export interface Workers extends Service {
  /** INGEST_PORT as the workers listen on it (the one the first worker was given, when INGEST_PORT=0). */
  readonly port: number;
  /** The running workers' PIDs by index (1…N); a worker being restarted has none. */
  pids(): Map<number, number>;
  /** Workers started again after one exited. */
  readonly restarts: number;
  /** After stop(): whether a worker left events behind (spilled, or lost), or was killed. */
  readonly leftBehind: boolean;
  /** Resolves once every listening worker wrote what its buffer held when asked (or exited). */
  flush(): Promise<void>;
  /** Each slot's memory path (SEAL_FROM=memory), which the sealer asks as one (store/staging.ts stagerGroup). */
  readonly stagers: readonly Stager[];
}

interface Slot {
  index: number;
  proc: ReturnType<typeof Bun.spawn> | undefined;
  /** Whether `proc` listens (it said so). */
  ready: boolean;
  startedAt: number;
  /** Restarts in a row of workers that died young. */
  failures: number;
  /** The counters of the slot's earlier processes, and the current one's last report. */
  base: { requests: number; events: number };
  current: { requests: number; events: number };
  /** The ingestion series its processes reported (cluster/gather.ts). */
  gathered: Gathered;
  /** Flushes asked of its process, by id, resolved when it answers or exits. */
  flushes: Map<number, () => void>;
  /** Its memory path's calls (cluster/stagers.ts), by id, resolved with the answer, or undefined when it exits. */
  stages: Map<number, (answer: StageAnswer | undefined) => void>;
  restartTimer: Timer | undefined;
}

/** Starts `count` ingest workers on `url`; resolves once every one listens. */
export async function startWorkers(
  config: Config,
  { count, url, metrics, log }: { count: number; url: string; metrics: Metrics; log: (line: string) => void },
): Promise<Workers> {
  let port = config.ingestPort;
  let stopping = false;
  let restarts = 0;
  const slots: Slot[] = Array.from({ length: count }, (_, i) => ({
    index: i + 1,
    proc: undefined,
    ready: false,
    startedAt: 0,
    failures: 0,
    base: { requests: 0, events: 0 },
    current: { requests: 0, events: 0 },
    gathered: new Gathered(),
    flushes: new Map(),
    stages: new Map(),
    restartTimer: undefined,
  }));
  const declareGathered = gatherInto(
    metrics,
    slots.map((slot) => slot.gathered),
  );

  const env = workerEnv(config, count, url);
  /** Spawns the slot's worker; resolves with its port once it listens, rejects if it exits first. */
  const spawn = (slot: Slot): Promise<number> =>
    new Promise((resolve, reject) => {
      let ready = false;
      const proc = Bun.spawn([process.execPath, MAIN], {
        env: { ...env, INGEST_PORT: String(port), [WORKER_INDEX_VARIABLE]: String(slot.index) },
        stdio: ["ignore", "inherit", "inherit"],
        ipc(message: WorkerMessage) {
          if (message.type === "ready") {
            ready = true;
            slot.ready = true;
            resolve(message.port);
          } else if (message.type === "counters") {
            slot.current = { requests: message.requests, events: message.events };
            slot.gathered.report(message.families);
            declareGathered();
          } else if (message.type === "flushed") {
            slot.flushes.get(message.id)?.();
            slot.flushes.delete(message.id);
          } else if (message.type === "staged") {
            slot.stages.get(message.id)?.(message.value);
            slot.stages.delete(message.id);
          }
        },
        onExit(_proc, code, signal) {
          if (slot.proc !== proc) return;
          slot.proc = undefined;
          slot.ready = false;
          slot.base = { requests: slot.base.requests + slot.current.requests, events: slot.base.events + slot.current.events };
          slot.current = { requests: 0, events: 0 };
          slot.gathered.exited();
          for (const done of slot.flushes.values()) done();
          slot.flushes.clear();
          for (const done of slot.stages.values()) done(undefined);
          slot.stages.clear();
          if (!ready) reject(new Error(`ingest worker ${slot.index} exited before it listened (${signal ?? `exit ${code}`})`));
          else if (!stopping) restart(slot, signal ? String(signal) : `exit ${code}`);
        },
      });
      slot.proc = proc;
      slot.ready = false;
      slot.startedAt = performance.now();
      const timer = setTimeout(() => {
        if (ready) return;
        proc.kill("SIGKILL");
        reject(new Error(`ingest worker ${slot.index} did not listen within ${READY_TIMEOUT_MS} ms`));
      }, READY_TIMEOUT_MS);
      proc.exited.then(() => clearTimeout(timer));
    });

  const restart = (slot: Slot, why: string) => {
    slot.failures = performance.now() - slot.startedAt > RAN_LONG_MS ? 0 : slot.failures + 1;
    const delay = backoff(slot.failures, RESTART_BACKOFF);
    log(`ingest worker ${slot.index} exited (${why}): starting another in ${Math.round(delay)} ms`);
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (stopping) return;
      restarts++;
      spawn(slot).then(
        () => log(`ingest worker ${slot.index} started again (pid ${slot.proc?.pid})`),
        (error: Error) => {
          log(`ingest worker ${slot.index} could not start again: ${error.message}`);
          // Its exit was seen before its listener: try again, later.
          if (!stopping && slot.proc === undefined && slot.restartTimer === undefined) restart(slot, "failed start");
        },
      );
    }, delay);
  };

  const stopWorkers = async (deadline: number) => {
    stopping = true;
    for (const slot of slots) clearTimeout(slot.restartTimer);
    const running = slots.flatMap((slot) => (slot.proc ? [slot.proc] : []));
    for (const proc of running) proc.kill("SIGTERM");
    const all = Promise.all(running.map((proc) => proc.exited));
    let timer: Timer | undefined;
    const inTime = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeLeft(deadline)))),
    ]);
    clearTimeout(timer);
    if (!inTime) {
      for (const proc of running) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      log("shutdown: ingest workers still draining at the deadline were killed (their unwritten events are lost)");
      await all;
    }
    // A worker exits 1 when it spilled or lost events (main.ts): the supervisor's exit says so too.
    leftBehind = running.some((proc) => proc.exitCode !== 0);
  };
  let leftBehind = false;
  let flushes = 0;
  const flush = () =>
    Promise.all(
      slots.map((slot) => {
        if (!slot.ready || slot.proc === undefined) return;
        const id = ++flushes;
        const done = new Promise<void>((resolve) => slot.flushes.set(id, resolve));
        try {
          slot.proc.send({ type: "flush", id } satisfies SupervisorMessage);
        } catch {
          slot.flushes.get(id)?.();
        }
        return done;
      }),
    ).then(() => {});

  let calls = 0;
  /** A call to the slot's memory path: its answer, or undefined when it exits or does not answer within `timeoutMs`. */
  const ask = (slot: Slot, call: StageCall, timeoutMs: number): Promise<StageAnswer | undefined> => {
    if (!slot.ready || slot.proc === undefined) return Promise.resolve(undefined);
    const id = ++calls;
    let timer: Timer | undefined;
    const answered = new Promise<StageAnswer | undefined>((resolve) => {
      slot.stages.set(id, resolve);
      timer = setTimeout(() => {
        slot.stages.delete(id);
        resolve(undefined);
      }, timeoutMs);
    });
    try {
      slot.proc.send({ type: "stage", id, call } satisfies SupervisorMessage);
    } catch {
      slot.stages.get(id)?.(undefined);
      slot.stages.delete(id);
    }
    return answered.finally(() => clearTimeout(timer));
  };
  const stagers = slots.map((slot) =>
    workerStager({
      index: slot.index,
      pid: () => (slot.ready ? slot.proc?.pid : undefined),
      ask: (call, timeoutMs) => ask(slot, call, timeoutMs),
    }),
  );

  try {
    // The first worker binds INGEST_PORT (0: a free one it is given), the others its port.
    port = await spawn(slots[0]!);
    await Promise.all(slots.slice(1).map(spawn));
  } catch (error) {
    await stopWorkers(performance.now() + config.shutdownTimeoutMs);
    throw error;
  }
  log(`ingest workers: ${count} processes share INGEST_PORT ${port} (pids ${slots.map((slot) => slot.proc?.pid).join(", ")})`);

  workerSeries(metrics, {
    listening: () => slots.filter((slot) => slot.ready).length,
    restarts: () => restarts,
    counts: () =>
      slots.map((slot) => ({ index: slot.index, requests: slot.base.requests + slot.current.requests, events: slot.base.events + slot.current.events })),
  });

  return {
    name: "ingest workers",
    port,
    pids: () => new Map(slots.flatMap((slot) => (slot.proc ? [[slot.index, slot.proc.pid] as const] : []))),
    get restarts() {
      return restarts;
    },
    get leftBehind() {
      return leftBehind;
    },
    flush,
    stagers,
    halt() {
      stopping = true; // no restart from now on
    },
    stop: stopWorkers,
  };
}

/** The supervisor's series of its workers (declared by a test too, as this process would). */
export function workerSeries(
  metrics: Registry,
  workers: { listening(): number; restarts(): number; counts(): { index: number; requests: number; events: number }[] },
): void {
  metrics.gauge("logpond_workers", "Ingest worker processes listening (of INGEST_WORKERS).", workers.listening);
  metrics.counter("logpond_worker_restarts_total", "Ingest workers started again after one exited.", workers.restarts);
  const perWorker = (name: string, help: string, value: (count: { requests: number; events: number }) => number) =>
    metrics.family(name, "counter", help, (sample) => {
      for (const count of workers.counts()) sample(`worker="${count.index}"`, value(count));
    });
  perWorker("logpond_worker_requests_total", "Ingestion requests each ingest worker answered with success (reported every second).", (c) => c.requests);
  perWorker("logpond_worker_events_total", "Events each ingest worker accepted (reported every second).", (c) => c.events);
}

/**
 * A worker's environment: this process's, with ROLE=ingest on the store's URL, and a 1/N share of
 * the memory settings, so that N workers together stay within INGEST_INFLIGHT_MAX_BYTES and
 * BUFFER_MAX_BYTES / BUFFER_MAX_EVENTS (docs/memory.md). Each drains within a share of
 * SHUTDOWN_TIMEOUT_MS, so storage here still runs when they are done.
 */
export function workerEnv(config: Config, count: number, url: string): Record<string, string> {
  const share = (total: number, least: number) => String(Math.max(least, Math.floor(total / count)));
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  return {
    ...env,
    ROLE: "ingest",
    DATABASE_URL: url,
    INGEST_WORKERS: "1",
    INGEST_INFLIGHT_MAX_BYTES: share(config.ingestInflightMaxBytes, 1 << 20),
    BUFFER_MAX_BYTES: share(config.bufferMaxBytes, 1 << 20),
    BUFFER_MAX_EVENTS: share(config.bufferMaxEvents, 1),
    SHUTDOWN_TIMEOUT_MS: String(Math.max(100, Math.floor(config.shutdownTimeoutMs * WORKER_SHUTDOWN_SHARE))),
    // The memory path's seal threads: each worker builds what it commits, the cores shared out.
    SEAL_WORKERS: String(config.sealWorkers || Math.max(1, Math.min(4, Math.floor(availableParallelism() / count)))),
    // The embedded PostgreSQL shares the disk: each worker keeps room for its own spill file.
    [SPILL_RESERVE_VARIABLE]: config.databaseUrl === undefined ? "1" : "",
  };
}
