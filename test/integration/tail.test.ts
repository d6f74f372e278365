// GET /api/v2/query/live-tail/stream (docs/api.md, "Reading: the live tail") over real HTTP against the real PostgreSQL:
// rows arriving live after their commit (outcomes, not latency: deadlines here only end a wait that
// would hang), Last-Event-ID / cursor= resume with no gap and no duplicate while ingesting,
// a stalled client (dropped count, ingestion unaffected), 50 concurrent streams while ingesting
// json-100 bodies, rows ingested by another instance, heartbeats, clean-up, and parameter errors.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as net from "node:net";
import { event as benchEvent } from "../../bench/payloads";
import { API_TOKEN, startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { SseReader } from "../helpers/sse";
import { catchUpStatement, readCatchUp } from "../../src/tail/storage";
import { waitFor } from "../helpers/wait";

interface PlanNode {
  "Relation Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  Plans?: PlanNode[];
}

const STREAM = "/api/v2/query/live-tail/stream";
let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond({ TAIL_HEARTBEAT_MS: "200" });
});
afterAll(async () => {
  await lp.stop();
});

async function open(target: TestLogpond, query: string, headers: Record<string, string> = {}): Promise<SseReader> {
  const response = await target.api("GET", `${STREAM}?${query}`, undefined, headers);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  return new SseReader(response);
}
const numbered = (from: number, count: number, extra: Record<string, unknown> = {}) =>
  Array.from({ length: count }, (_, i) => ({ n: from + i, level: (from + i) % 3 === 0 ? "warn" : "info", ...extra }));
async function send(target: TestLogpond, source: TestSource, events: unknown[]) {
  const response = await target.ingest(source.token, JSON.stringify(events));
  expect(response.status).toBe(202);
}
/** (seq, id) of an event id, to check the order of a stream. */
const position = (id: string) => id.split("-").map(BigInt) as [bigint, bigint];

function expectIncreasing(ids: string[]) {
  for (let i = 1; i < ids.length; i++) {
    const [s0, i0] = position(ids[i - 1]!),
      [s1, i1] = position(ids[i]!);
    if (!(s1 > s0 || (s1 === s0 && i1 > i0))) throw new Error(`event ${ids[i]} came after ${ids[i - 1]}`);
  }
}

test("rows arrive live after their commit, each once and in order, from memory", async () => {
  const source = await lp.createSource();
  const committedAt = new Map<number, number>();
  const unsubscribe = lp.flusher.subscribe((batch) => committedAt.set(batch.seq, performance.now()));
  const stream = await open(lp, `source_ids=${source.id}`);
  const readBack = lp.tail.readBack;
  try {
    // Each round's rows arrive with nothing more sent and no flush asked for: the flusher's own
    // commit brings them. (How soon is a benchmark's question, not this test's.)
    for (let round = 0; round < 10; round++) {
      await send(lp, source, numbered(round * 10, 10));
      await stream.until(() => stream.rows().length >= (round + 1) * 10, 20_000, `round ${round}`);
    }
    const messages = stream.events.filter((e) => e.event === "message");
    const seqs = messages.map((e) => Number(e.id!.split("-")[0]));
    // Every row came from a batch the flusher reported committed, and none arrived before that
    // report (an order on one clock, not a duration: a tail never shows uncommitted rows).
    expect(seqs.filter((seq) => !committedAt.has(seq))).toEqual([]);
    expect(messages.filter((e) => e.at < committedAt.get(Number(e.id!.split("-")[0]))!).map((e) => e.id)).toEqual([]);
    expectIncreasing(messages.map((e) => e.id!));
    const rows = stream.rows();
    expect(rows.map((row) => row.n)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    // This process's batches came from memory, none read back from PostgreSQL.
    expect(lp.tail.readBack).toBe(readBack);
    expect(rows[0]).toMatchObject({
      source_id: source.id,
      id: expect.stringMatching(/^\d+$/),
      dt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
    });
  } finally {
    unsubscribe();
    await stream.close();
  }
});

describe("resume", () => {
  test("from 0-0 (before the first batch): every row of the source, and no drop reported", async () => {
    const source = await lp.createSource();
    await send(lp, source, numbered(0, 30));
    await lp.flusher.flush();
    const stream = await open(lp, `source_ids=${source.id}`, { "last-event-id": "0-0" });
    try {
      // 0-0 reads every batch the log keeps: in a full run, every earlier file's too, an id-range
      // scan of the hot tier each, so on a loaded machine this read alone may take tens of seconds.
      await stream.until(() => stream.rows().length >= 30, 60_000, "every row");
      expect(stream.rows().map((row) => row.n)).toEqual(Array.from({ length: 30 }, (_, i) => i));
      expect(stream.events.filter((e) => e.event === "dropped")).toEqual([]);
    } finally {
      await stream.close();
    }
  }, 90_000);

  for (const via of ["Last-Event-ID", "cursor="] as const) {
    test(`reconnecting with ${via} while ingesting: no gap, no duplicate`, async () => {
      const source = await lp.createSource();
      const first = await open(lp, `source_ids=${source.id}`);
      for (let i = 0; i < 10; i++) await send(lp, source, numbered(i * 50, 50));
      await first.until(() => first.rows().length >= 200);
      // Resume from the 150th row: whatever the first stream got after it is sent again, nothing less.
      const cut = first.events.filter((e) => e.event === "message")[149]!;
      await first.close();
      const before = first
        .rows()
        .slice(0, 150)
        .map((row) => row.n);

      for (let i = 10; i < 16; i++) await send(lp, source, numbered(i * 50, 50)); // while away
      await lp.flusher.flush();
      const resumed =
        via === "Last-Event-ID"
          ? await open(lp, `source_ids=${source.id}`, { "last-event-id": cut.id! })
          : await open(lp, `source_ids=${source.id}&cursor=${cut.id}`);
      const sending = (async () => {
        for (let i = 16; i < 30; i++) await send(lp, source, numbered(i * 50, 50)); // during catch-up and after
      })();
      await sending;
      await resumed.until(() => resumed.rows().length >= 1500 - 150, 15_000, "every row");
      await lp.flusher.flush();
      const after = resumed.rows().map((row) => row.n);
      const all = [...before, ...after].sort((a, b) => a - b);
      expect(all).toEqual(Array.from({ length: 1500 }, (_, i) => i));
      expectIncreasing([cut.id!, ...resumed.events.filter((e) => e.event === "message").map((e) => e.id!)]);
      await resumed.close();
    }, 30_000);
  }

  test("a stream tells its live start as a position: resuming from it before any row arrived misses nothing", async () => {
    const source = await lp.createSource();
    await send(lp, source, numbered(0, 3));
    await lp.flusher.flush();
    // The live start is the last batch the hub has handed out, which moves on its NOTIFY: on a
    // loaded machine that can come after flush() returns, and a live start before rows 0–2 would
    // rightly replay them. Wait for it, so the position is after them.
    const seq = (await lp.sql<{ seq: number }[]>`select max(seq)::float8 as seq from flush_batches`)[0]!.seq;
    await waitFor("the hub to hand out rows 0–2's batch", () => lp.tail.lastSeq >= seq, { intervalMs: 10 });
    const first = await open(lp, `source_ids=${source.id}`);
    await first.until(() => first.position !== undefined, 20_000, "the live start's id");
    await first.close();
    expect(first.rows()).toEqual([]);
    await send(lp, source, numbered(3, 4)); // while disconnected ("paused")
    const second = await open(lp, `source_ids=${source.id}`, { "last-event-id": first.position! });
    try {
      await second.until(() => second.rows().length >= 4, 20_000, "the rows sent while disconnected");
      await send(lp, source, numbered(7, 1));
      await second.until(() => second.rows().length >= 5, 20_000, "a live row");
      expect(second.rows().map((row) => row.n)).toEqual([3, 4, 5, 6, 7]);
      expect(second.dropped()).toBe(0);
    } finally {
      await second.close();
    }
  });
  test("a resumed stream's catch-up reads the batches from its resume point on, not the batch log before it", async () => {
    // What a catch-up costs is counted, not timed: PostgreSQL's own count of the flush_batches
    // rows the statement read (EXPLAIN ANALYZE). Each one read costs an id-range scan of the hot
    // tier, so reading the whole log (a day's batches) made a resume take seconds to minutes.
    const source = await lp.createSource();
    const lastSeq = async () => (await lp.sql<{ seq: number }[]>`select coalesce(max(seq), 0)::float8 as seq from flush_batches`)[0]!.seq;
    const start = await lastSeq();
    for (let k = 0; k < 10; k++) {
      await send(lp, source, numbered(k * 5, 5));
      await lp.flusher.flush();
    }
    const seq = await lastSeq();
    await waitFor("the hub to hand out the last batch", () => lp.tail.lastSeq >= seq, { intervalMs: 10 });
    const upTo = lp.tail.lastSeq;
    // From the batch log's end before the first send: not from 0, which reads every batch kept.
    const all = await readCatchUp(lp.sql, { seq: start, id: "" }, upTo, [Number(source.id)], undefined, 1000);
    expect(all.length).toBe(50);
    const from = { seq: all[39]!.seq, id: all[39]!.id };
    const rest = await readCatchUp(lp.sql, from, upTo, [Number(source.id)], undefined, 1000);
    expect(rest.map((row) => JSON.parse(row.raw).n)).toEqual(Array.from({ length: 10 }, (_, i) => 40 + i));

    const { text, params } = catchUpStatement(from, upTo, [Number(source.id)], undefined, 1000);
    const [explained] = await lp.sql.unsafe(`explain (analyze, format json) ${text}`, params as never[]);
    const batchesRead = (node: PlanNode): number =>
      (node["Relation Name"] === "flush_batches" ? Math.round(node["Actual Rows"] * node["Actual Loops"]) : 0) +
      (node.Plans ?? []).reduce((sum, child) => sum + batchesRead(child), 0);
    const read = batchesRead((explained!["QUERY PLAN"] as { Plan: PlanNode }[])[0]!.Plan);
    const [fromOn] = await lp.sql<{ count: number }[]>`select count(*)::int as count from flush_batches where seq >= ${from.seq} and seq <= ${upTo}`;
    const [before] = await lp.sql<{ count: number }[]>`select count(*)::int as count from flush_batches where seq < ${from.seq}`;
    expect(before!.count).toBeGreaterThanOrEqual(7); // this source's first seven batches at least
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThanOrEqual(fromOn!.count);
  });
  test("a resumed stream with a query replays only matching rows", async () => {
    const source = await lp.createSource();
    const first = await open(lp, `source_ids=${source.id}&query=level:warn`);
    await send(lp, source, numbered(0, 30));
    await first.until(() => first.rows().length === 10);
    const cut = first.events.filter((e) => e.event === "message")[4]!;
    await first.close();
    await send(lp, source, numbered(30, 30));
    const resumed = await open(lp, `source_ids=${source.id}&query=level:warn`, { "last-event-id": cut.id! });
    await send(lp, source, numbered(60, 30));
    await resumed.until(() => resumed.rows().length === 25);
    expect(resumed.rows().map((row) => row.n)).toEqual(Array.from({ length: 25 }, (_, i) => 15 + i * 3));
    await resumed.close();
  });
});

test("a stalled client gets `dropped` and never holds up ingestion", async () => {
  const small = await startTestLogpond({ TAIL_QUEUE_MAX_ROWS: "200", TAIL_HEARTBEAT_MS: "100" });
  const source = await small.createSource();
  const reading = await open(small, `source_ids=${source.id}`);
  const stalled = await rawStream(small, `${STREAM}?source_ids=${source.id}`);
  try {
    const total = 30_000;
    for (let i = 0; i < total; i += 1000) await send(small, source, numbered(i, 1000, { pad: "x".repeat(500) }));
    // Ingestion's progress, not its speed: everything is committed and the ring is empty while
    // the stalled client still reads nothing.
    await small.flusher.flush();
    expect(small.ring.heldEvents).toBe(0);
    const [stored] = await small.sql<{ count: number }[]>`select count(*)::int as count from log_events where source_id = ${Number(source.id)}`;
    expect(stored!.count).toBe(total);
    // Another client reading meanwhile was served throughout (on a loaded machine it may itself
    // fall behind its 200-row queue: then its own count says so, exactly).
    await reading.until(() => reading.rows().length + reading.dropped() === total, 20_000, "the reading client's rows");

    // The stalled client reads again: it gets what was queued, then the count of what was skipped.
    const text = await stalled.resumeUntil((t) => /event: dropped\ndata: \{"count":\d+\}/.test(t));
    await send(small, source, [{ n: total, last: true }]);
    const withLast = await stalled.resumeUntil((t) => t.includes('"last":true'));
    const rows = (withLast.match(/\ndata: \{"n"/g) ?? []).length + (withLast.startsWith("data: {") ? 1 : 0);
    const dropped = [...withLast.matchAll(/event: dropped\ndata: \{"count":(\d+)\}/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    expect(dropped).toBeGreaterThan(0);
    expect(rows + dropped).toBe(total + 1);
    expect(withLast.lastIndexOf("event: dropped")).toBeLessThan(withLast.indexOf('"last":true'));
    expect(text.length).toBeGreaterThan(0);
  } finally {
    stalled.destroy();
    await reading.close();
    await small.stop();
  }
}, 60_000);

test("50 concurrent streams while json-100 bodies are ingested", async () => {
  const source = await lp.createSource();
  const streams = await Promise.all(Array.from({ length: 50 }, (_, i) => open(lp, `source_ids=${source.id}${i % 5 === 0 ? "&query=level:warn" : ""}`)));
  const bodies = Array.from({ length: 80 }, (_, k) => JSON.stringify(Array.from({ length: 100 }, (_, i) => benchEvent(k * 100 + i))));
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < bodies.length) await lp.ingest(source.token, bodies[next++]!).then((r) => expect(r.status).toBe(202));
    }),
  );
  await lp.flusher.flush();
  const warn = (bodies.length * 100) / 10;
  for (const [i, stream] of streams.entries()) {
    const expected = i % 5 === 0 ? warn : bodies.length * 100;
    await stream.until(() => stream.events.filter((e) => e.event === "message").length >= expected, 30_000, `stream ${i}`);
    const ids = stream.events.filter((e) => e.event === "message").map((e) => e.id!);
    expect(new Set(ids).size).toBe(expected);
    expect(stream.dropped()).toBe(0);
  }
  await Promise.all(streams.map((s) => s.close()));
}, 60_000);

test("rows ingested through another instance on the same database appear (NOTIFY wake-up)", async () => {
  const other = await startTestLogpond();
  try {
    // Made through `other`, so its ingestion knows the source at once; `lp` checks sources in the database.
    const source = await other.createSource();
    const stream = await open(lp, `source_ids=${source.id}&query=${encodeURIComponent("n>=5")}`);
    try {
      await send(other, source, numbered(0, 10));
      await stream.until(() => stream.rows().length === 5);
      expect(stream.rows().map((row) => row.n)).toEqual([5, 6, 7, 8, 9]);
      expect(lp.tail.readBack).toBeGreaterThan(0);
    } finally {
      await stream.close();
    }
  } finally {
    await other.stop();
  }
});

test("numbers past 2^53 match on the stream as in the query API (digit for digit, not as rounded doubles)", async () => {
  const source = await lp.createSource();
  const queries = ["order=12345678901234567890", "12345678901234567890", "order>12345678901234567890", "order:9007199254740993", "order<=9007199254740992"];
  // n=9 matches every query (OR n=9), so each stream knows when it has seen everything.
  const streams = await Promise.all(queries.map((query) => open(lp, `source_ids=${source.id}&query=${encodeURIComponent(`(${query}) OR n=9`)}`)));
  try {
    const body = `[{"n":0,"order":12345678901234567890},{"n":1,"order":12345678901234567891},{"n":2,"order":9007199254740993},{"n":3,"order":9007199254740992},{"n":9}]`;
    expect((await lp.ingest(source.token, body)).status).toBe(202);
    for (const [i, query] of queries.entries()) {
      const stream = streams[i]!;
      await stream.until(() => stream.rows().some((row) => row.n === 9));
      const api: any = await (
        await lp.api("GET", `/api/v2/query/live-tail?source_ids=${source.id}&order=oldest_first&query=${encodeURIComponent(query)}`)
      ).json();
      const stored = api.data.map((row: any) => row.n);
      expect({
        query,
        stream: stream
          .rows()
          .map((row) => row.n)
          .filter((n) => n !== 9),
      }).toEqual({ query, stream: stored });
    }
    expect(streams.map((stream) => stream.rows().length)).toEqual([2, 2, 2, 2, 2]);
  } finally {
    await Promise.all(streams.map((stream) => stream.close()));
  }
});

test("a quiet stream gets heartbeats; a client that goes away is cleaned up", async () => {
  const source = await lp.createSource();
  const before = lp.tail.size;
  const stream = await open(lp, `source_ids=${source.id}`);
  await stream.until(() => stream.comments.includes("keep-alive"), 20_000, "a heartbeat");
  expect(lp.tail.size).toBe(before + 1);
  await stream.close();
  await waitFor("the stream to be cleaned up", () => lp.tail.size, { until: (size) => size <= before });
  expect(lp.tail.size).toBe(before);
});

test("deleting a source ends its streams with `source_deleted`, after the rows already queued", async () => {
  const source = await lp.createSource();
  const other = await lp.createSource();
  const before = lp.tail.size;
  const stream = await open(lp, `source_ids=${source.id}`);
  const bystander = await open(lp, `source_ids=${other.id}`);
  await send(lp, source, numbered(0, 5));
  await stream.until(() => stream.rows().length === 5, 20_000, "the rows before the deletion");
  expect((await lp.api("DELETE", `/api/v1/sources/${source.id}`)).status).toBe(204);
  await stream.until(() => stream.ended, 20_000, "the end of the stream");
  expect(stream.events.at(-1)).toMatchObject({ event: "source_deleted", data: JSON.stringify({ source_id: String(source.id) }) });
  expect(stream.rows().map((row) => row.n)).toEqual([0, 1, 2, 3, 4]);
  // Streams of other sources go on.
  await send(lp, other, numbered(0, 2));
  await bystander.until(() => bystander.rows().length === 2, 20_000, "rows of the other source");
  expect(bystander.ended).toBe(false);
  await bystander.close();
  await waitFor("the streams to be cleaned up", () => lp.tail.size, { until: (size) => size <= before });
  expect(lp.tail.size).toBe(before);
});

describe("refusals", () => {
  test("bad parameters → 400/404 before the stream starts", async () => {
    const source = await lp.createSource();
    const cases: [string, Record<string, string>, number, string][] = [
      ["", {}, 400, "source_ids is required"],
      ["source_ids=987654321", {}, 404, "Source 987654321 was not found"],
      [`source_ids=${source.id}&query=${encodeURIComponent('"open')}`, {}, 400, "position 1"],
      [`source_ids=${source.id}`, { "last-event-id": "nonsense" }, 400, "Last-Event-ID"],
      [`source_ids=${source.id}&cursor=1-2-3`, {}, 400, "Last-Event-ID / cursor"],
      [`source_ids=${source.id}`, { "last-event-id": "999999999999-1" }, 400, "ahead of this database"],
    ];
    for (const [query, headers, status, message] of cases) {
      const response = await lp.api("GET", `${STREAM}?${query}`, undefined, headers);
      expect({ status: response.status, body: await response.json() }).toEqual({ status, body: { errors: expect.stringContaining(message) } });
    }
  });
});

/** A stream read over a raw socket that reads nothing until told to (a stalled client). */
async function rawStream(target: TestLogpond, path: string) {
  const url = new URL(target.apiUrl);
  const socket = net.connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  let raw = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => (raw = Buffer.concat([raw, chunk])));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${API_TOKEN}\r\n\r\n`);
  // Read the headers, then stop reading.
  await waitFor("the stalled client's stream to send its headers", () => raw.length, { intervalMs: 5, until: () => raw.includes("\r\n\r\n") });
  socket.pause();
  return {
    destroy: () => socket.destroy(),
    /** Reads again until the de-chunked body satisfies `done`; returns the body. */
    async resumeUntil(done: (body: string) => boolean): Promise<string> {
      socket.resume();
      return waitFor("the stalled client's stream to deliver", () => dechunk(raw.subarray(raw.indexOf("\r\n\r\n") + 4)), { intervalMs: 10, until: done });
    },
  };
}

function dechunk(data: Buffer): string {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf("\r\n", at);
    if (lineEnd < 0) break;
    const size = parseInt(data.subarray(at, lineEnd).toString(), 16);
    if (!Number.isFinite(size) || data.length < lineEnd + 2 + size) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts).toString();
}
