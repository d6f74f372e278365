// Conservation under faults (CONTRACT §4): numbered events are sent to a running logpond while
// its PostgreSQL is restarted (fast, immediate), paused past FLUSH_TIMEOUT_MS, or logpond itself
// gets SIGTERM (buffered) or kill -9 (durable), or SIGTERM while PostgreSQL is down (the spill file,
// replayed by the next start). Every scenario must end with lost = 0 and duplicates = 0. Short form here (npm test); `npm run test:conservation` runs the full form:
// longer load, the fault repeated, more senders.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { Generator, verify } from "../helpers/conservation";
import { startFaultyPostgres, type FaultyPostgres } from "../helpers/faults";
import { createSource, spawnService, type Service } from "../helpers/service";

const FULL = process.env.RELIABILITY === "full";
const PHASE_MS = FULL ? 6_000 : 1_200; // load before the fault, and again after it
const REPEATS = FULL ? 3 : 1;
const WORKERS = FULL ? 16 : 6;
const FLUSH_TIMEOUT_MS = 1_000;

let pg: FaultyPostgres;
let sql: postgres.Sql;
const dataDirs: string[] = [];
beforeAll(async () => {
  pg = await startFaultyPostgres("faults");
  sql = postgres(pg.url, { max: 2, onnotice: () => {} });
  // Each run starts empty (the service applies the migrations), so the cluster does not grow run after run.
  await sql.unsafe("drop schema if exists public cascade; create schema public; drop schema if exists drizzle cascade;");
});
afterAll(async () => {
  await sql.end({ timeout: 5 });
  await pg.stop();
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

interface Scenario {
  name: string;
  env?: Record<string, string>;
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

const scenarios: Scenario[] = [
  {
    name: "PostgreSQL restarted with a fast shutdown under load",
    async fault() {
      await pg.restart("fast", 300);
    },
  },
  {
    name: "PostgreSQL restarted with an immediate shutdown (crash recovery) under load",
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
        const failing = Date.now() + 20_000;
        let status = await ready(service);
        while (status !== 503 && Date.now() < failing) {
          await Bun.sleep(100);
          status = await ready(service);
        }
        expect(status).toBe(503);
      } finally {
        pg.resume();
      }
      const deadline = Date.now() + 20_000;
      let status = await ready(service);
      while (status !== 200 && Date.now() < deadline) {
        await Bun.sleep(100);
        status = await ready(service);
      }
      expect(status).toBe(200);
    },
  },
  {
    name: "logpond gets SIGTERM under load (buffered): drains and exits 0",
    env: { FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000000" },
    exit: 0,
    async fault(service) {
      service.proc.kill("SIGTERM");
      await service.proc.exited;
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
];

test(
  "PostgreSQL stopped, then SIGTERM: exits 1 saying how many were spilled; the next start writes them once",
  async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
    dataDirs.push(dataDir);
    const env = { DATABASE_URL: pg.url, DATA_DIR: dataDir, FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS), SHUTDOWN_TIMEOUT_MS: "3000" };
    const service = await spawnService(env);
    let restarted: Service | undefined;
    try {
      const source = await createSource(service, "spill");
      const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
      generator.start();
      await Bun.sleep(PHASE_MS);
      // PostgreSQL goes away for longer than the whole shutdown; the load goes on meanwhile.
      const down = pg.restart("fast", 8_000);
      await Bun.sleep(1_000);
      service.proc.kill("SIGTERM");
      const code = await service.proc.exited;
      await generator.stop();
      expect(code).toBe(1);
      const spilled = /stopped; (\d+) events spilled to (\S+)/.exec(service.output());
      if (!spilled) throw new Error(`no spill count in the output:\n${service.output().slice(-2000)}`);
      expect(Number(spilled[1])).toBeGreaterThan(0);
      await down;

      restarted = await spawnService(env);
      expect(restarted.output()).toMatch(new RegExp(`spill: ${spilled[1]} events of .* written to PostgreSQL`));
      const verdict = await verify(sql, source.id, generator.acked);
      console.log(`conservation: spill: ${JSON.stringify({ ...verdict, spilled: Number(spilled[1]), statuses: Object.fromEntries(generator.statuses) })}`);
      expect(verdict.acked).toBeGreaterThan(0);
      expect(verdict.lost).toBe(0);
      expect(verdict.duplicates).toBe(0);
      restarted.proc.kill("SIGTERM");
      expect(await restarted.proc.exited).toBe(0);
    } finally {
      for (const s of [service, restarted]) {
        if (s && s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill("SIGKILL");
        await s?.proc.exited;
      }
    }
  },
  FULL ? 300_000 : 60_000,
);

for (const scenario of scenarios) {
  test(
    scenario.name,
    async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-conservation-"));
      dataDirs.push(dataDir);
      const service = await spawnService({
        DATABASE_URL: pg.url,
        DATA_DIR: dataDir,
        FLUSH_TIMEOUT_MS: String(FLUSH_TIMEOUT_MS),
        DURABLE_TIMEOUT_MS: "5000",
        ...scenario.env,
      });
      try {
        const source = await createSource(service, scenario.name);
        const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: WORKERS, batch: 20, pauseMs: 2 });
        generator.start();
        const repeats = scenario.exit === undefined ? REPEATS : 1;
        for (let i = 0; i < repeats; i++) {
          await Bun.sleep(PHASE_MS);
          await scenario.fault(service);
        }
        if (scenario.exit === undefined) await Bun.sleep(PHASE_MS);
        await generator.stop();

        if (scenario.exit === undefined) {
          service.proc.kill("SIGTERM");
          const code = await service.proc.exited;
          if (code !== 0) console.log(`logpond exited ${code}; its last output:\n${service.output().slice(-3000)}`);
          expect(code).toBe(0);
        } else if (scenario.exit === 0) {
          expect(service.proc.exitCode).toBe(0);
          expect(service.output()).toContain("nothing left behind");
        } else {
          expect(service.proc.signalCode).toBe("SIGKILL");
        }

        const verdict = await verify(sql, source.id, generator.acked);
        const statuses = Object.fromEntries(generator.statuses);
        console.log(`conservation: ${scenario.name}: ${JSON.stringify({ ...verdict, faults: repeats, statuses })}`);
        expect(verdict.acked).toBeGreaterThan(0);
        expect(verdict.lost).toBe(0);
        expect(verdict.duplicates).toBe(0);
      } finally {
        if (service.proc.exitCode === null && service.proc.signalCode === null) service.proc.kill("SIGKILL");
        await service.proc.exited;
      }
    },
    FULL ? 300_000 : 60_000,
  );
}
