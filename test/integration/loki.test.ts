// POST /loki/api/v1/push: the unmodified pino-loki (JSON, its basic auth carrying the token, and a
// bearer header; its JSON lines stored as fields), a snappy protobuf push as Promtail and Alloy send
// it, and Loki's answers.
import { afterAll, beforeAll, expect, test } from "bun:test";
import pino from "pino";
import pinoLoki from "pino-loki";
import { API_TOKEN, startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { lokiProtobuf } from "../helpers/protos";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond({ INGEST_MAX_BODY_BYTES: "65536" });
});
afterAll(async () => {
  await lp.stop();
});

/** Logs through pino → pino-loki in this process (no worker thread), then waits for its last push. */
async function logWithPinoLoki(options: Parameters<typeof pinoLoki>[0], count: number) {
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => errors.push(args); // pino-loki reports a failed push here
  try {
    const transport = pinoLoki({ batching: { interval: 0.05, maxBufferSize: 10_000 }, ...options });
    const logger = pino({ base: { hostname: "web-1" } }, transport);
    for (let i = 0; i < count; i++) {
      if (i % 3 === 0) logger.error({ seq: i, meta: { trace_id: `t${i}` } }, `request ${i} failed`);
      else logger.info({ seq: i }, `request ${i} served`);
    }
    await new Promise<void>((resolve) => {
      transport.on("close", () => resolve());
      transport.end();
    });
  } finally {
    console.error = original;
  }
  expect(errors).toEqual([]);
}

test("pino-loki with the token as its basic auth password: every line stored once, its JSON fields searchable, with labels, level and metadata", async () => {
  const source = await lp.createSource();
  await logWithPinoLoki({ host: lp.ingestUrl, basicAuth: { username: "logpond", password: source.token }, labels: { app: "shop" } }, 30);

  const rows = await lp.stored(source.id);
  expect(rows).toHaveLength(30);
  const bySeq = new Map(rows.map((row) => [row.raw.seq as number, row]));
  expect(bySeq.size).toBe(30);
  const failed = bySeq.get(3)!.raw;
  // pino's line is the event's fields; its level number is named and kept; no `message` was made up.
  expect(failed).toMatchObject({
    seq: 3,
    msg: "request 3 failed",
    level: "error",
    level_number: 50,
    meta: { trace_id: "t3" },
    labels: { level: "error", hostname: "web-1", app: "shop" },
    metadata: { trace_id: "t3" },
  });
  expect(failed.message).toBeUndefined();
  expect(bySeq.get(4)!.raw).toMatchObject({ seq: 4, level: "info", level_number: 30 });
  // The line's own time (pino's ms, as nanoseconds) is the event time, and pino's `time` stays as it wrote it.
  expect(bySeq.get(3)!.dt.getTime()).toBe(failed.time);

  const search = async (query: string) => {
    const response = await fetch(`${lp.apiUrl}/api/v2/query/live-tail?source_ids=${source.id}&batch=100&query=${encodeURIComponent(query)}`, {
      headers: { authorization: `Bearer ${API_TOKEN}` },
    });
    return ((await response.json()) as { data: { seq: number }[] }).data;
  };
  expect(await search("level:error")).toHaveLength(10);
  expect((await search("seq=3")).map((row) => row.seq)).toEqual([3]);
  expect((await search('msg:"request 4 served"')).map((row) => row.seq)).toEqual([4]);
  expect(await search("level_number>=50")).toHaveLength(10);
});

test("pino-loki with a bearer header", async () => {
  const source = await lp.createSource();
  await logWithPinoLoki({ host: lp.ingestUrl, headers: { Authorization: `Bearer ${source.token}` } }, 4);
  expect(await lp.stored(source.id)).toHaveLength(4);
});

const push = (token: string, body: NonNullable<RequestInit["body"]>, headers: Record<string, string> = {}) =>
  fetch(`${lp.ingestUrl}/loki/api/v1/push`, { method: "POST", headers: { authorization: `Bearer ${token}`, ...headers }, body });

test("a snappy protobuf push (Promtail, Alloy), with and without its Content-Type: 204, each entry an event", async () => {
  // Entries of a fixed day: the longest retention keeps their time as sent for years (codec/reception.ts).
  const source = await lp.createSource({ logs_retention: 3652 });
  const body = lokiProtobuf({
    streams: [
      {
        labels: '{job="varlogs", level="warn"}',
        entries: [
          { timestamp: { seconds: 1764000000, nanos: 1 }, line: "disk almost full" },
          { timestamp: { seconds: 1764000001 }, line: "disk full" },
        ],
      },
    ],
  });
  const typed = await push(source.token, body, { "content-type": "application/x-protobuf" });
  expect(typed.status).toBe(204);
  expect((await push(source.token, body)).status).toBe(204);
  const once = [
    { dt: "2025-11-24T16:00:00.000000001Z", level: "warn", message: "disk almost full", labels: { job: "varlogs", level: "warn" } },
    { dt: "2025-11-24T16:00:01.000000000Z", level: "warn", message: "disk full", labels: { job: "varlogs", level: "warn" } },
  ];
  expect((await lp.stored(source.id)).map((row) => row.raw)).toEqual([...once, ...once]);
});

test("Loki's answers: 400 text for a body that cannot be used, 401/403, 413, 415", async () => {
  const source = await lp.createSource();
  const json = { "content-type": "application/json" };
  const cases: [Response, number, RegExp][] = [
    [await push(source.token, "{not json", json), 400, /Couldn't parse JSON/],
    [await push(source.token, Buffer.from([0x10, 0x00, 0x41]), { "content-type": "application/x-protobuf" }), 400, /not valid snappy/],
    [await push(source.token, JSON.stringify({ streams: [{ stream: {}, values: [["x", "line"]] }] }), json), 400, /timestamp/],
    [await fetch(`${lp.ingestUrl}/loki/api/v1/push`, { method: "POST", body: "{}" }), 401, /Unauthorized/],
    [await push("wrong-token", "{}", json), 403, /Unauthorized/],
    [await push(source.token, "x".repeat(70_000), json), 413, /INGEST_MAX_BODY_BYTES/],
    [await push(source.token, "a=b", { "content-type": "application/x-www-form-urlencoded" }), 415, /application\/json or application\/x-protobuf/],
  ];
  for (const [response, status, text] of cases) {
    expect(response.status).toBe(status);
    expect(response.headers.get("content-type")).toStartWith("text/plain");
    expect(await response.text()).toMatch(text);
  }
  expect(await lp.stored(source.id)).toHaveLength(0);
});

test("a snappy block declaring more than INGEST_MAX_DECOMPRESSED_BYTES is 413 before it is inflated", async () => {
  const source = await lp.createSource();
  const declared = await push(source.token, Buffer.from([0x80, 0x80, 0x80, 0x80, 0x08, 0x00]), { "content-type": "application/x-protobuf" }); // says 2 GiB
  expect(declared.status).toBe(413);
  expect(await declared.text()).toMatch(/says it decompresses to 2147483648 bytes; the limit is 104857600 bytes \(INGEST_MAX_DECOMPRESSED_BYTES\)/);
  expect(await lp.stored(source.id)).toHaveLength(0);
});
