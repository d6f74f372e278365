// Fluent Bit, Fluentd, Vector and pino-http-send on `POST /`: the exact bytes each sends
// (test/fixtures/shippers/, built from the shippers' own source) posted to a real logpond, and
// what PostgreSQL holds afterwards, event time included; every truncated prefix of each body; the
// hostile shapes of values back to back (docs/api.md, "Limits"); snappy and lz4; a missing Content-Type.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as zlib from "node:zlib";
import { compressSync } from "snappy";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { eventTime, hex, T0, type Fixture } from "../fixtures/shippers/fixture";
import {
  fluentBitJson,
  fluentBitJsonLines,
  fluentBitJsonStream,
  fluentBitMsgpack,
  fluentBitMsgpackLegacy,
  fluentBitMsgpackOtel,
} from "../fixtures/shippers/fluent-bit";
import { fluentdOutHttpJsonArray, fluentdOutHttpMsgpack, fluentPluginLogtail010, fluentPluginLogtail011 } from "../fixtures/shippers/fluentd";
import { pinoHttpSendNdjson } from "../fixtures/shippers/pino-http-send";
import { literalSnappy, vectorCompressed, vectorJson, vectorNdjson } from "../fixtures/shippers/vector";

const MIB = 1024 * 1024;
let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await lp.stop();
});

const fixtures: Fixture[] = [
  fluentBitMsgpack,
  fluentBitMsgpackOtel,
  fluentBitMsgpackLegacy,
  fluentBitJsonStream,
  fluentBitJson,
  fluentBitJsonLines,
  fluentPluginLogtail011,
  fluentPluginLogtail010,
  fluentdOutHttpMsgpack,
  fluentdOutHttpJsonArray,
  vectorJson,
  vectorNdjson,
  ...vectorCompressed,
  pinoHttpSendNdjson,
];

/** The fixtures' events are from 2026-11-21: a retention of ten years keeps them whatever day the suite runs. */
const newSource = () => lp.createSource({ logs_retention: 3652 });

function post(source: TestSource, body: Uint8Array, headers: Record<string, string>): Promise<Response> {
  // fetch adds no Content-Type of its own for a Uint8Array body: a fixture without one sends none.
  return fetch(`${lp.ingestUrl}/`, { method: "POST", headers: { authorization: `Bearer ${source.token}`, ...headers }, body });
}

/** The source's events in id order, the event time to the microsecond. */
async function rows(source: TestSource): Promise<{ raw: unknown; dt: string }[]> {
  await lp.flusher.flush();
  return lp.sql<{ raw: unknown; dt: string }[]>`
    select raw, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt
    from log_events where source_id = ${Number(source.id)} order by id`;
}

/** Rows against a fixture's `stored`; "reception" is a time within the test's own window. */
function expectStored(got: { raw: unknown; dt: string }[], want: Fixture["stored"], window: [number, number]) {
  expect(got.map((row) => row.raw)).toEqual(want.map((w) => w.raw));
  got.forEach((row, i) => {
    const dt = want[i]!.dt;
    if (dt !== "reception") expect({ i, dt: row.dt }).toEqual({ i, dt });
    else expect(Date.parse(row.dt)).toBeWithin(window[0] - 1000, window[1] + 1000);
  });
}

describe("each shipper's exact bytes → 202, every event stored as documented", () => {
  test.each(fixtures.map((f) => [f.name, f] as const))("%s", async (_name, fixture) => {
    const source = await newSource();
    const before = Date.now();
    const response = await post(source, fixture.body, fixture.headers);
    expect({ status: response.status, text: await response.text() }).toEqual({ status: 202, text: "" });
    expectStored(await rows(source), fixture.stored, [before, Date.now()]);
  });
});

describe("every truncated prefix: a clean 4xx, or (cut between two values back to back) just the whole values", () => {
  test.each(fixtures.map((f) => [f.name, f] as const))("%s", async (_name, fixture) => {
    const source = await newSource();
    const before = Date.now();
    const statuses = new Map<number, number>();
    const expected: Fixture["stored"] = []; // what the accepted prefixes store, in order
    for (let length = 0; length < fixture.body.length; length++) {
      const prefix = fixture.body.subarray(0, length);
      // A compressed prefix is never a whole body; a plain one is where it ends at a value's end (blanks aside).
      const plain = fixture.headers["content-encoding"] === undefined;
      const end = plain ? Buffer.from(prefix.toString("latin1").trimEnd(), "latin1").length : -1;
      const boundary = length > 0 ? fixture.boundaries?.find((b) => b.end === end) : undefined;
      const response = await post(source, prefix, fixture.headers);
      const text = await response.text();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      if (boundary) {
        expect({ length, status: response.status, text }).toEqual({ length, status: 202, text: "" });
        expected.push(...fixture.stored.slice(0, boundary.events));
        await lp.flusher.flush(); // rows of two requests flushed by two streams need not be in request order by id
      } else {
        // 406 (415: an empty prefix with no Content-Type, which nothing can be told from)
        if (response.status !== 406 && !(response.status === 415 && length === 0)) throw new Error(`prefix of ${length} bytes: ${response.status} ${text}`);
        expect(JSON.parse(text)).toEqual({ errors: expect.any(String) });
      }
    }
    expect(statuses.get(406) ?? 0).toBeGreaterThan(0);
    // Nothing of a refused prefix was kept; each accepted one kept exactly its whole values, in order.
    expectStored(await rows(source), expected, [before, Date.now()]);
    if (fixture.boundaries === undefined) expect(expected).toEqual([]);
  });
});

/** A refusal: its status, and `{"errors": …}` saying why. */
async function expectRefused(response: Promise<Response>, status: number, pattern: RegExp) {
  const answer = await response;
  const text = await answer.text();
  expect({ status: answer.status, errors: JSON.parse(text).errors }).toEqual({ status, errors: expect.stringMatching(pattern) });
}

describe("values back to back are bounded like an array (docs/api.md, Limits)", () => {
  test("20 million empty MessagePack maps back to back (a 20 KB gzip body) → 413 before they are built", async () => {
    const source = await newSource();
    const body = zlib.gzipSync(Buffer.alloc(20_000_000, 0x80), { level: 9 });
    expect(body.length).toBeLessThan(64 * 1024);
    await expectRefused(
      post(source, body, { "content-type": "application/msgpack", "content-encoding": "gzip" }),
      413,
      /more than 100000 events.*INGEST_MAX_EVENTS_PER_REQUEST/,
    );
    // With no array header to read, and without a Content-Type: the body's first byte says MessagePack.
    await expectRefused(post(source, body, { "content-encoding": "gzip" }), 413, /more than 100000 events/);
  });

  test("20 million Fluent Bit entries [[EventTime, {}], {}] back to back → 413", async () => {
    const source = await newSource();
    const entry = Buffer.concat([hex("92 92"), eventTime(T0, 0), hex("80 80")]);
    const body = zlib.gzipSync(Buffer.concat(Array(4_000_000).fill(entry)), { level: 9 });
    await expectRefused(post(source, body, { "content-type": "application/msgpack", "content-encoding": "gzip" }), 413, /more than 100000 events/);
  });

  test("{}{}{}… × 20 million (json_stream shape, 40 MB inflated) → 413, labelled or not", async () => {
    const source = await newSource();
    const body = zlib.gzipSync(Buffer.from("{}".repeat(20_000_000)), { level: 9 });
    await expectRefused(post(source, body, { "content-type": "application/json", "content-encoding": "gzip" }), 413, /more than 100000 events/);
    await expectRefused(post(source, body, { "content-encoding": "gzip" }), 413, /more than 100000 events/);
  });

  test("under 1 MiB (not walked): 900,000 empty maps back to back are counted once decoded → 413", async () => {
    const source = await newSource();
    await expectRefused(
      post(source, Buffer.alloc(900_000, 0x80), { "content-type": "application/msgpack" }),
      413,
      /900000 events.*INGEST_MAX_EVENTS_PER_REQUEST/,
    );
    await expectRefused(post(source, Buffer.from("{}".repeat(150_000)), { "content-type": "application/json" }), 413, /150000 events/);
    expect(await rows(source)).toHaveLength(0);
  });

  test("a snappy block stating more than INGEST_MAX_DECOMPRESSED_BYTES → 413 from its header, before anything is allocated", async () => {
    const source = await newSource();
    const json = { "content-type": "application/json", "content-encoding": "snappy" };
    await expectRefused(post(source, hex("ff ff ff ff 0f 00"), json), 413, /INGEST_MAX_DECOMPRESSED_BYTES/);
    // A real one (the header is the block's own: the decoder checks the output against it).
    const bomb = compressSync(Buffer.alloc(101 * MIB, 0x20));
    expect(bomb.length).toBeLessThan(8 * MIB);
    await expectRefused(post(source, bomb, json), 413, /INGEST_MAX_DECOMPRESSED_BYTES/);
  });
});

describe("Content-Encoding snappy and lz4", () => {
  test("snappy: a cut, a lying body and the framing format → 406 saying why; nothing stored", async () => {
    const source = await newSource();
    const json = { "content-type": "application/json", "content-encoding": "snappy" };
    const body = literalSnappy(Buffer.from('[{"message":"a"},{"message":"b"}]'));
    await expectRefused(post(source, body.subarray(0, body.length - 3), json), 406, /not valid snappy data/);
    await expectRefused(post(source, hex("7f 10 61 62"), json), 406, /not valid snappy data/);
    await expectRefused(post(source, hex("ff 06 00 00 73 4e 61 50 70 59 00 00"), json), 406, /framing format; send the block format/);
    await expectRefused(post(source, new Uint8Array(0), json), 406, /snappy/);
    expect(await rows(source)).toHaveLength(0);
  });

  test("snappy bodies of 4 MiB and more inflate off the event loop, and go to a decode worker whole", async () => {
    const source = await newSource();
    const events = Array.from({ length: 40_000 }, (_, i) => ({ message: `event ${i} ${"x".repeat(100)}`, timestamp: "2026-11-21T12:33:53.5Z" }));
    const body = Buffer.from(JSON.stringify(events));
    expect(body.length).toBeGreaterThan(4 * MIB);
    const response = await post(source, compressSync(body), { "content-type": "application/json", "content-encoding": "snappy" });
    expect({ status: response.status, text: await response.text() }).toEqual({ status: 202, text: "" });
    const stored = await rows(source);
    expect(stored).toHaveLength(events.length);
    expect(stored.at(-1)).toEqual({ raw: events.at(-1), dt: "2026-11-21T12:33:53.500000Z" });
  });

  test("lz4 → 415 listing the encodings logpond takes", async () => {
    const source = await newSource();
    await expectRefused(
      post(source, Buffer.from("{}"), { "content-type": "application/json", "content-encoding": "lz4" }),
      415,
      /"lz4" is not supported; use one of: gzip, deflate, br, zstd, snappy, identity/,
    );
  });
});

describe("no Content-Type: told from the body when it is unambiguous", () => {
  test("JSON, NDJSON and MessagePack (a map, an array, Fluent Bit entries) are taken", async () => {
    const source = await newSource();
    const bodies: Uint8Array[] = [
      Buffer.from('{"n":1}'),
      Buffer.from(' [{"n":2},{"n":3}]'),
      Buffer.from('{"n":4}\n{"n":5}\n'),
      hex("81 a1 6e 06"),
      hex("92 81 a1 6e 07 81 a1 6e 08"),
      fluentBitMsgpackLegacy.body,
    ];
    for (const body of bodies) {
      expect((await post(source, body, {})).status).toBe(202);
      await lp.flusher.flush(); // one request's rows at a time: ids in request order
    }
    expect((await rows(source)).map((r) => (r.raw as { n?: number; log?: string }).n ?? (r.raw as { log: string }).log)).toEqual([
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      "legacy one",
      "legacy two",
    ]);
  });

  test("anything else → 415 saying what to send; nothing stored", async () => {
    const source = await newSource();
    for (const body of ["hello", "42", '"a string"', ""]) {
      const response = await post(source, Buffer.from(body), {});
      const text = await response.text();
      expect({ body, status: response.status, errors: JSON.parse(text).errors }).toEqual({
        body,
        status: 415,
        errors: expect.stringMatching(/Content-Type is missing.*application\/json.*application\/msgpack/),
      });
    }
    expect(await rows(source)).toHaveLength(0);
  });
});
