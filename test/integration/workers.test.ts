// INGEST_WORKERS=3 as users run it: `bun src/main.ts`, a supervisor and three ingest worker
// processes on one INGEST_PORT, over loopback, on a database of the test's own. Events sent from
// many connections are stored once each, read back whole by the query API and by the live tail
// (with a Last-Event-ID resume: no gap, no duplicate), counted per worker in the supervisor's
// /metrics, where the ingestion series are the workers' summed; a worker killed with SIGKILL under durable load is replaced and nothing it acknowledged
// is lost; a keep-alive connection is closed after INGEST_CONNECTION_MAX_REQUESTS answers; a
// second logpond on the same ports exits with its message; SIGTERM to the supervisor ends every
// process with exit 0; a supervisor killed outright takes its workers with it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Generator, verify } from "../helpers/conservation";
import { isAlive } from "../helpers/faults";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { createSource, SERVICE_API_TOKEN, spawnService, type Service } from "../helpers/service";
import { SseReader } from "../helpers/sse";
import { waitFor } from "../helpers/wait";

const WORKERS = 3;
const MAX_REQUESTS = 4;
const auth = { authorization: `Bearer ${SERVICE_API_TOKEN}` };

let db: ScratchDatabase;
let dataDir: string;
let service: Service;

function env(): Record<string, string> {
  return {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    INGEST_WORKERS: String(WORKERS),
    INGEST_ACK: "durable",
    INGEST_CONNECTION_MAX_REQUESTS: String(MAX_REQUESTS),
  };
}

beforeAll(async () => {
  db = await createScratchDatabase("workers");
  dataDir = mkdtempSync(path.join(tmpdir(), "logpond-workers-"));
  service = await spawnService(env(), { startTimeoutMs: 120_000 });
});
afterAll(async () => {
  if (service.proc.exitCode === null && service.proc.signalCode === null) await service.stop();
  await db.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The worker PIDs the supervisor logged at its start. */
function workerPids(output: string): number[] {
  const line = /ingest workers: \d+ processes share INGEST_PORT \d+ \(pids ([\d, ]+)\)/.exec(output);
  if (!line) throw new Error(`no worker PIDs in the log:\n${output}`);
  return line[1]!.split(", ").map(Number);
}

/** The supervisor's /metrics samples of `name`, by their `worker` label (or "" for none). */
async function metrics(name: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${service.apiUrl}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = new RegExp(`^${name}(?:\\{worker="(\\d+)"\\})? (\\S+)$`).exec(line);
    if (match) values.set(match[1] ?? "", Number(match[2]));
  }
  return values;
}

const sum = (values: Map<string, number>) => [...values.values()].reduce((a, b) => a + b, 0);

async function send(source: { token: string }, options: { workers: number; until: (g: Generator) => boolean }): Promise<Generator> {
  const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: options.workers, batch: 10, pauseMs: 0 });
  generator.start();
  await waitFor("acknowledged events", () => options.until(generator), { timeoutMs: 60_000 });
  await generator.stop();
  return generator;
}

/** Every row of the source through the query API, page after page. */
async function queried(sourceId: number): Promise<number[]> {
  const seqs: number[] = [];
  let next: string | null = `${service.apiUrl}/api/v2/query/live-tail?source_ids=${sourceId}&batch=500&order=oldest_first`;
  while (next) {
    const response = await fetch(next, { headers: auth });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { seq: number }[]; pagination: { next: string | null } };
    for (const row of body.data) seqs.push(row.seq);
    next = body.pagination.next;
  }
  return seqs;
}

async function tail(sourceId: number, headers: Record<string, string> = {}): Promise<SseReader> {
  const response = await fetch(`${service.apiUrl}/api/v2/query/live-tail/stream?source_ids=${sourceId}`, { headers: { ...auth, ...headers } });
  expect(response.status).toBe(200);
  return new SseReader(response);
}

test("events from many connections: each stored once, all queried back, tailed with no gap on resume, counted per worker", async () => {
  const source = await createSource(service, "workers-spread");
  const stream = await tail(source.id);
  const generator = await send(source, { workers: 12, until: (g) => g.ackedEvents >= 1_200 });
  expect(generator.statuses.get("202")).toBeGreaterThan(0);
  expect([...generator.statuses.keys()]).toEqual(["202"]);

  const verdict = await verify(db.sql, source.id, generator.acked);
  expect(verdict).toMatchObject({ lost: 0, duplicates: 0, storedUnacked: 0 });
  const all = Array.from({ length: verdict.acked }, (_, i) => i);
  expect((await queried(source.id)).sort((a, b) => a - b)).toEqual(all);

  // The tail (in the supervisor) reads every worker's batches back: each event once.
  await stream.until(() => stream.rows().length >= verdict.acked, 30_000, "every event in the tail");
  const tailed = stream.rows().map((row) => row.seq as number);
  expect([...tailed].sort((a, b) => a - b)).toEqual(all);
  // Resumed from the middle: exactly what came after the cut, in the same order.
  const messages = stream.events.filter((event) => event.event === "message");
  const cut = Math.floor(messages.length / 2);
  await stream.close();
  const resumed = await tail(source.id, { "last-event-id": messages[cut]!.id! });
  const rest = tailed.slice(cut + 1);
  await resumed.until(() => resumed.rows().length >= rest.length, 30_000, "the rest after the cut");
  expect(resumed.rows().map((row) => row.seq)).toEqual(rest);
  await resumed.close();

  // Reported every second by each worker: the counts add up, and the connections spread.
  const events = await waitFor("every worker's report", () => metrics("logpond_worker_events_total"), { until: (m) => sum(m) >= verdict.acked });
  expect(sum(events)).toBe(verdict.acked);
  expect([...events.keys()].sort()).toEqual(["1", "2", "3"]);
  expect([...events.values()].filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
  expect(sum(await metrics("logpond_worker_requests_total"))).toBe(generator.statuses.get("202")!);
  // The ingestion series by protocol and source, as one process shows them: summed over the workers.
  const scrape = await (await fetch(`${service.apiUrl}/metrics`)).text();
  const sample = (name: string) => scrape.split("\n").find((line) => line.startsWith(`${name}{protocol="better_stack",source_id="${source.id}"} `));
  expect(sample("logpond_ingest_events_received_total")).toBe(
    `logpond_ingest_events_received_total{protocol="better_stack",source_id="${source.id}"} ${verdict.acked}`,
  );
  const timed = scrape.split("\n").find((line) => line.startsWith(`logpond_ingest_request_duration_seconds_count{protocol="better_stack"} `));
  expect(Number(timed?.split(" ")[1])).toBe(generator.statuses.get("202")!); // every request so far was this test's, all answered 202
  expect(scrape.match(/^# TYPE logpond_ingest_request_duration_seconds histogram$/gm)).toHaveLength(1);
  // The flushes are the workers' too: every event acknowledged was written once, by one of them,
  // and the supervisor's own series (its buffer takes only a spill replay) is added to theirs.
  const flushed = await waitFor("the workers' flush counts", () => metrics("logpond_flush_events_total"), { until: (m) => sum(m) >= verdict.acked });
  expect(sum(flushed)).toBe(verdict.acked);
  const again = await (await fetch(`${service.apiUrl}/metrics`)).text();
  expect(again.match(/^# TYPE logpond_flush_events_total counter$/gm)).toHaveLength(1);
  expect(again.match(/^# TYPE logpond_buffer_events gauge$/gm)).toHaveLength(1);
  expect(again.match(/^logpond_flush_events_total /gm)).toHaveLength(1);
});

test("a keep-alive connection is closed after INGEST_CONNECTION_MAX_REQUESTS answers", async () => {
  const { port } = new URL(service.ingestUrl);
  const socket = connect(Number(port), "127.0.0.1");
  let received = "";
  let closed = false;
  socket.on("data", (chunk) => (received += chunk.toString()));
  socket.on("close", () => (closed = true));
  socket.on("error", () => {});
  const answers = () => received.split("HTTP/1.1 ").length - 1;
  for (let i = 1; i <= MAX_REQUESTS; i++) {
    // A bare GET /health: answered by whichever worker holds the connection.
    socket.write(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    await waitFor(`answer ${i}`, () => answers() >= i);
    if (i < MAX_REQUESTS) expect(closed).toBe(false);
  }
  await waitFor("the connection to close", () => closed);
  const heads = received.split("HTTP/1.1 ").slice(1);
  expect(heads.map((head) => /^connection: close\r$/im.test(head.split("\r\n\r\n")[0]!))).toEqual([false, false, false, true]);
});

test("a worker killed with SIGKILL under durable load is replaced; what it acknowledged is stored", async () => {
  const source = await createSource(service, "workers-kill");
  const [victim] = workerPids(service.output());
  const generator = new Generator({ ingestUrl: service.ingestUrl, token: source.token, workers: 9, batch: 10, pauseMs: 0 });
  generator.start();
  await waitFor("load before the kill", () => generator.ackedEvents >= 300, { timeoutMs: 60_000 });
  process.kill(victim!, "SIGKILL");
  await waitFor(
    "the worker to be replaced",
    async () => (await metrics("logpond_worker_restarts_total")).get("") === 1 && (await metrics("logpond_workers")).get("") === WORKERS,
    {
      timeoutMs: 60_000,
      intervalMs: 100,
    },
  );
  const acked = generator.ackedEvents;
  await waitFor("load after the replacement", () => generator.ackedEvents >= acked + 300, { timeoutMs: 60_000 });
  await generator.stop();
  expect(isAlive(victim!)).toBe(false);
  expect(service.output()).toMatch(/ingest worker 1 exited \(SIGKILL\)/);
  const verdict = await verify(db.sql, source.id, generator.acked);
  console.log(`workers: kill -9 of a worker: ${JSON.stringify({ ...verdict, statuses: Object.fromEntries(generator.statuses) })}`);
  expect(verdict.lost).toBe(0);
  expect(verdict.duplicates).toBe(0);
});

test("a second logpond on the same ports exits with the message, and takes no traffic", async () => {
  const other = mkdtempSync(path.join(tmpdir(), "logpond-workers-second-"));
  try {
    const proc = Bun.spawn([process.execPath, path.join(import.meta.dir, "..", "..", "src", "main.ts")], {
      env: {
        ...process.env,
        ...env(),
        DATA_DIR: other,
        API_PORT: new URL(service.apiUrl).port,
        INGEST_PORT: new URL(service.ingestUrl).port,
        API_TOKEN: SERVICE_API_TOKEN,
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await proc.exited).toBe(1);
    expect(await new Response(proc.stderr).text()).toContain("already in use (another logpond, or another program, listens there)");
  } finally {
    rmSync(other, { recursive: true, force: true });
  }
});

test("SIGTERM to the supervisor: every worker drains and exits, then the supervisor, exit 0", async () => {
  const running = () => {
    const restarted = [...service.output().matchAll(/ingest worker \d+ started again \(pid (\d+)\)/g)].map((m) => Number(m[1]));
    return [...workerPids(service.output()), ...restarted].filter(isAlive);
  };
  const pids = await waitFor("every worker's PID in the log", running, { until: (found) => found.length === WORKERS });
  expect(await service.stop()).toBe(0);
  expect(pids.filter(isAlive)).toEqual([]);
  expect(service.output()).toContain("stopped; nothing left behind");
});

test("workers whose supervisor is killed outright exit too", async () => {
  const again = await spawnService(env(), { startTimeoutMs: 120_000 });
  const pids = workerPids(again.output());
  again.proc.kill("SIGKILL");
  await again.proc.exited;
  await waitFor("the orphaned workers to exit", () => pids.filter(isAlive), { until: (left) => left.length === 0, timeoutMs: 30_000 });
});
