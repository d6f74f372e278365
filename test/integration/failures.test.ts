// docs/durability.md when PostgreSQL misbehaves, with the shared test PostgreSQL made to misbehave:
// a CHECK constraint refuses some events (poison isolation), a table lock makes COPY hang past
// FLUSH_TIMEOUT_MS (deadline, 503 when full, durable deadline), a lost COMMIT answer (exactly
// once), a connection reset under a transaction, and the per-source rate limit. Real HTTP, real PostgreSQL; only the lost answer is staged.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import * as net from "node:net";
import postgres from "postgres";
import { Flusher } from "../../src/buffer/flusher";
import { Ring } from "../../src/buffer/ring";
import { Metrics } from "../../src/metrics";
import { openFlushConnection, WriteError, type IdRange } from "../../src/store/copy";
import { fromText, idOf, sourceOf, tupleCount, tuplesOf } from "../../src/codec/tuples";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

const url = process.env.LOGPOND_TEST_DATABASE_URL!;
const admin = postgres(url, { max: 3, onnotice: () => {} });
afterAll(async () => {
  await admin.end({ timeout: 5 });
});

const json = (value: unknown) => JSON.stringify(value);
const count = async (sourceId: string | number) => Number((await admin`select count(*)::int as n from log_events where source_id = ${Number(sourceId)}`)[0]!.n);

/** Holds a SHARE lock on the hot tier's tables (COPY, of rows or chunks, waits for it) until the returned function is called. */
async function lockLogEvents(): Promise<() => Promise<void>> {
  const connection = await admin.reserve();
  await connection`begin`;
  await connection`lock table log_hot, log_chunks in share mode`;
  return async () => {
    await connection`rollback`;
    connection.release();
  };
}

async function flushSessions(state: string) {
  return admin`select count(*)::int as n from pg_stat_activity
               where application_name = 'logpond-flush' and state like ${state}`.then((rows) => Number(rows[0]!.n));
}

describe("poison isolation", () => {
  let lp: TestLogpond;
  beforeAll(async () => {
    // The row journal: a user's CHECK constraint on log_hot applies only to its rows (a chunk is
    // bytes PostgreSQL does not look into), and it is the most honest way to make PostgreSQL refuse
    // particular rows.
    lp = await startTestLogpond({ HOT_TIER: "rows" });
    await admin`alter table log_hot add constraint no_poison check (raw->>'poison' is null) not valid`;
  });
  afterAll(async () => {
    await admin`alter table log_hot drop constraint if exists no_poison`;
    await lp.stop();
  });

  test("refused events go to dead_letters with the error; the rest of the batch is stored", async () => {
    const source = await lp.createSource();
    const announced: number[] = [];
    const unsubscribe = lp.flusher.subscribe(({ rows }) => {
      for (const tuple of rows.flatMap(tuplesOf)) if (sourceOf(tuple) === Number(source.id)) announced.push(idOf(tuple));
    });
    const events = Array.from({ length: 100 }, (_, i) => (i === 17 || i === 63 ? { i, poison: "yes" } : { i }));
    expect((await lp.ingest(source.token, json(events.slice(0, 50)))).status).toBe(202);
    expect((await lp.ingest(source.token, json(events.slice(50)))).status).toBe(202);
    const stored = await lp.stored(source.id);
    expect(stored.map((row) => row.raw.i).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i).filter((i) => i !== 17 && i !== 63));
    const dead = await admin`select raw, sqlstate, error, dt from dead_letters where source_id = ${Number(source.id)} order by id`;
    expect(dead.map((row) => JSON.parse(row.raw).i).sort()).toEqual([17, 63]);
    for (const row of dead) {
      expect(row.sqlstate).toBe("23514");
      expect(row.error).toContain("no_poison");
      expect(Number.isNaN(Date.parse(row.dt))).toBe(false);
    }
    const metrics = await (await fetch(`${lp.apiUrl}/metrics`)).text();
    expect(metrics).toMatch(/^logpond_dead_letter_events_total 2$/m);
    // The isolated parts that were stored were announced to subscribers (with their ids); the refused events were not.
    unsubscribe();
    expect(announced.sort((a, b) => a - b)).toEqual(stored.map((row) => row.id).sort((a, b) => a - b));
  });

  test("a batch that is all poison is all dead-lettered, and the flusher goes on", async () => {
    const source = await lp.createSource();
    const bad = Array.from({ length: 8 }, (_, i) => ({ i, poison: true, text: 'quote " and \\ backslash' }));
    expect((await lp.ingest(source.token, json(bad))).status).toBe(202);
    expect(await lp.stored(source.id)).toHaveLength(0);
    const dead = await admin`select raw from dead_letters where source_id = ${Number(source.id)}`;
    expect(dead.map((row) => JSON.parse(row.raw))).toContainEqual(bad[3]!);
    expect(dead).toHaveLength(8);
    expect((await lp.ingest(source.token, json({ after: true }))).status).toBe(202);
    expect((await lp.stored(source.id)).map((row) => row.raw)).toEqual([{ after: true }]);
  });
});

describe("a COPY that hangs", () => {
  let lp: TestLogpond;
  let unlock: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    lp = await startTestLogpond({ FLUSH_TIMEOUT_MS: "300", BUFFER_MAX_EVENTS: "200", FLUSH_STREAMS: "1" });
  });
  afterEach(async () => {
    await unlock?.();
    unlock = undefined;
  });
  afterAll(async () => {
    await lp.stop();
  });

  test("is cut off at FLUSH_TIMEOUT_MS and retried; a full buffer answers 503 + Retry-After; all stored once", async () => {
    const source = await lp.createSource();
    unlock = await lockLogEvents();
    const accepted: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 40 && !refused; i++) {
      const response = await lp.ingest(source.token, json(Array.from({ length: 10 }, (_, j) => ({ n: i * 10 + j }))));
      if (response.status === 202) accepted.push(i);
      else refused = response;
    }
    expect(refused?.status).toBe(503);
    expect(refused?.headers.get("retry-after")).toBe("1");
    expect(((await refused!.json()) as any).errors).toContain("buffer is full");
    // While locked, the COPY is cut off at its deadline and retried, again and again: wait for two
    // cut-offs (how soon is not asserted).
    await waitFor("two flushes cut off", () => lp.metrics.value("logpond_flush_errors_total"), { intervalMs: 50, until: (errors) => errors >= 2 });
    expect(lp.metrics.value("logpond_flush_errors_total")).toBeGreaterThanOrEqual(2);
    expect(lp.logs.join("\n")).toContain("FLUSH_TIMEOUT_MS");
    await unlock();
    unlock = undefined;
    const stored = await lp.stored(source.id);
    expect(stored.map((row) => row.raw.n).sort((a, b) => a - b)).toEqual(accepted.flatMap((i) => Array.from({ length: 10 }, (_, j) => i * 10 + j)));
    // The sessions cut off saw their client gone once the lock was released: none is left in a transaction.
    await waitFor("no flush session left in a transaction", () => flushSessions("idle in transaction%"), { intervalMs: 50, until: (n) => n === 0 });
    expect(await flushSessions("idle in transaction%")).toBe(0);
  });
});

describe("INGEST_ACK=durable", () => {
  let lp: TestLogpond;
  let unlock: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    // Timeouts long enough that a commit on a loaded machine still makes it (the first test and the
    // last request of the second need one); the second test's table lock outlasts them whatever they are.
    lp = await startTestLogpond({ INGEST_ACK: "durable", FLUSH_INTERVAL_MS: "50", DURABLE_TIMEOUT_MS: "3000", FLUSH_TIMEOUT_MS: "1000" });
  });
  afterEach(async () => {
    await unlock?.();
    unlock = undefined;
  });
  afterAll(async () => {
    await lp.stop();
  });

  test("202 comes after the commit: the events are in PostgreSQL when the answer arrives", async () => {
    const source = await lp.createSource();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        lp.ingest(
          source.token,
          json([
            { i, a: 1 },
            { i, a: 2 },
          ]),
        ),
      ),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(202));
    expect(await count(source.id)).toBe(40); // read straight away, no flush asked for
  });

  test("storage stuck past DURABLE_TIMEOUT_MS → 503, and those events are never stored later", async () => {
    const source = await lp.createSource();
    unlock = await lockLogEvents();
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => lp.ingest(source.token, json({ late: i }))));
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("1");
      expect(((await answer.json()) as any).errors).toContain("DURABLE_TIMEOUT_MS");
    }
    await unlock();
    unlock = undefined;
    expect((await lp.ingest(source.token, json({ after: true }))).status).toBe(202);
    await lp.flusher.flush();
    expect((await lp.stored(source.id)).map((row) => row.raw)).toEqual([{ after: true }]);
    expect(lp.metrics.value("logpond_durable_timeouts_total")).toBe(5);
  });
});

describe("exactly once when a COMMIT's answer is lost", () => {
  test("the batch id is asked about before the retry; the batch is stored once", async () => {
    const connection = openFlushConnection(url, 5_000);
    let lost = 0;
    // The real connection commits; the answer is then "lost" the way a dropped socket loses it.
    const stream = {
      ...connection,
      async write(id: string, rows: readonly (Uint8Array | string)[], ids?: IdRange) {
        const commit = await connection.write(id, rows, ids);
        if (lost++ === 0) throw new WriteError("unknown", "connection lost after COMMIT was sent");
        return commit;
      },
    };
    const ring = new Ring({ maxEvents: 1000, maxBytes: 1 << 20 });
    const logs: string[] = [];
    const flusher = new Flusher(ring, [stream], { intervalMs: 10, maxEvents: 1000, eager: false, metrics: new Metrics(), log: (line) => logs.push(line) });
    const committed: { seq: number; firstId: number; lastId: number; lines: number }[] = [];
    flusher.subscribe(({ seq, firstId, lastId, rows }) => committed.push({ seq, firstId, lastId, lines: tupleCount(Buffer.concat(rows)) }));
    const sourceId = 900_000_000 + Math.floor(Math.random() * 1_000_000);
    const rows = fromText(Array.from({ length: 3 }, (_, i) => `${sourceId}\t2026-11-22T00:00:00Z\t{"i": ${i}}\n`).join(""), false);
    ring.push({ rows, events: 3, bytes: rows.length, seq: 0 });
    await flusher.flush();
    expect(lost).toBe(1); // written once: the retry found its id committed and did not write again
    expect(await count(sourceId)).toBe(3);
    // The ids the batch reserved before its first try are the ones stored, and the commit the
    // probe found is the one the live tail hears about.
    const ids = (await admin`select id from log_events where source_id = ${sourceId} order by id`).map((row) => Number(row.id));
    const [batch] = await admin`select seq, first_id, last_id from flush_batches where first_id = ${ids[0]!}`;
    expect(ids).toEqual([Number(batch!.first_id), Number(batch!.first_id) + 1, Number(batch!.last_id)]);
    expect(committed).toEqual([{ seq: Number(batch!.seq), firstId: ids[0]!, lastId: ids[2]!, lines: 3 }]);
    expect(logs.join("\n")).toContain("not known to be");
    await admin`delete from log_hot where source_id = ${sourceId}`;
    await connection.close();
  });

  test("a batch id that already committed makes a second write a no-op", async () => {
    const connection = openFlushConnection(url, 5_000);
    const sourceId = 910_000_000 + Math.floor(Math.random() * 1_000_000);
    const id = crypto.randomUUID();
    const rows = [`${sourceId}\t2026-11-22T00:00:00Z\t{"once": true}\n`];
    expect(await connection.committed(id)).toBe(false);
    await connection.write(id, rows);
    await connection.write(id, rows);
    expect(await connection.committed(id)).toEqual({ seq: expect.any(Number) });
    expect(await count(sourceId)).toBe(1);
    await admin`delete from log_hot where source_id = ${sourceId}`;
    await connection.close();
  });
});

/** A TCP proxy to the test PostgreSQL that, once armed, resets (RST) the client's connection at the next bytes the client sends (that `match`). */
async function resettingProxy(target: string): Promise<{ url: string; resetAtNextSend(match?: (bytes: Buffer) => boolean): void; close(): void }> {
  const to = new URL(target);
  let armed: ((bytes: Buffer) => boolean) | undefined;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(to.port || 5432), to.hostname);
    upstream.on("data", (bytes) => client.write(bytes));
    upstream.on("error", () => client.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => upstream.destroy());
    client.on("data", (bytes: Buffer) => {
      if (!armed?.(bytes)) return void upstream.write(bytes);
      armed = undefined;
      client.resetAndDestroy();
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const proxied = new URL(target);
  proxied.hostname = "127.0.0.1";
  proxied.port = String((server.address() as net.AddressInfo).port);
  return { url: proxied.href, resetAtNextSend: (match = () => true) => void (armed = match), close: () => void server.close() };
}

describe("a connection reset under a transaction", () => {
  test("the try fails with the reset, not its deadline (its ROLLBACK is refused with the connection), and the next try writes on a new connection", async () => {
    const proxy = await resettingProxy(url);
    // A deadline past the test's own timeout: a try that waited for it fails the test. postgres.js
    // 3.4.9, unpatched, never answered the ROLLBACK sent between the socket's error and its close.
    const connection = openFlushConnection(proxy.url, 120_000);
    try {
      const sourceId = 920_000_000 + Math.floor(Math.random() * 1_000_000);
      const line = (id: number, i: number) => `${id}\t${sourceId}\t2026-11-22T00:00:00Z\t{"i": ${i}}\n`;
      await connection.write(crypto.randomUUID(), [`${sourceId}\t2026-11-22T00:00:00Z\t{"i": 0}\n`]); // the session is up
      const first = await connection.reserveIds(1);
      const batch = crypto.randomUUID();
      proxy.resetAtNextSend(); // the BEGIN of the next try
      const failed = await connection.write(batch, [line(first, 1)], { firstId: first, lastId: first }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failed).toBeInstanceOf(WriteError);
      expect([(failed as WriteError).kind, (failed as WriteError).message]).toEqual(["failed", expect.stringContaining("ECONNRESET")]);
      expect(await connection.committed(batch)).toBe(false);
      await connection.write(batch, [line(first, 1)], { firstId: first, lastId: first });
      expect(await count(sourceId)).toBe(2);
      await admin`delete from log_hot where source_id = ${sourceId}`;
    } finally {
      await connection.close();
      proxy.close();
    }
  });
});

describe("postgres.js after a connection reset (patches/postgres+3.4.9.patch)", () => {
  test("a query sent between the socket's error and its close is refused with the connection, not left unanswered; the next one reconnects", async () => {
    const proxy = await resettingProxy(url);
    const sql = postgres(proxy.url, { max: 1, onnotice: () => {} });
    try {
      expect((await sql`select 1 as n`)[0]!.n).toBe(1);
      proxy.resetAtNextSend();
      // Sent as the reset's rejection is handled (a microtask): the socket has had its error, not yet its close.
      const after = await sql`select 2 as n`.then(
        () => "answered",
        () =>
          sql`select 3 as n`.then(
            () => "answered",
            (error: Error & { code?: string }) => error.code,
          ),
      );
      expect(after).toBe("CONNECTION_CLOSED");
      expect((await sql`select 4 as n`)[0]!.n).toBe(4);
    } finally {
      await sql.end({ timeout: 5 });
      proxy.close();
    }
  });

  test("a connection reset while it reads the array types (its first query) leaves no unhandled rejection; the query waiting for it is answered", async () => {
    const proxy = await resettingProxy(url);
    const sql = postgres(proxy.url, { max: 1, onnotice: () => {} });
    const unhandled: unknown[] = [];
    const onRejection = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      proxy.resetAtNextSend((bytes) => bytes.includes("typarray"));
      // Answered on a new connection (the reset came before its own statement was sent), or refused with the connection.
      const first = await sql`select 5 as n`.then(
        (rows) => rows[0]!.n as number,
        (error: Error & { code?: string }) => String(error.code),
      );
      expect([5, "ECONNRESET", "CONNECTION_CLOSED"]).toContain(first);
      expect((await sql`select 6 as n`)[0]!.n).toBe(6);
      await Bun.sleep(0);
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onRejection);
      await sql.end({ timeout: 5 });
      proxy.close();
    }
  });
});

describe("INGEST_RATE_LIMIT", () => {
  let lp: TestLogpond;
  beforeAll(async () => {
    lp = await startTestLogpond({ INGEST_RATE_LIMIT: "20" });
  });
  afterAll(async () => {
    await lp.stop();
  });

  test("a source over its events per second gets 429 + Retry-After; other sources are not affected", async () => {
    const [busy, quiet] = [await lp.createSource(), await lp.createSource()];
    // 1,000 events against 20 a second: 980 in debt, 49 s until the bucket is positive again, so
    // the next request is refused however slow this machine is between the two.
    const started = performance.now();
    expect((await lp.ingest(busy.token, json(Array.from({ length: 1000 }, (_, i) => ({ i }))))).status).toBe(202);
    const limited = await lp.ingest(busy.token, json({ more: 1 }));
    const elapsed = (performance.now() - started) / 1000;
    expect(limited.status).toBe(429);
    // Retry-After: whole seconds until the bucket holds a token again, ceil((1 + 980) / 20) = 50
    // at once, less what has been paid off since (it is the time left, not a fixed figure).
    const retryAfter = limited.headers.get("retry-after");
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeLessThanOrEqual(50);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(Math.ceil((1 + 980 - 20 * elapsed) / 20));
    expect(((await limited.json()) as any).errors).toContain("INGEST_RATE_LIMIT");
    expect((await lp.ingest(quiet.token, json({ quiet: 1 }))).status).toBe(202);
    expect(await lp.stored(busy.id)).toHaveLength(1000);
  });
});
