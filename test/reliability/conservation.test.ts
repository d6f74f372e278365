// Conservation under faults (docs/durability.md): numbered events are sent to a running logpond while
// its PostgreSQL is restarted (fast, immediate), paused past FLUSH_TIMEOUT_MS, or logpond itself
// gets SIGTERM (buffered) or kill -9 (durable), or SIGTERM while PostgreSQL is down (the spill file,
// replayed by the next start). Every scenario must end with lost = 0 and duplicates = 0. Short form here (npm test); `npm run test:conservation` runs the full form:
// longer load, the fault repeated, more senders.
// Storage v3 (docs/storage-v3.md): the sealer runs all through the load (SEAL_INTERVAL_MS=200: a generation
// closes and moves into blocks five times a second), and a second set of faults strikes one move in
// its middle — after its DELETE, before its blocks are written (test/helpers/sealing.ts) — with
// kill -9, its backend terminated, PostgreSQL crashed, SIGTERM. Each scenario ends with a final
// seal; then every acknowledged event is stored exactly once, the source's hot rows + block lines
// = its distinct ids, and the stalled move's rows are all still hot (rolled back) or all in blocks
// (committed), each once.
// The read path (a search used to end the process): searches and histograms from many clients with
// QUERY_TIMEOUT_MS of 50–300 ms over hot and sealed data while ingesting; the service stays up, no
// error is left unhandled, and nothing acknowledged is lost.
import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { sealAll } from "../../src/store/sealer";
import { Generator, verify } from "../helpers/conservation";
import { embeddedPostmaster, embeddedUrl, isAlive, mountSmallDisk, startFaultyPostgres, tmpfsRefusal, type FaultyPostgres } from "../helpers/faults";
import { backendGone, copiesOf, holdBlockWrites, tiers, type BlockWrites, type StalledMove } from "../helpers/sealing";
import { createSource, SERVICE_API_TOKEN, spawnService, type Service } from "../helpers/service";
import { SseReader } from "../helpers/sse";
import { waitFor } from "../helpers/wait";

const FULL = process.env.RELIABILITY === "full";
const PHASE_MS = FULL ? 6_000 : 1_200; // load before the fault, and again after it
const REPEATS = FULL ? 3 : 1;
const WORKERS = FULL ? 16 : 6;
/** The move faults' load: COPY runs beside the moves, and what is left to seal afterwards stays small. */
const MOVE_LOAD = { workers: FULL ? 8 : 2, batch: 20, pauseMs: 10 };
const FLUSH_TIMEOUT_MS = 1_000;
/** The memory path (SEAL_FROM=memory) under the faults; the move faults below read back (SEAL_FROM=rows). */
const SEALING = { SEAL_INTERVAL_MS: "200", SEAL_FROM: "memory" };

// postgres.js 3.4.9 ended the process when a connection closed under a statement of a transaction
// (begin()'s ROLLBACK written to a null socket from a setImmediate; porsager/postgres#1208): a
// terminated backend or a PostgreSQL restart during a move lost the buffer. patches/ fixes the
// driver at install; the move faults below and the restarts with the sealer running check it.

let pg: FaultyPostgres;
let sql: postgres.Sql;
const dataDirs: string[] = [];
beforeAll(async () => {
  pg = await startFaultyPostgres("faults");
  sql = postgres(pg.url, { max: 2, onnotice: () => {} });
  // Each run starts empty (the service applies the migrations), so the cluster does not grow run after run.
  await sql.unsafe("drop schema if exists public cascade; create schema public; drop schema if exists drizzle cascade;");
});
// What a failed scenario left hot is sealed before the next starts, so none waits for another's rows.
beforeEach(async () => {
  const [hot] = await sql<{ table: string | null }[]>`select to_regclass('log_hot')::text as table`;
  if (hot?.table) await sealAll(sql as never); // (the first service applies the migrations)
});
afterAll(async () => {
  await sql.end({ timeout: 5 });
  await pg.stop();
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

interface Scenario {
  name: string;
  env?: Record<string, string>;
  /** The fault closes PostgreSQL's connections (the driver patch, above). */
  closes?: boolean;
  /** Injects the fault; returns when the service should be under load again (or is gone). */
  fault(service: Service): Promise<void>;
  /** The fault ends the service (SIGTERM, kill -9): what its exit must be. */
  exit?: number | "killed";
}

async function ready(service: Service): Promise<number> {
  try {
    return (await fetch(`${service.apiUrl}/ready`, { signal: AbortSignal.timeout(5_000) })).status;
  } catch {
    return 0;
  }
}

/**
 * Polled every 200 ms: a reader of log_hot holds a lock that closing a generation and dropping a
 * sealed one wait for (20 ms, then retried), so polling log_hot without pause would hold the sealer up.
 */
const POLL = { intervalMs: 200 };

/** Moves have happened under the load: the source has blocks (log_blocks only: log_hot is left alone). */
async function sealedUnderLoad(sourceId: number): Promise<void> {
  await waitFor("the first blocks of the source", async () => (await sql`select 1 from log_blocks where source_id = ${sourceId} limit 1`).length > 0, POLL);
}

/** A value of the service's /metrics (undefined when it does not answer). */
async function metric(service: Service, name: string): Promise<number | undefined> {
  try {
    const response = await fetch(`${service.apiUrl}/metrics`, {
      headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` },
      signal: AbortSignal.timeout(5_000),
    });
    const line = (await response.text()).split("\n").find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.split(" ")[1]);
  } catch {
    return undefined;
  }
}

const ended = (service: Service) => service.proc.exitCode !== null || service.proc.signalCode !== null;

/** Three ingest workers, each building blocks of what it commits for the supervisor's sealer (cluster/stagers.ts). */
const WORKERS_ENV = { INGEST_WORKERS: "3", SEAL_FROM: "memory", SEAL_WORKERS: "1" };

/** The PIDs of a supervisor's workers running now, from its log (at start, and each one started again). */
function runningWorkers(service: Service): number[] {
  const output = service.output();
  const first = /ingest workers: \d+ processes share INGEST_PORT \d+ \(pids ([\d, ]+)\)/.exec(output)?.[1]?.split(", ").map(Number) ?? [];
  const again = [...output.matchAll(/ingest worker \d+ started again \(pid (\d+)\)/g)].map((m) => Number(m[1]));
  return [...first, ...again].filter(isAlive);
}

/**
 * Nothing acknowledged lost or stored twice, and the source's hot rows + block lines = its distinct
 * ids. Where the sealer ran during the load, first a final seal (no service running): then every
 * row of the source must be in blocks. (Without sealing during the load, the seal of a still table
 * is test/integration/sealer.test.ts's.)
 */
async function conserved(
  label: string,
  sourceId: number,
  acked: readonly [number, number][],
  sealed: boolean,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const left = await tiers(sql, sourceId);
  if (sealed) await sealAll(sql as never);
  const verdict = await verify(sql, sourceId, acked);
  const after = sealed ? await tiers(sql, sourceId) : left;
  console.log(`conservation: ${label}: ${JSON.stringify({ ...verdict, left: { hot: left.hot, sealed: left.sealed, blocks: left.blocks }, ...extra })}`);
  expect(verdict.acked).toBeGreaterThan(0);
  expect(verdict.lost).toBe(0);
  expect(verdict.duplicates).toBe(0);
  for (const state of [left, after]) {
    expect(state.badBlocks).toBe(0);
    expect(state.hot + state.sealed).toBe(state.distinctIds);
  }
  expect(after.distinctIds).toBe(verdict.stored);
  if (sealed) expect(after.hot).toBe(0);
}

const scenarios: Scenario[] = [
  {
    name: "PostgreSQL restarted with a fast shutdown under load",
    closes: true,
    async fault() {
      await pg.restart("fast", 300);
    },
  },
  {
    name: "PostgreSQL restarted with an immediate shutdown (crash recovery) under load",
    closes: true,
    async fault() {
      await pg.restart("immediate", 300);
    },
  },
  {
    name: "PostgreSQL paused (SIGSTOP) past FLUSH_TIMEOUT_MS under load; /ready fails, then recovers",
    env: { BUFFER_MAX_EVENTS: "40000" }, // small enough to fill during the pause: 503s, still nothing lost
    async fault(service) {
      pg.pause();
      try {
        // Paused for at least 2.5 deadlines (the fault), and until /ready says so: how soon it
        // does is not asserted (the 20 s only ends a wait that would hang).
        await Bun.sleep(FLUSH_TIMEOUT_MS * 2.5);
        await waitFor("/ready to answer 503", () => ready(service), { intervalMs: 100, until: (status) => status === 503 });
      } finally {
        pg.resume();
      }
      await waitFor("/ready to answer 200 again", () => ready(service), { intervalMs: 100, until: (status) => status === 200 });
    },
  },
  {
    name: "logpond gets SIGTERM under load (buffered): drains and exits 0",
    env: { FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000000" },
    exit: 0,
    async fault(service) {
      await service.stop();
    },
  },
  {
    name: "logpond killed with SIGKILL under load (durable): nothing acknowledged is lost",
    env: { INGEST_ACK: "durable" },
    exit: "killed",
    async fault(service) {
      service.proc.kill("SIGKILL");
      await service.proc.exited;
    },
  },
  // Three ingest workers (cluster/supervisor.ts) under the same faults: the load spreads over them.
  {
    name: "3 ingest workers: one killed with SIGKILL under load (durable), replaced: nothing acknowledged is lost",
    env: { ...WORKERS_ENV, INGEST_ACK: "durable" },
    async fault(service) {
      // The workers' blocks are published: the memory path runs across processes before the fault.
      await waitFor("blocks built by the workers", async () => ((await metric(service, "logpond_sealer_events_from_memory_total")) ?? 0) > 0, POLL);
      const victim = runningWorkers(service)[0]!;
      const restarts = (await metric(service, "logpond_worker_restarts_total")) ?? 0;
      process.kill(victim, "SIGKILL");
      await waitFor(
        "the worker to be replaced",
        async () => (await metric(service, "logpond_worker_restarts_total")) === restarts + 1 && (await metric(service, "logpond_workers")) === 3,
        POLL,
      );
    },
  },
  {
    name: "3 ingest workers: PostgreSQL restarted with a fast shutdown under load",
    env: WORKERS_ENV,
    closes: true,
    async fault() {
      await pg.restart("fast", 300);
    },
  },
  {
    name: "3 ingest workers: the supervisor gets SIGTERM under load (buffered): every worker drains, exit 0, no process left",
    env: { ...WORKERS_ENV, FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000000" },
    exit: 0,
    async fault(service) {
      const workers = runningWorkers(service);
      expect(workers.length).toBe(3);
      expect(await service.stop()).toBe(0);
      expect(workers.filter(isAlive)).toEqual([]);
    },
  },
];

test(
  "PostgreSQL stopped, then SIGTERM: exits 1 saying how many were spilled; the next start writes them once",
  async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
    dataDirs.push(dataDir);
    const sealing = SEALING;
    const env = { DATABASE_URL: pg.url, DATA_DIR: dataDir, FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS), SHUTDOWN_TIMEOUT_MS: "3000", ...sealing };
    const service = await spawnService(env);
    let restarted: Service | undefined;
    try {
      const source = await createSource(service, "spill");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      if (sealing.SEAL_INTERVAL_MS) await sealedUnderLoad(source.id);
      // PostgreSQL goes away for longer than the whole shutdown; the load goes on meanwhile.
      const down = pg.restart("fast", 8_000);
      await Bun.sleep(1_000);
      const code = await service.stop();
      await generator.stop();
      expect(code).toBe(1);
      const spilled = /stopped; (\d+) events spilled to (\S+)/.exec(service.output());
      if (!spilled) throw new Error(`no spill count in the output:\n${service.output().slice(-2000)}`);
      expect(Number(spilled[1])).toBeGreaterThan(0);
      await down;

      restarted = await spawnService(env);
      expect(restarted.output()).toMatch(new RegExp(`spill: ${spilled[1]} events of .* written to PostgreSQL`));
      expect(await restarted.stop()).toBe(0);
      await conserved("spill", source.id, generator.acked, sealing.SEAL_INTERVAL_MS !== undefined, {
        spilled: Number(spilled[1]),
        statuses: Object.fromEntries(generator.statuses),
      });
    } finally {
      for (const s of [service, restarted]) {
        if (s && s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill("SIGKILL");
        await s?.proc.exited;
      }
    }
  },
  FULL ? 300_000 : 60_000,
);

test(
  "PostgreSQL frozen (SIGSTOP), then SIGTERM with the memory path: exits 1 by itself while PostgreSQL is still frozen, spilled; the next start writes them once",
  async () => {
    // The seal threads' statements get no answer from a frozen server: their close used to wait
    // for them, and logpond never exited until PostgreSQL came back (a stranger's black-box run).
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
    dataDirs.push(dataDir);
    const env = { DATABASE_URL: pg.url, DATA_DIR: dataDir, FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS), SHUTDOWN_TIMEOUT_MS: "3000", ...SEALING };
    const service = await spawnService(env);
    let restarted: Service | undefined;
    try {
      const source = await createSource(service, "frozen");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      await sealedUnderLoad(source.id);
      pg.pause();
      let code: number | NodeJS.Signals;
      try {
        await Bun.sleep(1_000);
        // SIGTERM; the helper sends SIGKILL if there is no exit within 60 s, and says so as the code.
        code = await service.stop();
        await generator.stop();
      } finally {
        pg.resume();
      }
      expect(code).toBe(1);
      const spilled = /stopped; (\d+) events spilled to (\S+)/.exec(service.output());
      if (!spilled) throw new Error(`no spill count in the output:\n${service.output().slice(-2000)}`);

      restarted = await spawnService(env);
      expect(await restarted.stop()).toBe(0);
      await conserved("frozen", source.id, generator.acked, true, { spilled: Number(spilled[1]), statuses: Object.fromEntries(generator.statuses) });
    } finally {
      pg.resume();
      for (const s of [service, restarted]) {
        if (s && !ended(s)) s.proc.kill("SIGKILL");
        await s?.proc.exited;
      }
    }
  },
  FULL ? 300_000 : 120_000,
);

test(
  "3 ingest workers: PostgreSQL stopped, then SIGTERM: each worker spills into its own folder, exit 1; the next start writes every folder once",
  async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
    dataDirs.push(dataDir);
    const env = { ...WORKERS_ENV, DATABASE_URL: pg.url, DATA_DIR: dataDir, FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS), SHUTDOWN_TIMEOUT_MS: "5000" };
    const service = await spawnService(env);
    let restarted: Service | undefined;
    try {
      const source = await createSource(service, "spill, 3 workers");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      const down = pg.restart("fast", 8_000);
      await Bun.sleep(1_000);
      const code = await service.stop();
      await generator.stop();
      expect(code).toBe(1);
      const spills = [...service.output().matchAll(/\[ingest worker (\d+)\] stopped; (\d+) events spilled to (\S+)/g)];
      if (spills.length === 0) throw new Error(`no worker spilled:\n${service.output().slice(-3000)}`);
      for (const [, index, , file] of spills) expect(file).toContain(path.join("spill", `worker-${index}`));
      const spilled = spills.reduce((sum, m) => sum + Number(m[2]), 0);
      await down;

      // The supervisor replays every worker's folder before it starts them.
      restarted = await spawnService(env);
      const replayed = [...restarted.output().matchAll(/spill: (\d+) events of .* written to PostgreSQL/g)].reduce((sum, m) => sum + Number(m[1]), 0);
      expect(replayed).toBe(spilled);
      expect(await restarted.stop()).toBe(0);
      await conserved("spill, 3 workers", source.id, generator.acked, false, { spilled, statuses: Object.fromEntries(generator.statuses) });
    } finally {
      for (const s of [service, restarted]) {
        if (s && !ended(s)) s.proc.kill("SIGKILL");
        await s?.proc.exited;
      }
    }
  },
  FULL ? 300_000 : 90_000,
);

test(
  "two ROLE=ingest nodes on one PostgreSQL beside a ROLE=all logpond (durable): one killed with SIGKILL, the other stopped with SIGTERM; nothing lost or stored twice",
  async () => {
    const dataDirs3 = [0, 1, 2].map(() => mkdtempSync(path.join(tmpdir(), "logpond-conservation-")));
    dataDirs.push(...dataDirs3);
    const common = { DATABASE_URL: pg.url, FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS), DURABLE_TIMEOUT_MS: "5000", INGEST_ACK: "durable" };
    // The ROLE=all logpond migrates the database, runs the sealer and the API; the nodes only ingest.
    const main = await spawnService({ ...common, DATA_DIR: dataDirs3[0]!, SEAL_INTERVAL_MS: "200", SEAL_FROM: "rows" });
    const nodes: Service[] = [];
    try {
      for (const dir of dataDirs3.slice(1)) nodes.push(await spawnService({ ...common, DATA_DIR: dir, ROLE: "ingest" }));
      for (const node of nodes) expect(node.output()).toContain("logpond ingest node is running");
      const source = await createSource(main, "two ingest nodes");
      // One generator per node, numbered apart: the verdict is over both.
      const generators = nodes.map(
        (node, i) => new Generator({ ingestUrl: node.ingestUrl, token: source.token, workers: WORKERS / 2, batch: 20, pauseMs: 2, first: i * 100_000_000 }),
      );
      for (const generator of generators) generator.start();
      await Bun.sleep(PHASE_MS);
      await sealedUnderLoad(source.id);
      nodes[0]!.proc.kill("SIGKILL");
      await nodes[0]!.proc.exited;
      await Bun.sleep(PHASE_MS);
      expect(await nodes[1]!.stop()).toBe(0);
      for (const generator of generators) await generator.stop();
      expect(await main.stop()).toBe(0);
      await conserved(
        "two ROLE=ingest nodes",
        source.id,
        generators.flatMap((generator) => generator.acked),
        true,
        { statuses: generators.map((generator) => Object.fromEntries(generator.statuses)) },
      );
      expect(generators.every((generator) => generator.ackedEvents > 0)).toBe(true);
    } finally {
      for (const s of [main, ...nodes]) {
        if (!ended(s)) s.proc.kill("SIGKILL");
        await s.proc.exited;
      }
    }
  },
  FULL ? 300_000 : 90_000,
);

for (const scenario of scenarios) {
  test(
    scenario.name,
    async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
      dataDirs.push(dataDir);
      const sealing = SEALING;
      const service = await spawnService({
        DATABASE_URL: pg.url,
        DATA_DIR: dataDir,
        FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS),
        DURABLE_TIMEOUT_MS: "5000",
        ...sealing,
        ...scenario.env,
      });
      try {
        const source = await createSource(service, scenario.name);
        const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
        generator.start();
        const repeats = scenario.exit === undefined ? REPEATS : 1;
        for (let i = 0; i < repeats; i++) {
          await Bun.sleep(PHASE_MS);
          if (sealing.SEAL_INTERVAL_MS) await sealedUnderLoad(source.id);
          await scenario.fault(service);
        }
        if (scenario.exit === undefined) await Bun.sleep(PHASE_MS);
        await generator.stop();

        if (scenario.exit === undefined) {
          const code = await service.stop();
          if (code !== 0) console.log(`logpond exited ${code}; its last output:\n${service.output().slice(-3000)}`);
          expect(code).toBe(0);
        } else if (scenario.exit === 0) {
          expect(service.proc.exitCode).toBe(0);
          expect(service.output()).toContain("nothing left behind");
        } else {
          expect(service.proc.signalCode).toBe("SIGKILL");
        }
        await conserved(scenario.name, source.id, generator.acked, sealing.SEAL_INTERVAL_MS !== undefined, {
          faults: repeats,
          statuses: Object.fromEntries(generator.statuses),
        });
      } finally {
        if (service.proc.exitCode === null && service.proc.signalCode === null) service.proc.kill("SIGKILL");
        await service.proc.exited;
      }
    },
    FULL ? 300_000 : 60_000,
  );
}

/**
 * The read path under chaos: searches and histograms from many clients, with a QUERY_TIMEOUT_MS of
 * 50 to 300 ms, over events spread across the last 7 days (so long windows are read as slices and
 * halves at once, and time out in any of them), hot and sealed (the sealer runs), while ingesting.
 * A search used to end the process when a half failed before the other (query/read.ts). The service
 * must stay up with no error left unhandled (logpond_uncaught_errors_total: its handlers would keep
 * it up, so the count is what tells), answer every query 200 or 503, and lose or repeat nothing.
 */
const CHAOS_TIMEOUTS_MS = FULL ? [50, 100, 200, 300] : [50, 300];
/** Query answers to see (per timeout) before the load stops; the sealed blocks are waited for too. */
const CHAOS_QUERIES = FULL ? 300 : 60;
const CHAOS_CLIENTS = FULL ? 12 : 6;
/** Enough events for slow scans, few enough that the final seal of what is left hot stays short. */
const CHAOS_LOAD = FULL ? { workers: 4, batch: 20, pauseMs: 2 } : { workers: 2, batch: 20, pauseMs: 5 };
const WEEK_S = 7 * 86_400;
const CHAOS_READS = [
  (id: number) => `/api/v2/query/live-tail?source_ids=${id}&from=now-7d&query=OutOfMemoryError`,
  (id: number) => `/api/v2/query/live-tail?source_ids=${id}&from=now-24h&query=level:error&batch=500`,
  (id: number) => `/api/v2/query/live-tail?source_ids=${id}&from=now-7d&query=${encodeURIComponent("http.status>=500")}`,
  (id: number) => `/api/v2/query/live-tail?source_ids=${id}&from=now-7d&query=nothing_matches_this&order=oldest_first`,
  (id: number) => `/api/v2/query/live-tail?source_ids=${id}&from=now-7d&batch=1000`,
  (id: number) => `/api/v2/query/histogram?source_ids=${id}&from=now-7d&query=OutOfMemoryError`,
  (id: number) => `/api/v2/query/histogram?source_ids=${id}&from=now-7d&query=${encodeURIComponent("http.status>=500")}&buckets=500`,
  (id: number) => `/api/v2/query/histogram?source_ids=${id}&from=now-24h&query=level:error`,
  (id: number) => `/api/v2/query/histogram?source_ids=${id}&from=now-7d`,
];

for (const queryTimeoutMs of CHAOS_TIMEOUTS_MS) {
  test(
    `searches and histograms from ${CHAOS_CLIENTS} clients with QUERY_TIMEOUT_MS=${queryTimeoutMs} over hot and sealed data while ingesting: the service stays up, nothing lost`,
    async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
      dataDirs.push(dataDir);
      const service = await spawnService({
        DATABASE_URL: pg.url,
        DATA_DIR: dataDir,
        FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS),
        QUERY_TIMEOUT_MS: String(queryTimeoutMs),
        ...SEALING,
      });
      let reading = true;
      const readers: Promise<void>[] = [];
      try {
        const source = await createSource(service, `chaos ${queryTimeoutMs}`);
        const now = Date.now();
        // Spread over the week (a stride prime to its seconds), with words the reads look for.
        const generator = new Generator({
          ingestUrl: service.ingestUrl,
          token: source.token,
          ...CHAOS_LOAD,
          fields: (seq) => ({
            dt: new Date(now - ((seq * 7_919) % WEEK_S) * 1000).toISOString(),
            level: ["info", "warn", "error"][seq % 3],
            http: { status: [200, 404, 500, 503][seq % 4] },
            ...(seq % 11 === 0 ? { error: "java.lang.OutOfMemoryError: Java heap space" } : {}),
          }),
        });
        generator.start();
        // Sealed data before the reads begin: reads back to back hold the hot tier's tables, and a
        // seal's TRUNCATE waits at most DDL_LOCK_TIMEOUT for them, so the sealer may seal little
        // while they run (its counters are printed below).
        await sealedUnderLoad(source.id);
        const sealedBefore = await metric(service, "logpond_sealer_events_sealed_total");
        const answers = new Map<string, number>();
        let answered = 0;
        for (let client = 0; client < CHAOS_CLIENTS; client++) {
          readers.push(
            (async () => {
              for (let i = client; reading; i++) {
                const read = CHAOS_READS[i % CHAOS_READS.length]!(source.id);
                let status: string;
                try {
                  const response = await fetch(`${service.apiUrl}${read}`, {
                    headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` },
                    signal: AbortSignal.timeout(30_000),
                  });
                  await response.arrayBuffer();
                  status = String(response.status);
                } catch (error) {
                  status = `no answer (${(error as Error).name})`;
                }
                answers.set(status, (answers.get(status) ?? 0) + 1);
                answered++;
              }
            })(),
          );
        }
        await waitFor(`${CHAOS_QUERIES} query answers`, async () => answered >= CHAOS_QUERIES || ended(service), {
          ...POLL,
          timeoutMs: FULL ? 120_000 : 40_000,
        });
        reading = false;
        await Promise.all(readers);
        await generator.stop();

        const unhandled = {
          rejection: await metric(service, 'logpond_uncaught_errors_total{kind="rejection"}'),
          exception: await metric(service, 'logpond_uncaught_errors_total{kind="exception"}'),
        };
        const statuses = Object.fromEntries(answers);
        const sealer = {
          sealedBefore,
          sealedAfter: await metric(service, "logpond_sealer_events_sealed_total"),
          closesBusy: await metric(service, "logpond_sealer_closes_busy_total"),
        };
        console.log(`conservation: chaos reads, QUERY_TIMEOUT_MS=${queryTimeoutMs}: ${JSON.stringify({ answers: statuses, unhandled, sealer })}`);
        expect(ended(service)).toBe(false);
        expect(unhandled).toEqual({ rejection: 0, exception: 0 });
        expect(Object.keys(statuses).filter((status) => status !== "200" && status !== "503")).toEqual([]);
        expect(service.output()).not.toContain("internal error");
        expect(await service.stop()).toBe(0);
        await conserved(`chaos reads, QUERY_TIMEOUT_MS=${queryTimeoutMs}`, source.id, generator.acked, true, {
          statuses: Object.fromEntries(generator.statuses),
        });
      } catch (error) {
        console.log(`logpond's output:\n${service.output().slice(-4000)}`);
        throw error;
      } finally {
        reading = false;
        await Promise.all(readers);
        if (!ended(service)) service.proc.kill("SIGKILL");
        await service.proc.exited;
      }
    },
    FULL ? 300_000 : 60_000,
  );
}

interface MoveFault {
  name: string;
  env?: Record<string, string>;
  /** The fault closes the mover's connection (the driver patch, above). */
  closes?: boolean;
  /** Strikes while `move` holds its hot table and waits for the lock before its first block; may release the lock. */
  inject(service: Service, move: StalledMove, lock: BlockWrites): Promise<void>;
  /** What became of the stalled move: every fault here rolls it back (a stop abandons a seal, store/sealer.ts). */
  outcome: "rolled back";
  /** The fault ends the service: its exit (a new one then starts on the same database). */
  exit?: number | "killed";
}

const moveFaults: MoveFault[] = [
  {
    name: "kill -9 of logpond in the middle of a move (durable): rolled back, nothing acknowledged lost",
    env: { INGEST_ACK: "durable" },
    outcome: "rolled back",
    exit: "killed",
    async inject(service) {
      service.proc.kill("SIGKILL");
      await service.proc.exited;
    },
  },
  {
    name: "the moving backend terminated (pg_terminate_backend) in the middle of a move: rolled back, logpond seals on",
    closes: true,
    outcome: "rolled back",
    async inject(_service, move) {
      await sql`select pg_terminate_backend(${move.pid})`;
    },
  },
  {
    name: "PostgreSQL crashed (immediate shutdown) and restarted in the middle of a move: rolled back, logpond seals on",
    closes: true,
    outcome: "rolled back",
    async inject() {
      await pg.restart("immediate", 300);
    },
  },
  {
    name: "SIGTERM in the middle of a move: the stop abandons the move, which rolls back; exits 0",
    outcome: "rolled back",
    exit: 0,
    async inject(service, _move, lock) {
      service.proc.kill("SIGTERM");
      await waitFor("the stop to begin", async () => service.output().includes("SIGTERM: stopping"), POLL);
      await lock.release(); // the move's INSERT goes on; the stop then abandons the rest of it
      await service.proc.exited;
    },
  },
  {
    name: "SIGTERM with a move that outlasts SHUTDOWN_TIMEOUT_MS: logpond exits 0 without it, the move rolls back",
    env: { SHUTDOWN_TIMEOUT_MS: "2000" },
    outcome: "rolled back",
    exit: 0,
    async inject(service) {
      await service.stop();
    },
  },
];

for (const fault of moveFaults) {
  test(
    fault.name,
    async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
      dataDirs.push(dataDir);
      // A move is the read-back seal (SEAL_FROM=rows): the memory path writes its blocks from the seal
      // threads, outside any seal's transaction, and meets these faults in the scenarios above.
      const env = {
        ...{ DATABASE_URL: pg.url, DATA_DIR: dataDir, FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS), DURABLE_TIMEOUT_MS: "5000" },
        ...{ ...SEALING, SEAL_FROM: "rows", ...fault.env },
      };
      const services = [await spawnService(env)];
      const first = services[0]!;
      let lock: BlockWrites | undefined;
      try {
        const source = await createSource(first, fault.name);
        const generators = [new Generator({ ingestUrl: first.ingestUrl, token: source.token, ...MOVE_LOAD })];
        generators[0]!.start();
        await Bun.sleep(PHASE_MS);
        // Moves have happened: the source has blocks, and a pass has ended (its counters move then).
        await sealedUnderLoad(source.id);
        await waitFor("the sealer's counter", async () => ((await metric(first, "logpond_sealer_events_sealed_total")) ?? 0) > 0, POLL);
        const sealedBefore = await metric(first, "logpond_sealer_events_sealed_total");

        // The next move stops at its first block: found in pg_stat_activity, its rows by the table it holds.
        lock = await holdBlockWrites(pg.url);
        const move = await lock.stalledMove();
        const faultAt = Date.now() / 1000;
        await fault.inject(first, move, lock);
        await lock.release();
        await backendGone(sql, move.pid);
        // The service is gone, or seals again: a pass that began after the fault has ended.
        await waitFor(
          "the service to end or its sealer to pass again",
          async () => ended(first) || ((await metric(first, "logpond_sealer_last_pass_timestamp_seconds")) ?? 0) > faultAt,
          POLL,
        );
        const exit = first.proc.signalCode === "SIGKILL" ? "killed" : (first.proc.exitCode ?? undefined);

        // The move rolled back whole: each of its rows is stored once (hot, or sealed by a later move).
        const copies = await copiesOf(sql, move.ids);
        expect(move.ids.filter((id) => copies.get(id) !== 1)).toEqual([]);

        // Load goes on, on a new logpond if the old one is gone; its sealer seals what is left.
        if (ended(first)) {
          await generators[0]!.stop();
          services.push(await spawnService(env));
          generators.push(new Generator({ ingestUrl: services[1]!.ingestUrl, token: source.token, ...MOVE_LOAD, first: generators[0]!.next }));
          generators[1]!.start();
        }
        await Bun.sleep(PHASE_MS / 2);
        for (const generator of generators) await generator.stop();
        const last = services.at(-1)!;
        await waitFor(
          "the service's sealer to seal every row of the source",
          async () =>
            (
              await sql`(select 1 from log_hot where source_id = ${source.id} limit 1) union all (select 1 from log_chunks where source_id = ${source.id} limit 1)`
            ).length === 0,
          POLL,
        );
        expect(await last.stop()).toBe(0);

        const statuses: Record<string, number> = {};
        for (const [status, n] of generators.flatMap((generator) => [...generator.statuses])) statuses[status] = (statuses[status] ?? 0) + n;
        await conserved(
          fault.name,
          source.id,
          generators.flatMap((generator) => generator.acked),
          true,
          {
            stalledMoveRows: move.ids.length,
            outcome: fault.outcome,
            sealedBefore,
            exit: exit ?? "running",
            statuses,
          },
        );
        // The fault ended the service only where it should, and as it should.
        expect(exit).toBe(fault.exit);
        if (exit === 0) expect(first.output()).toContain("nothing left behind");
      } catch (error) {
        for (const service of services) console.log(`logpond's output:\n${service.output().slice(-4000)}`);
        throw error;
      } finally {
        await lock?.release();
        for (const service of services) {
          if (!ended(service)) service.proc.kill("SIGKILL");
          await service.proc.exited;
        }
      }
    },
    FULL ? 300_000 : 60_000,
  );
}

// The embedded PostgreSQL, supervised: a logpond that runs its own (no DATABASE_URL) restarts it
// when its postmaster dies, and stops acknowledging once flushes have failed for
// INGEST_REFUSE_AFTER_FLUSH_FAILING_MS (a full disk). Each test counts what that PostgreSQL holds
// while the service still runs, once its buffer is empty.
const REFUSE_AFTER_MS = 2_000;
const SMALL_DISK_BYTES = 192 * 1024 * 1024;
const tmpfsMissing = tmpfsRefusal();
if (tmpfsMissing) console.log(`conservation: the full-disk tests are skipped: ${tmpfsMissing}`);

function spawnOwn(dataDir: string, env: Record<string, string> = {}): Promise<Service> {
  return spawnService({
    DATABASE_URL: "", // its own PostgreSQL, whatever the shell says
    DATA_DIR: dataDir,
    FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS),
    INGEST_REFUSE_AFTER_FLUSH_FAILING_MS: String(REFUSE_AFTER_MS),
    ...SEALING,
    ...env,
  });
}

/** The sum of a /metrics family's samples whose labels contain `labels` (e.g. `reason="storage_unavailable"`). */
async function metricSum(service: Service, family: string, labels = ""): Promise<number> {
  const response = await fetch(`${service.apiUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
  let sum = 0;
  for (const line of (await response.text()).split("\n")) {
    if ((line.startsWith(`${family}{`) || line.startsWith(`${family} `)) && line.includes(labels)) sum += Number(line.split(" ").at(-1));
  }
  return sum;
}

async function readyAnswer(service: Service): Promise<{ status: number; body: string }> {
  try {
    const response = await fetch(`${service.apiUrl}/ready`, { signal: AbortSignal.timeout(5_000) });
    return { status: response.status, body: await response.text() };
  } catch {
    return { status: 0, body: "" };
  }
}

/** When each log line matching `pattern` was written (its ISO time), in Date.now() terms. */
function loggedAt(output: string, pattern: RegExp): number[] {
  return output
    .split("\n")
    .filter((line) => pattern.test(line))
    .map((line) => Date.parse(line.slice(0, 24)));
}

/** Lost = 0 and duplicates = 0 in the service's own PostgreSQL, once its buffer is empty. */
async function ownConserved(label: string, service: Service, dataDir: string, sourceId: number, acked: readonly [number, number][], extra: object) {
  await waitFor("the buffer to be written", async () => (await metric(service, "logpond_buffer_events")) === 0, POLL);
  const own = postgres(embeddedUrl(service.output(), dataDir), { max: 1, onnotice: () => {} });
  try {
    const verdict = await verify(own, sourceId, acked);
    console.log(`conservation: ${label}: ${JSON.stringify({ ...verdict, ...extra })}`);
    expect(verdict.acked).toBeGreaterThan(0);
    expect(verdict.lost).toBe(0);
    expect(verdict.duplicates).toBe(0);
  } finally {
    await own.end({ timeout: 5 });
  }
}

/** Seconds of 202s after the first failed flush (its log line), up to `until`, and how many. */
function ackedWhileFailing(service: Service, generator: Generator, until: number): { seconds: number; answers: number } {
  const failedAt = loggedAt(service.output(), /flush: .* not written/)[0];
  if (failedAt === undefined) return { seconds: 0, answers: 0 };
  const late = generator.answers.filter(([at, status]) => status === "202" && at > failedAt && at < until);
  return { seconds: late.length === 0 ? 0 : (late.at(-1)![0] - failedAt) / 1000, answers: late.length };
}

test(
  "the embedded PostgreSQL killed (kill -9) under load: logpond restarts it; ingestion, the live tail, the source cache and the sealer recover without a restart of logpond",
  async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
    dataDirs.push(dataDir);
    const service = await spawnOwn(dataDir);
    let tail: SseReader | undefined;
    let own: postgres.Sql | undefined;
    try {
      const source = await createSource(service, "postgres killed");
      const other = await createSource(service, "postgres killed: its token changed by another instance");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      // A live tail open across the restarts (fed by the flusher's commits).
      const stream = await fetch(`${service.apiUrl}/api/v2/query/live-tail/stream?source_ids=${source.id}`, {
        headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` },
      });
      expect(stream.status).toBe(200);
      tail = new SseReader(stream);
      const tailed = () => tail!.events.filter((e) => e.event === "message" || e.event === "dropped").length;
      for (let i = 0; i < REPEATS; i++) {
        await Bun.sleep(PHASE_MS);
        await waitFor("a flush", async () => ((await metric(service, "logpond_flush_events_total")) ?? 0) > 0, POLL);
        const killed = embeddedPostmaster(dataDir);
        const killedAt = Date.now();
        process.kill(killed, "SIGKILL");
        await waitFor("the restart", async () => (await metric(service, "logpond_postgres_restarts_total")) === i + 1, POLL);
        await waitFor("/ready", async () => (await readyAnswer(service)).status === 200, POLL);
        expect(embeddedPostmaster(dataDir)).not.toBe(killed);
        expect(await metric(service, "logpond_postgres_up")).toBe(1);
        // Acknowledged after the restart: ingestion goes on, on the same process.
        const acked = generator.ackedEvents;
        await waitFor("202s after the restart", async () => generator.ackedEvents > acked, POLL);
        const backAt = loggedAt(service.output(), /flush: storage is back/).find((at) => at >= killedAt - 1_000);
        console.log(`conservation: kill -9 #${i + 1}: flushes succeed again ${backAt ? ((backAt - killedAt) / 1000).toFixed(1) : "?"} s after the kill`);
        // The tail goes on; the sealer passes again.
        const rows = tailed();
        await waitFor("tail rows after the restart", async () => tailed() > rows, POLL);
        const restartedAt = Date.now() / 1000;
        await waitFor(
          "a sealer pass after the restart",
          async () => ((await metric(service, "logpond_sealer_last_pass_timestamp_seconds")) ?? 0) > restartedAt,
          POLL,
        );
      }
      // The source cache hears another instance's change again (its LISTEN connection came back).
      own = postgres(embeddedUrl(service.output(), dataDir), { max: 1, onnotice: () => {} });
      const rotated = `rotated${crypto.randomUUID().replaceAll("-", "").slice(0, 17)}`;
      await own`update sources set token = ${rotated} where id = ${other.id}`;
      await own`select pg_notify('logpond_sources', ${String(other.id)})`;
      const post = (token: string) =>
        fetch(`${service.ingestUrl}/`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: "{}" });
      await waitFor("the rotated token to be taken", async () => (await post(rotated)).status === 202, POLL);
      expect((await post(other.token)).status).toBe(403);
      await Bun.sleep(PHASE_MS);
      await generator.stop();
      expect(ended(service)).toBe(false);
      expect(service.output()).toContain("exited with SIGKILL; restarting it");
      expect(service.output()).toContain("the embedded PostgreSQL is running again");
      await ownConserved("postgres killed", service, dataDir, source.id, generator.acked, {
        restarts: await metric(service, "logpond_postgres_restarts_total"),
        statuses: Object.fromEntries(generator.statuses),
      });
      expect(await service.stop()).toBe(0);
    } catch (error) {
      console.log(`logpond's output:\n${service.output().slice(-4000)}`);
      throw error;
    } finally {
      await tail?.close();
      await own?.end({ timeout: 5 });
      if (!ended(service)) service.proc.kill("SIGKILL");
      await service.proc.exited;
    }
  },
  FULL ? 300_000 : 120_000,
);

test(
  "the embedded PostgreSQL killed, then SIGTERM while it is down: drained or spilled, the spill written once at the next start",
  async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
    dataDirs.push(dataDir);
    // A stop shorter than a crash recovery: the drain usually misses it and spills.
    const env = { SHUTDOWN_TIMEOUT_MS: "1000" };
    const service = await spawnOwn(dataDir, env);
    let restarted: Service | undefined;
    try {
      const source = await createSource(service, "postgres killed, then SIGTERM");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      await waitFor("a flush", async () => ((await metric(service, "logpond_flush_events_total")) ?? 0) > 0, POLL);
      process.kill(embeddedPostmaster(dataDir), "SIGKILL");
      await waitFor("logpond to see it", async () => service.output().includes("exited with SIGKILL"), POLL);
      const code = await service.stop();
      await generator.stop();
      const output = service.output();
      expect(output).not.toContain("LOST");
      const spilled = /stopped; (\d+) events spilled to (\S+)/.exec(output);
      if (code === 0) expect(output).toContain("nothing left behind");
      else {
        expect(code).toBe(1);
        if (!spilled) throw new Error(`exit 1 with no spill count:\n${output.slice(-2000)}`);
      }

      restarted = await spawnOwn(dataDir, env);
      if (spilled) expect(restarted.output()).toMatch(new RegExp(`spill: ${spilled[1]} events of .* written to PostgreSQL`));
      await ownConserved("postgres killed, then SIGTERM", restarted, dataDir, source.id, generator.acked, {
        exit: code,
        spilled: spilled ? Number(spilled[1]) : 0,
        statuses: Object.fromEntries(generator.statuses),
      });
      expect(await restarted.stop()).toBe(0);
    } catch (error) {
      showOutputs(service, restarted);
      throw error;
    } finally {
      await reap(service, restarted);
    }
  },
  FULL ? 300_000 : 120_000,
);

test.skipIf(tmpfsMissing !== undefined)(
  "DATA_DIR's disk full under load, PostgreSQL killed while it is: 503 past the setting, no 202 while nothing can be written, recovers by itself once space is freed",
  async () => {
    const disk = mountSmallDisk(SMALL_DISK_BYTES);
    const dataDir = path.join(disk.dir, "data");
    const service = await spawnOwn(dataDir, { BUFFER_MAX_BYTES: String(16 << 20) });
    try {
      const source = await createSource(service, "disk full");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      await waitFor("a flush", async () => ((await metric(service, "logpond_flush_events_total")) ?? 0) > 0, POLL);
      disk.fill();
      await waitFor(
        "ingestion to refuse for storage",
        async () => (await metricSum(service, "logpond_ingest_requests_rejected_total", 'reason="storage_unavailable"')) > 0,
        POLL,
      );
      // PostgreSQL stopped by the full disk: it cannot start again until there is room. It may have
      // stopped already (a WAL write it cannot make is a PANIC; its postmaster.pid is then gone).
      killIfRunning(() => embeddedPostmaster(dataDir));
      await waitFor("a restart that fails for the full disk", async () => service.output().includes("could not restart the embedded PostgreSQL"), POLL);
      const down = await readyAnswer(service);
      expect(down.status).toBe(503);
      expect(down.body).toContain("could not be started");
      expect(await metric(service, "logpond_postgres_up")).toBe(0);
      // From the failed restart on nothing can be written; one setting later at most (a commit just
      // before the kill would have reset the clock), nothing may be acknowledged.
      const downFrom = loggedAt(service.output(), /could not restart the embedded PostgreSQL/)[0]!;
      const refusing = downFrom + REFUSE_AFTER_MS;
      await waitFor("answers well past the setting", async () => generator.answers.filter(([at]) => at > refusing).length > 20, POLL);
      const freedAt = Date.now();
      expect(generator.answers.filter(([at, status]) => status === "202" && at > refusing && at < freedAt)).toEqual([]);
      const window = ackedWhileFailing(service, generator, freedAt);

      disk.free();
      await waitFor("logpond to recover by itself", async () => (await readyAnswer(service)).status === 200, POLL);
      const readyAt = Date.now();
      const acked = generator.ackedEvents;
      await waitFor("202s again", async () => generator.ackedEvents > acked, POLL);
      const recovered = Date.now();
      await Bun.sleep(PHASE_MS);
      await generator.stop();
      expect(ended(service)).toBe(false);
      expect(service.output()).not.toContain("LOST");
      await ownConserved("disk full, then freed", service, dataDir, source.id, generator.acked, {
        acked202sWhileFailing: window,
        settingSeconds: REFUSE_AFTER_MS / 1000,
        readyAgainAfterFreeS: (readyAt - freedAt) / 1000,
        acceptingAgainAfterFreeS: (recovered - freedAt) / 1000,
        postgresBackAfterFreeS: ((loggedAt(service.output(), /embedded PostgreSQL is running again/).find((at) => at >= freedAt) ?? NaN) - freedAt) / 1000,
        flushesBackAfterFreeS: ((loggedAt(service.output(), /flush: storage is back/).find((at) => at >= freedAt) ?? NaN) - freedAt) / 1000,
        restarts: await metric(service, "logpond_postgres_restarts_total"),
        statuses: Object.fromEntries(generator.statuses),
      });
      expect(await service.stop()).toBe(0);
    } catch (error) {
      console.log(`logpond's output:\n${service.output().slice(-4000)}`);
      throw error;
    } finally {
      if (!ended(service)) service.proc.kill("SIGKILL");
      await service.proc.exited;
      disk.unmount();
    }
  },
  FULL ? 300_000 : 120_000,
);

test.skipIf(tmpfsMissing !== undefined)(
  "DATA_DIR's disk full and PostgreSQL stopped, then SIGTERM: the spill goes into the reserve (nothing LOST); once space is freed the next start writes it once",
  async () => {
    const disk = mountSmallDisk(SMALL_DISK_BYTES);
    const dataDir = path.join(disk.dir, "data");
    const env = { BUFFER_MAX_BYTES: String(16 << 20), SHUTDOWN_TIMEOUT_MS: "2000" };
    const service = await spawnOwn(dataDir, env);
    let restarted: Service | undefined;
    try {
      expect(existsSync(path.join(dataDir, "spill", "reserve"))).toBe(true);
      const source = await createSource(service, "disk full, then SIGTERM");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      await waitFor("a flush", async () => ((await metric(service, "logpond_flush_events_total")) ?? 0) > 0, POLL);
      disk.fill();
      await waitFor(
        "ingestion to refuse for storage",
        async () => (await metricSum(service, "logpond_ingest_requests_rejected_total", 'reason="storage_unavailable"')) > 0,
        POLL,
      );
      killIfRunning(() => embeddedPostmaster(dataDir)); // it may have stopped already, as above
      await waitFor("a restart that fails for the full disk", async () => service.output().includes("could not restart the embedded PostgreSQL"), POLL);
      const code = await service.stop();
      await generator.stop();
      const output = service.output();
      expect(output).not.toContain("LOST");
      expect(code).toBe(1);
      const spilled = /stopped; (\d+) events spilled to (\S+)/.exec(output);
      if (!spilled) throw new Error(`no spill count in the output:\n${output.slice(-2000)}`);
      expect(Number(spilled[1])).toBeGreaterThan(0);
      expect(existsSync(path.join(dataDir, "spill", "reserve"))).toBe(false); // it became the spill file

      disk.free();
      restarted = await spawnOwn(dataDir, env);
      expect(restarted.output()).toMatch(new RegExp(`spill: ${spilled[1]} events of .* written to PostgreSQL`));
      expect(existsSync(path.join(dataDir, "spill", "reserve"))).toBe(true); // kept again for the next stop
      await ownConserved("disk full, then SIGTERM", restarted, dataDir, source.id, generator.acked, {
        spilled: Number(spilled[1]),
        statuses: Object.fromEntries(generator.statuses),
      });
      expect(await restarted.stop()).toBe(0);
    } catch (error) {
      showOutputs(service, restarted);
      throw error;
    } finally {
      await reap(service, restarted);
      disk.unmount();
    }
  },
  FULL ? 300_000 : 120_000,
);

/** SIGKILL to the process `pid()` names, unless it is gone already (no pid file, or no process). */
function killIfRunning(pid: () => number): void {
  try {
    process.kill(pid(), "SIGKILL");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ESRCH") throw error;
  }
}

/** The end of each logpond's output, for a scenario that failed. */
function showOutputs(...services: (Service | undefined)[]): void {
  for (const s of services) if (s) console.log(`logpond's output:\n${s.output().slice(-4000)}`);
}

/** Every logpond of a scenario gone: one still running is killed, and each exit awaited. */
async function reap(...services: (Service | undefined)[]): Promise<void> {
  for (const s of services) {
    if (s && !ended(s)) s.proc.kill("SIGKILL");
    await s?.proc.exited;
  }
}
