// Hostile shapes under load (docs/api.md, "Limits"; docs/memory.md): logpond runs in its own process (so its RSS
// is its own) while normal clients send small numbered batches; every hostile shape of shapes.ts
// is sent meanwhile, two at a time, sent again after its Retry-After when the answer is 503 (the
// process bounds the memory of big requests in flight: two 32 MiB bodies at once may not fit).
// Each must be answered with a status the contract allows for it (a refusal with its JSON reason;
// a 503 on the way with a Retry-After; a valid shape's 202 with its events stored: real work, done
// on a decode worker while the event loop serves the others). Meanwhile every normal request is
// answered 202, normal requests keep being answered while the hostile shapes are handled, logpond's
// peak RSS stays under 1 GiB, and every event acknowledged (normal or hostile) is stored. Outcomes
// only, no wall-clock bounds (a loaded machine is slower, not wrong): the times are printed, and
// measure-shapes.ts reports them per shape. INGEST_MAX_DECOMPRESSED_BYTES is 32 MiB here to keep
// the run short; measure-shapes.ts runs the same shapes at the 100 MiB default.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { createSource, spawnService, type Service } from "../helpers/service";
import { waitFor } from "../helpers/wait";
import { rssOf } from "./measure-shapes";
import { buildShapes, type Shape } from "./shapes";

const MIB = 1024 * 1024;
const LIMIT = 32 * MIB;
const NORMAL_WORKERS = 4;

let service: Service;
let sql: postgres.Sql;
let dataDir: string;
beforeAll(async () => {
  const url = process.env.LOGPOND_TEST_DATABASE_URL!;
  sql = postgres(url, { max: 2, onnotice: () => {} });
  dataDir = mkdtempSync(path.join(tmpdir(), "logpond-hostile-load-"));
  service = await spawnService({ DATABASE_URL: url, DATA_DIR: dataDir, INGEST_MAX_DECOMPRESSED_BYTES: String(LIMIT) });
});
afterAll(async () => {
  await service.stop();
  await sql.end({ timeout: 5 });
  rmSync(dataDir, { recursive: true, force: true });
});

interface Answer {
  shape: string;
  status: number;
  /** The last attempt's time (printed only: not asserted). */
  ms: number;
  /** The slowest 503's time (0: none; printed only). */
  refusedMs: number;
  text: string;
  /** 503s answered before this one (the memory of big requests in flight is bounded: docs/memory.md). */
  retried: number;
  /** Each 503's Retry-After header, as sent. */
  retryAfters: (string | null)[];
}

/** As a client would: a 503 is sent again after its Retry-After, up to MAX_RETRIES times. */
async function send(shape: Shape, token: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, "content-type": shape.contentType };
  if (shape.encoding) headers["content-encoding"] = shape.encoding;
  let refusedMs = 0;
  const retryAfters: (string | null)[] = [];
  for (let retried = 0; ; retried++) {
    const started = performance.now();
    const response = await fetch(`${service.ingestUrl}/`, { method: "POST", headers, body: shape.body, signal: AbortSignal.timeout(30_000) });
    const text = await response.text();
    const ms = performance.now() - started;
    if (response.status !== 503 || retried === MAX_RETRIES) return { shape: shape.name, status: response.status, ms, refusedMs, text, retried, retryAfters };
    refusedMs = Math.max(refusedMs, ms);
    const retryAfter = response.headers.get("retry-after");
    retryAfters.push(retryAfter);
    // A 503 is a refusal too: its reason, and when to come back.
    expect(JSON.parse(text)).toEqual({ errors: expect.any(String) });
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    await Bun.sleep(Number(retryAfter) * 1000);
  }
}
const MAX_RETRIES = 5;

test("hostile shapes next to normal traffic: each answered as the contract says, normal traffic served, RSS < 1 GiB, nothing acknowledged lost", async () => {
  const shapes = buildShapes({ maxDecompressedBytes: LIMIT, events: 20_000_000 });
  const hostile = await createSource(service, "hostile");
  const normal = await createSource(service, "normal");
  const pid = service.proc.pid;

  let running = true;
  let peakRss = rssOf(pid);
  const sampler = (async () => {
    while (running) {
      peakRss = Math.max(peakRss, rssOf(pid));
      await Bun.sleep(5);
    }
  })();
  const latencies: number[] = []; // printed only: not asserted
  const acked: number[] = [];
  const normalStatuses = new Map<number | string, number>();
  let hostilePhase = false;
  let servedDuringHostile = 0;
  let next = 0;
  const workers = Array.from({ length: NORMAL_WORKERS }, async () => {
    while (running) {
      const first = next;
      next += 10;
      const events = Array.from({ length: 10 }, (_, i) => ({ seq: first + i, message: `normal ${first + i}` }));
      const started = performance.now();
      let status: number | string;
      try {
        const response = await fetch(`${service.ingestUrl}/`, {
          method: "POST",
          headers: { authorization: `Bearer ${normal.token}`, "content-type": "application/json" },
          body: JSON.stringify(events),
          signal: AbortSignal.timeout(30_000), // a guard against a hang, not a latency bound
        });
        await response.arrayBuffer();
        status = response.status;
        if (status === 202) for (const e of events) acked.push(e.seq);
        if (status === 202 && hostilePhase) servedDuringHostile++;
      } catch {
        status = "no answer";
      }
      latencies.push(performance.now() - started);
      normalStatuses.set(status, (normalStatuses.get(status) ?? 0) + 1);
      await Bun.sleep(5);
    }
  });

  const answers: Answer[] = [];
  try {
    await Bun.sleep(300); // normal traffic first, so it covers the whole hostile phase
    hostilePhase = true;
    for (let i = 0; i < shapes.length; i += 2) {
      answers.push(...(await Promise.all(shapes.slice(i, i + 2).map((shape) => send(shape, hostile.token)))));
    }
    hostilePhase = false;
    await Bun.sleep(300);
  } finally {
    running = false;
    await Promise.all([...workers, sampler]);
  }

  latencies.sort((a, b) => a - b);
  const p99 = latencies[Math.floor(latencies.length * 0.99)]!;
  const worstHostile = Math.max(...answers.map((a) => Math.max(a.ms, a.refusedMs)));
  for (const a of answers)
    console.log(
      `hostile-load: ${a.status} in ${Math.round(a.ms)} ms${a.retried ? ` after ${a.retried} × 503` : ""}: ${a.shape}${a.status === 202 ? "" : ` — ${a.text.slice(0, 160)}`}`,
    );
  console.log(
    `hostile-load: peaks: logpond RSS ${Math.round(peakRss / MIB)} MiB, normal traffic p99 ${Math.round(p99)} ms ` +
      `(max ${Math.round(latencies.at(-1)!)} ms, ${latencies.length} requests, ${servedDuringHostile} served during the hostile phase, ` +
      `statuses ${JSON.stringify(Object.fromEntries(normalStatuses))}), slowest hostile answer ${Math.round(worstHostile)} ms (timings informational, not asserted)`,
  );

  // Every hostile shape got a status the contract allows for it: a refusal says why (JSON
  // `errors`), a 202 has an empty body. (503s on the way were checked as they came: reason and
  // Retry-After; a shape still refused after MAX_RETRIES fails here, 503 being no shape's answer.)
  expect(answers).toHaveLength(shapes.length);
  let hostileAcked = 0;
  for (const [i, shape] of shapes.entries()) {
    const answer = answers[i]!;
    if (!shape.expect.includes(answer.status))
      throw new Error(`${shape.name}: expected ${shape.expect.join(" or ")}, got ${answer.status} ${answer.text.slice(0, 400)}`);
    if (answer.status === 202) {
      expect({ shape: shape.name, body: answer.text }).toEqual({ shape: shape.name, body: "" });
      if (shape.events === undefined) throw new Error(`${shape.name}: accepted, but shapes.ts does not say how many events it holds`);
      hostileAcked += shape.events;
    } else {
      expect({ shape: shape.name, body: JSON.parse(answer.text) }).toEqual({ shape: shape.name, body: { errors: expect.any(String) } });
    }
  }
  expect(peakRss).toBeLessThan(1024 * MIB);
  // Other clients were served: every normal request got a 202 (none refused, none unanswered),
  // and they kept being answered while the hostile shapes were handled.
  expect(latencies.length).toBeGreaterThan(0);
  expect(Object.fromEntries(normalStatuses)).toEqual({ 202: latencies.length });
  expect(servedDuringHostile).toBeGreaterThan(0);

  // Everything acknowledged is stored (a flush every FLUSH_INTERVAL_MS: wait for it).
  const { stored, hostileStored } = await waitFor(
    "every acknowledged event to be stored",
    async () => {
      const rows = await sql<{ seq: number }[]>`select (raw->>'seq')::int as seq from log_events where source_id = ${normal.id}`;
      const count = await sql<{ n: number }[]>`select count(*)::int as n from log_events where source_id = ${hostile.id}`;
      return { stored: new Set(rows.map((r) => r.seq)), hostileStored: count[0]!.n };
    },
    { timeoutMs: 30_000, intervalMs: 100, until: ({ stored, hostileStored }) => acked.every((seq) => stored.has(seq)) && hostileStored >= hostileAcked },
  );
  expect(acked.length).toBeGreaterThan(0);
  expect(acked.filter((seq) => !stored.has(seq))).toEqual([]);
  expect(stored.size).toBe(acked.length); // numbers are never reused: nothing unacknowledged either
  expect(hostileStored).toBe(hostileAcked);
}, 90_000);
