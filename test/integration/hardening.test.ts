// Hardening, the parts a single request or a single instance shows: CORS on ingestion (a real
// preflight), PUBLIC_INGEST_URL in ingesting_host, 413 for what can never fit (never 503), the
// source cache under a token rotation racing a reconnect's full reload, and the spill file's
// exactly-once replay against the flush_batches claim. Real HTTP, real PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import * as path from "node:path";
import { Packr } from "msgpackr";
import { RING_COST_FACTOR, ringMaxBytes } from "../../src/memory/costs";
import { pendingSpills, replaySpills, spillFolder, writeSpill } from "../../src/buffer/spill";
import { loadConfig } from "../../src/config";
import { SourceCache, type SourceRow } from "../../src/sources/cache";
import { openFlushConnection } from "../../src/store/copy";
import { fromText } from "../../src/codec/tuples";
import type { Db } from "../../src/store/db";
import { publicIngestHost } from "../../src/server";
import { Metrics } from "../../src/metrics";
import { startRetention } from "../../src/retention/scheduler";
import { connect } from "node:net";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond({ PUBLIC_INGEST_URL: "https://logs.example.com/" });
});
afterAll(async () => {
  await lp.stop();
});

describe("CORS on the ingestion listener", () => {
  test("a browser's preflight for POST / with Authorization and Content-Type → 204 with the allow headers", async () => {
    const response = await fetch(`${lp.ingestUrl}/`, {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example.org",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(response.headers.get("access-control-allow-methods")).toBe("POST, OPTIONS");
    expect(response.headers.get("access-control-allow-headers")).toBe("Authorization, Content-Type, Content-Encoding");
    expect(Number(response.headers.get("access-control-max-age"))).toBeGreaterThan(0);
  });

  test("202 and every refusal carry Access-Control-Allow-Origin: *", async () => {
    const source = await lp.createSource();
    // @logtail/browser's request: JSON array, Bearer token, from another origin.
    const headers = { origin: "https://app.example.org", "content-type": "application/json" };
    const ok = await fetch(`${lp.ingestUrl}/`, {
      method: "POST",
      headers: { ...headers, authorization: `Bearer ${source.token}` },
      body: '[{"message":"from a browser","level":"info"}]',
    });
    expect(ok.status).toBe(202);
    expect(ok.headers.get("access-control-allow-origin")).toBe("*");
    for (const [authorization, status] of [
      ["", 401],
      ["Bearer nope", 403],
    ] as const) {
      const refused = await fetch(`${lp.ingestUrl}/`, { method: "POST", headers: { ...headers, authorization }, body: "{}" });
      expect(refused.status).toBe(status);
      expect(refused.headers.get("access-control-allow-origin")).toBe("*");
    }
    const bad = await fetch(`${lp.ingestUrl}/`, { method: "POST", headers: { ...headers, authorization: `Bearer ${source.token}` }, body: "[1" });
    expect(bad.status).toBe(406);
    expect(bad.headers.get("access-control-allow-origin")).toBe("*");
  });
});

describe("ingesting_host", () => {
  test("PUBLIC_INGEST_URL, without its scheme", async () => {
    const source = await lp.createSource();
    expect(source.attributes.ingesting_host).toBe("logs.example.com");
  });

  test("unset: HOST:port, where a wildcard bind shows this machine's hostname, not 0.0.0.0", () => {
    expect(publicIngestHost(loadConfig({ HOST: "0.0.0.0" }), 3001)).toBe(`${hostname()}:3001`);
    expect(publicIngestHost(loadConfig({ HOST: "::" }), 3001)).toBe(`${hostname()}:3001`);
    expect(publicIngestHost(loadConfig({ HOST: "::1" }), 3001)).toBe("[::1]:3001");
    expect(publicIngestHost(loadConfig({ HOST: "10.0.0.5", PUBLIC_INGEST_URL: "http://logs.internal:8080/ingest/" }), 3001)).toBe("logs.internal:8080/ingest");
  });

  test("a PUBLIC_INGEST_URL that is not an http(s) URL stops the start", () => {
    expect(() => loadConfig({ PUBLIC_INGEST_URL: "logs.example.com" })).toThrow(/PUBLIC_INGEST_URL/);
    expect(() => loadConfig({ PUBLIC_INGEST_URL: "ftp://logs.example.com" })).toThrow(/http/);
    expect(() => loadConfig({ PUBLIC_INGEST_URL: "https://logs.example.com/?token=x" })).toThrow(/query/);
    expect(() => loadConfig({ PUBLIC_INGEST_URL: "https://logs.example.com/#top" })).toThrow(/fragment/);
    expect(() => loadConfig({ PUBLIC_INGEST_URL: "https://user:pw@logs.example.com" })).toThrow(/credentials/);
  });
});

describe("bounded stop", () => {
  test("a slow upload does not hold the stop (cut off after SHUTDOWN_TIMEOUT_MS / 3, never acknowledged); what was acknowledged is stored", async () => {
    const slow = await startTestLogpond({ SHUTDOWN_TIMEOUT_MS: "2000" });
    const source = await slow.createSource();
    expect((await slow.ingest(source.token, '{"before":"stop"}')).status).toBe(202);
    const socket = connect({ host: "127.0.0.1", port: Number(new URL(slow.ingestUrl).port) });
    await new Promise((resolve) => socket.on("connect", resolve));
    socket.on("error", () => {});
    // Declares 100 bytes and sends 10: a client that never finishes its upload.
    socket.write(
      `POST / HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${source.token}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"slow":12`,
    );
    let answer = "";
    let closed = false;
    socket.on("data", (part: Buffer) => (answer += part.toString()));
    socket.on("close", () => (closed = true));
    // Wait until the request is in the handler, reading its body: its declared length is charged.
    const inFlight = async () => Number(/^logpond_ingest_inflight_bytes (\d+)$/m.exec(await (await slow.api("GET", "/metrics")).text())![1]);
    await waitFor("the upload's declared length to be charged", inFlight, { intervalMs: 10, until: (bytes) => bytes > 0 });
    expect(await inFlight()).toBeGreaterThan(0);
    // The upload never finishes, so a stop that waited for it would never end: stop() ending at
    // all is the bound. The guard (ten times SHUTDOWN_TIMEOUT_MS) only turns a hang into a failure.
    const stopping = slow.stop();
    const stopped = await Promise.race([stopping.then(() => true), Bun.sleep(20_000).then(() => false)]);
    expect(stopped).toBe(true);
    expect(await stopping).toBe(true); // drained: nothing acknowledged was left behind
    // The slow upload was cut off (its connection closed), never acknowledged.
    await waitFor("the slow upload's connection to close", () => closed, { intervalMs: 10 });
    expect(closed).toBe(true);
    expect(answer).not.toContain(" 202 ");
    socket.destroy();
    expect(slow.logs.join("\n")).toContain("requests still uploading were cut off");
    const rows = await lp.sql<{ raw: unknown }[]>`select raw from log_events where source_id = ${Number(source.id)}`;
    expect(rows.map((r) => r.raw)).toEqual([{ before: "stop" }]);
  });
});

describe("retention at shutdown", () => {
  test("stop() ends a sweep waiting on a flush that never comes (a halted drain)", async () => {
    const sourceId = 900_000_000 + Math.floor(Math.random() * 1_000_000);
    await lp.sql`insert into source_deletions (source_id) values (${sourceId})`;
    let reached = false;
    const retention = startRetention(
      { retentionSweepIntervalMs: 3_600_000 },
      {
        sql: lp.sql,
        flush: () => {
          reached = true;
          return new Promise<void>(() => {}); // the flusher gave up: this flush never resolves
        },
        metrics: new Metrics(),
        log: () => {},
      },
    );
    try {
      // Another instance's sweep may hold the cross-instance lock for a moment: kick until ours runs.
      await waitFor(
        "our sweep to reach the flush",
        async () => {
          await Promise.race([retention.idle(), Bun.sleep(50)]);
          if (!reached) retention.kick();
          return reached;
        },
        { intervalMs: 0 },
      );
      expect(reached).toBe(true);
      // stop() ending at all is the behaviour (the flush never resolves); the generous guard only
      // turns a hang into a failure.
      const stopped = await Promise.race([retention.stop().then(() => true), Bun.sleep(20_000).then(() => false)]);
      expect(stopped).toBe(true);
      // Nothing was swept and the to-do row stays for the next sweep.
      expect((await lp.sql`select 1 from source_deletions where source_id = ${sourceId}`).length).toBe(1);
    } finally {
      await lp.sql`delete from source_deletions where source_id = ${sourceId}`;
    }
  });
});

describe("requests that can never fit → 413, never 503", () => {
  test("more events than BUFFER_MAX_EVENTS, and more than INGEST_MAX_EVENTS_PER_REQUEST", async () => {
    const small = await startTestLogpond({ BUFFER_MAX_EVENTS: "5", INGEST_MAX_EVENTS_PER_REQUEST: "8" });
    try {
      const source = await small.createSource();
      const events = (n: number) => Array.from({ length: n }, (_, i) => ({ n: i }));
      const six = await small.ingest(source.token, JSON.stringify(events(6)));
      expect(six.status).toBe(413);
      expect(await six.text()).toContain("(5 events: BUFFER_MAX_EVENTS)");
      const nine = await small.ingest(source.token, JSON.stringify(events(9)));
      expect(nine.status).toBe(413);
      expect(await nine.text()).toContain("INGEST_MAX_EVENTS_PER_REQUEST");
      const ndjson = await small.ingest(
        source.token,
        events(9)
          .map((e) => JSON.stringify(e))
          .join("\n"),
        { "content-type": "application/x-ndjson" },
      );
      expect(ndjson.status).toBe(413);
      // MessagePack: decided from the array header alone (this body holds none of its 9 events).
      const header = await small.ingest(source.token, Buffer.from([0x99]), { "content-type": "application/msgpack" });
      expect(header.status).toBe(413);
      expect(await header.text()).toContain("holds 9 events");
      const packed = await small.ingest(source.token, new Packr({ useRecords: true }).pack(events(5)), { "content-type": "application/msgpack" });
      expect(packed.status).toBe(202);
      expect((await small.stored(source.id)).map((row) => row.raw.n).sort()).toEqual([0, 1, 2, 3, 4]);
    } finally {
      await small.stop();
    }
  });

  test("more bytes than the ring holds of BUFFER_MAX_BYTES (a big body: decided on the decode worker)", async () => {
    const bufferMaxBytes = 1024 * 1024;
    const small = await startTestLogpond({ BUFFER_MAX_BYTES: String(bufferMaxBytes) });
    try {
      const source = await small.createSource();
      const body = JSON.stringify(Array.from({ length: 3 }, (_, i) => ({ n: i, text: "x".repeat(500_000) })));
      const response = await small.ingest(source.token, body);
      expect(response.status).toBe(413);
      // The figure the refusal is decided by: rows up to BUFFER_MAX_BYTES / RING_COST_FACTOR.
      expect(await response.text()).toContain(`can ever hold (${ringMaxBytes(bufferMaxBytes)} bytes of rows: BUFFER_MAX_BYTES / ${RING_COST_FACTOR})`);
      expect(await small.stored(source.id)).toEqual([]);
    } finally {
      await small.stop();
    }
  });
});

/** A cache whose reads are real but whose results are held until the test lets them apply. */
class HeldCache extends SourceCache {
  private gates: { read: Promise<void>; release: () => void }[] = [];
  hold(): { read: Promise<void>; release: () => void } {
    let arrived!: () => void;
    let release!: () => void;
    const gate = {
      read: new Promise<void>((resolve) => (arrived = resolve)),
      release: () => release(),
      wait: new Promise<void>((resolve) => (release = resolve)),
      arrived: () => arrived(),
    };
    this.gates.push(gate);
    return gate;
  }
  private async gated<T>(read: Promise<T>): Promise<T> {
    const gate = this.gates.shift() as undefined | { arrived(): void; wait: Promise<void> };
    const rows = await read;
    if (gate) {
      gate.arrived();
      await gate.wait;
    }
    return rows;
  }
  protected override readAll(db: Db): Promise<SourceRow[]> {
    return this.gated(super.readAll(db));
  }
  protected override readOne(db: Db, id: number): Promise<SourceRow | undefined> {
    return this.gated(super.readOne(db, id));
  }
}

describe("source cache: a token rotation racing a reload", () => {
  const rotate = async (id: string) => {
    const [row] = await lp.sql<
      { token: string }[]
    >`update sources set token = ${crypto.randomUUID().replaceAll("-", "").slice(0, 24)} where id = ${Number(id)} returning token`;
    return row!.token;
  };

  test("a full reload that read before the rotation does not bring the old token back", async () => {
    const source = await lp.createSource();
    const cache = new HeldCache();
    await cache.loadAll(lp.store.db);
    expect(cache.lookup(source.token)?.id).toBe(Number(source.id));

    const gate = cache.hold();
    const fullReload = cache.loadAll(lp.store.db); // a LISTEN reconnect: its snapshot has the old token
    await gate.read;
    const newToken = await rotate(source.id);
    await cache.reload(lp.store.db, Number(source.id)); // the rotation's NOTIFY
    gate.release();
    await fullReload;

    expect(cache.lookup(source.token)).toBeUndefined();
    expect(cache.lookup(newToken)?.id).toBe(Number(source.id));
  });

  test("a local put (this instance rotated) wins over a full reload that read before it", async () => {
    const source = await lp.createSource();
    const cache = new HeldCache();
    await cache.loadAll(lp.store.db);
    const gate = cache.hold();
    const fullReload = cache.loadAll(lp.store.db);
    await gate.read;
    const newToken = await rotate(source.id);
    cache.put({ id: Number(source.id), token: newToken, ingestingPaused: false, logsRetention: 30 });
    gate.release();
    await fullReload;
    expect(cache.lookup(source.token)).toBeUndefined();
    expect(cache.lookup(newToken)?.id).toBe(Number(source.id));
  });

  test("two reloads of one source finishing out of order: the one begun later wins", async () => {
    const source = await lp.createSource();
    const cache = new HeldCache();
    await cache.loadAll(lp.store.db);
    const gate = cache.hold();
    const first = cache.reload(lp.store.db, Number(source.id)); // reads the original token, held
    await gate.read;
    const newToken = await rotate(source.id);
    await cache.reload(lp.store.db, Number(source.id)); // begun later, reads the new token, applies
    gate.release();
    await first;
    expect(cache.lookup(source.token)).toBeUndefined();
    expect(cache.lookup(newToken)?.id).toBe(Number(source.id));
  });
});

describe("spill file", () => {
  test("replay writes each batch once: a batch whose try committed is skipped by its id; the file is deleted", async () => {
    const source = await lp.createSource();
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-spill-"));
    const row = (n: number) => `${source.id}\t2026-01-01T00:00:00.000Z\t{"n":${n}}\n`;
    const connection = openFlushConnection(lp.store.url, 5_000);
    try {
      const committed = crypto.randomUUID();
      const reserved = await connection.reserveIds(1);
      await connection.write(committed, [row(1) + row(2)]); // the try that committed as the stop came
      const file = writeSpill(dataDir, [
        { batchId: committed, events: 2, rows: [fromText(row(1), false), fromText(row(2), false)] },
        { batchId: crypto.randomUUID(), events: 1, rows: [fromText(row(3), false)] },
        // A batch that had its ids when the stop came: its tuples keep those ids.
        { batchId: crypto.randomUUID(), events: 1, rows: [fromText(`${reserved}\t${row(4)}`, true)], ids: { firstId: reserved, lastId: reserved } },
      ]);
      expect(pendingSpills(dataDir)).toEqual([file!]);
      const logs: string[] = [];
      const replayed = await replaySpills(
        dataDir,
        connection,
        async () => {
          throw new Error("nothing here is refused");
        },
        (line) => logs.push(line),
      );
      expect(replayed).toBe(4);
      expect(pendingSpills(dataDir)).toEqual([]);
      const stored = await lp.stored(source.id);
      expect(stored.map((r) => r.raw.n).sort()).toEqual([1, 2, 3, 4]);
      expect(String(stored.find((r) => r.raw.n === 4)?.id)).toBe(String(reserved));
      // A second replay (a crash before the delete) finds nothing; the same file again would be skipped whole.
      expect(
        await replaySpills(
          dataDir,
          connection,
          async () => {},
          () => {},
        ),
      ).toBe(0);
    } finally {
      await connection.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("a version 1 spill file (COPY text, before binary COPY) is still replayed: escapes undone, ids kept", async () => {
    const source = await lp.createSource();
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-spill-v1-"));
    const connection = openFlushConnection(lp.store.url, 5_000);
    try {
      const reserved = await connection.reserveIds(1);
      // Bytes as the previous release wrote them: COPY text, backslashes doubled, id-prefixed with ids.
      const entry = (head: object, rows: string) => `${JSON.stringify({ ...head, bytes: Buffer.byteLength(rows) })}\n${rows}`;
      const plain = `${source.id}\t2026-01-01T00:00:00.000Z\t{"n":1,"text":"tab\\\\there \\\\u00e9 ünï"}\n${source.id}\t2026-01-01T00:00:00.123456Z\t{"n":2}\n`;
      const prefixed = `${reserved}\t${source.id}\t2026-01-01T00:00:00.000Z\t{"n":3}\n`;
      mkdirSync(spillFolder(dataDir), { recursive: true });
      writeFileSync(
        path.join(spillFolder(dataDir), "spill-2026-11-21T00-00-00-000Z-1.bin"),
        `logpond-spill 1\n${entry({ batchId: crypto.randomUUID(), events: 2 }, plain)}${entry({ batchId: crypto.randomUUID(), events: 1, firstId: reserved, lastId: reserved }, prefixed)}`,
      );
      expect(
        await replaySpills(
          dataDir,
          connection,
          async () => {},
          () => {},
        ),
      ).toBe(3);
      const stored = await lp.stored(source.id);
      expect(stored.map((r) => r.raw).sort((a, b) => Number(a.n) - Number(b.n))).toEqual([{ n: 1, text: "tab\there \u00e9 ünï" }, { n: 2 }, { n: 3 }]);
      expect(String(stored.find((r) => r.raw.n === 3)?.id)).toBe(String(reserved));
      expect(pendingSpills(dataDir)).toEqual([]);
    } finally {
      await connection.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
