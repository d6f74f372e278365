// While storage is down: the flusher's measure of how long flushes have failed (buffer/batch.ts,
// flusher.ts) on a clock the test drives, against a stream whose answers the test gives; the
// ingestion refusal it leads to (ingest/accept.ts), in both acknowledgement modes; the spill
// reserve a stop's spill is written over (buffer/reserve.ts, spill.ts). No PostgreSQL here: the
// killed and full-disk PostgreSQL are test/reliability/conservation.test.ts's.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { Flusher, type Stream } from "../../src/buffer/flusher";
import { keepReserve, spillReserveBytes } from "../../src/buffer/reserve";
import { Ring } from "../../src/buffer/ring";
import { ringMaxBytes } from "../../src/memory/costs";
import { readSpill, spillFolder, writeSpill } from "../../src/buffer/spill";
import { TUPLE_HEAD, tupleHead, writeTuple } from "../../src/codec/tuples";
import { microsOfMillis } from "../../src/codec/time";
import { loadConfig } from "../../src/config";
import { acceptRequest, ingestLimits, type IngestDeps } from "../../src/ingest/accept";
import { DecodeWorker } from "../../src/ingest/offload";
import { RateLimiter } from "../../src/ingest/ratelimit";
import { Gate } from "../../src/memory/gate";
import { GcPacer } from "../../src/memory/gcpace";
import { ingestSeries } from "../../src/ingest/series";
import { Metrics } from "../../src/metrics";
import { SourceCache } from "../../src/sources/cache";
import { WriteError, type Commit } from "../../src/store/copy";
import type { Clock } from "../../src/timers";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

class TestClock implements Clock {
  time = 1_000;
  private timers: { at: number; fn: () => void }[] = [];
  now(): number {
    return this.time;
  }
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.time + ms, fn };
    this.timers.push(timer);
    return () => (this.timers = this.timers.filter((t) => t !== timer));
  }
  /** Moves the time on, firing the timers that fall due. */
  advance(ms: number): void {
    this.time += ms;
    const due = this.timers.filter((t) => t.at <= this.time);
    this.timers = this.timers.filter((t) => t.at > this.time);
    for (const timer of due) timer.fn();
  }
  get waiting(): number {
    return this.timers.length;
  }
}

/** A stream whose every call waits for the test's answer. */
class HeldStream implements Stream {
  readonly calls: { method: string; resolve: (value: unknown) => void; reject: (error: WriteError) => void }[] = [];
  private call<T>(method: string): Promise<T> {
    return new Promise<T>((resolve, reject) => this.calls.push({ method, resolve: resolve as (value: unknown) => void, reject }));
  }
  reserveIds = () => this.call<number>("reserveIds");
  write = () => this.call<Commit>("write");
  committed = () => this.call<Commit | false>("committed");
  deadLetter = () => this.call<void>("deadLetter");
  forgetBatches = () => Promise.resolve();
  /** Answers the oldest call. */
  answer(value: unknown): void {
    this.calls.shift()!.resolve(value);
  }
  fail(message: string): void {
    this.calls.shift()!.reject(new WriteError("failed", message));
  }
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function rows(count: number, json = "{}"): Buffer {
  const buffer = Buffer.allocUnsafe(count * (TUPLE_HEAD + json.length));
  let at = 0;
  for (let i = 0; i < count; i++) at += writeTuple(buffer, at, tupleHead(1), microsOfMillis(Date.UTC(2026, 0, 1)), json);
  return buffer.subarray(0, at);
}

function flusherOn(stream: HeldStream, clock: TestClock) {
  const ring = new Ring({ maxEvents: 1_000, maxBytes: 1 << 20 });
  const flusher = new Flusher(ring, [stream], { intervalMs: 200, maxEvents: 100, eager: false, metrics: new Metrics(), log: () => {}, clock, random: () => 0 });
  return { ring, flusher };
}

test("flushes failing are counted from the start of the first failed try, and no longer once one commits", async () => {
  const clock = new TestClock();
  const stream = new HeldStream();
  const { ring, flusher } = flusherOn(stream, clock);
  expect(flusher.failingMs()).toBe(0);
  ring.append(rows(3), 3);
  flusher.tick();
  await settle();
  // The try hangs (a paused server) and fails at its deadline: failing since it began, not since it ended.
  const began = clock.now();
  clock.advance(1_000);
  stream.fail("no answer within 1000 ms");
  await settle();
  expect(flusher.failingMs()).toBe(clock.now() - began);
  clock.advance(300); // the backoff's wait, then a second try that fails at once
  await settle();
  stream.fail("connection refused");
  await settle();
  expect(flusher.failingMs()).toBe(1_300);
  clock.advance(5_000);
  await settle();
  expect(flusher.failingMs()).toBe(6_300);
  // The next try commits: storage works again.
  stream.answer(1); // reserveIds
  await settle();
  stream.answer({ seq: 1 }); // write
  await settle();
  expect(flusher.failingMs()).toBe(0);
  expect(ring.heldEvents).toBe(0);
});

test("a commit on another stream while a try hangs: failing counts from that commit, not from the try's start", async () => {
  const clock = new TestClock();
  const [hung, working] = [new HeldStream(), new HeldStream()];
  const ring = new Ring({ maxEvents: 1_000, maxBytes: 1 << 20 });
  const flusher = new Flusher(ring, [hung, working], {
    intervalMs: 200,
    maxEvents: 2,
    eager: false,
    metrics: new Metrics(),
    log: () => {},
    clock,
    random: () => 0,
  });
  ring.push({ rows: rows(2), events: 2, bytes: rows(2).length, seq: 0 });
  ring.push({ rows: rows(2), events: 2, bytes: rows(2).length, seq: 0 });
  flusher.tick(); // one batch each
  await settle();
  expect([hung.calls.length, working.calls.length]).toEqual([1, 1]);
  clock.advance(400);
  working.answer(1);
  await settle();
  working.answer({ seq: 1 }); // committed at 400 ms
  await settle();
  clock.advance(600);
  hung.fail("no answer within 1000 ms");
  await settle();
  expect(flusher.failingMs()).toBe(600);
});

test("retryNow ends a backoff at once (the embedded PostgreSQL was started again)", async () => {
  const clock = new TestClock();
  const stream = new HeldStream();
  const { ring, flusher } = flusherOn(stream, clock);
  ring.append(rows(2), 2);
  flusher.tick();
  await settle();
  stream.fail("connection refused");
  await settle();
  expect(stream.calls).toEqual([]); // waiting out its backoff
  expect(clock.waiting).toBe(1);
  flusher.retryNow();
  await settle();
  expect(stream.calls.map((call) => call.method)).toEqual(["reserveIds"]); // tried again, no time passed
  expect(clock.waiting).toBe(0);
  stream.answer(1);
  await settle();
  stream.answer({ seq: 1 });
  await settle();
  expect(flusher.failingMs()).toBe(0);
});

function deps(ackMode: "buffered" | "durable", storageDown: () => boolean, registry = new Metrics()): IngestDeps {
  const cache = new SourceCache();
  cache.put({ id: 1, token: "source-token", ingestingPaused: false, logsRetention: 30 });
  return {
    cache,
    ring: new Ring({ maxEvents: 1_000_000, maxBytes: 1 << 20 }),
    flusher: { pushed() {} } as unknown as Flusher,
    metrics: ingestSeries(registry),
    limits: ingestLimits(loadConfig({}), 1 << 20),
    gate: new Gate({ budgetBytes: 512 << 20 }),
    decodeWorker: new DecodeWorker(),
    gcPacer: new GcPacer(Infinity),
    ackMode,
    durableTimeoutMs: 10_000,
    rateLimiter: new RateLimiter(0),
    accepting: () => true,
    storageDown,
    eventTimes: { maxFutureMs: 86_400_000, retentionGraceMs: 3_600_000 },
  };
}

const post = () =>
  new Request("http://logpond/", { method: "POST", headers: { authorization: "Bearer source-token", "content-type": "application/json" }, body: '{"a":1}' });

test.each(["buffered", "durable"] as const)(
  "%s: storage failing past the setting → 503 storage_unavailable with Retry-After, nothing buffered",
  async (mode) => {
    let down = true;
    const registry = new Metrics();
    const d = deps(mode, () => down, registry);
    const refused = await acceptRequest(post(), d);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { errors: string }).errors).toContain("INGEST_REFUSE_AFTER_FLUSH_FAILING_MS");
    expect(d.ring.heldEvents).toBe(0);
    expect(registry.render()).toContain('reason="storage_unavailable"} 1');
    down = false;
    if (mode === "buffered") expect((await acceptRequest(post(), d)).status).toBe(202);
  },
);

test("the spill reserve: made to its size once, resized; a spill is written over it and is exactly its entries", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-reserve-"));
  dirs.push(dataDir);
  const folder = spillFolder(dataDir);
  const reserve = path.join(folder, "reserve");
  expect(keepReserve(folder, 300_000)).toBe(300_000);
  expect(statSync(reserve).size).toBe(300_000);
  expect(keepReserve(folder, 200_000)).toBe(200_000);
  expect(statSync(reserve).size).toBe(200_000);

  const entries = [
    { batchId: crypto.randomUUID(), events: 3, rows: [rows(3)] },
    { batchId: crypto.randomUUID(), events: 2, rows: [rows(2)], ids: { firstId: 10, lastId: 11 } },
  ];
  const file = writeSpill(dataDir, entries)!;
  expect(existsSync(reserve)).toBe(false); // it became the spill file
  expect(readdirSync(folder)).toEqual([path.basename(file)]);
  const read = readSpill(file); // cut to its length: no reserve bytes after the last entry
  expect(read.map((e) => [e.batchId, e.events, Buffer.from(e.rows[0]!).equals(Buffer.from(entries[read.indexOf(e)]!.rows[0]!)), e.ids])).toEqual([
    [entries[0]!.batchId, 3, true, undefined],
    [entries[1]!.batchId, 2, true, { firstId: 10, lastId: 11 }],
  ]);
  // Without a reserve, a spill file is written as before.
  expect(readSpill(writeSpill(dataDir, entries.slice(0, 1))!)).toHaveLength(1);
});

test("the reserve holds the spill of a full buffer: its rows, and a head line per entry at the most entries", () => {
  const config = loadConfig({ BUFFER_MAX_BYTES: String(12 << 20), BUFFER_MAX_EVENTS: "1000", FLUSH_MAX_EVENTS: "100", FLUSH_STREAMS: "1" });
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-reserve-"));
  dirs.push(dataDir);
  const ring = new Ring({ maxEvents: config.bufferMaxEvents, maxBytes: ringMaxBytes(config.bufferMaxBytes) });
  const flusher = new Flusher(ring, [new HeldStream()], {
    intervalMs: 200,
    maxEvents: config.flushMaxEvents,
    eager: false,
    metrics: new Metrics(),
    log: () => {},
  });
  // Chunks of 51 events: no two make a batch, so each is an entry of its own (the most entries);
  // 19 of them take nearly all the bytes, one event more the rest to the last byte.
  const chunk = rows(51, "x".repeat(Math.floor(ring.maxBytes / (19 * 51)) - TUPLE_HEAD));
  while (ring.append(chunk, 51));
  expect(ring.append(rows(1, "x".repeat(ring.maxBytes - ring.heldBytes - TUPLE_HEAD)), 1)).toBe(true);
  expect(ring.heldBytes).toBe(ringMaxBytes(config.bufferMaxBytes));
  expect(ring.heldEvents).toBeLessThanOrEqual(config.bufferMaxEvents);
  const file = writeSpill(dataDir, flusher.handOver())!;
  expect(statSync(file).size).toBeLessThanOrEqual(spillReserveBytes(config));
});

test("a token an ingest process must read from PostgreSQL while PostgreSQL is away: 503 storage_unavailable, not a 500, nothing buffered", async () => {
  const d = deps("buffered", () => false);
  // The database read of a token the cache does not know fails (PostgreSQL away).
  d.cache.readMissing({
    select: () => ({ from: () => ({ where: () => Promise.reject(new Error("connect ECONNREFUSED")) }) }),
  } as unknown as Parameters<SourceCache["readMissing"]>[0]);
  const request = new Request("http://logpond/", {
    method: "POST",
    headers: { authorization: "Bearer unknown-token", "content-type": "application/json" },
    body: '{"a":1}',
  });
  const refused = await acceptRequest(request, d);
  expect(refused.status).toBe(503);
  expect(refused.headers.get("retry-after")).not.toBeNull();
  expect(await refused.text()).toContain("cannot be checked now");
  expect(d.ring.heldEvents).toBe(0);
});
