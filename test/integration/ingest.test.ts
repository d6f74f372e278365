// The ingestion endpoint, row by row of docs/api.md ("Ingestion: `POST /`"): every format, encoding and status, each
// normalisation through a real COPY, and source state changes. Real HTTP, real PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Packr } from "msgpackr";
import * as net from "node:net";
import * as zlib from "node:zlib";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond({ INGEST_MAX_BODY_BYTES: "65536", INGEST_MAX_DECOMPRESSED_BYTES: "262144", INGEST_MAX_EVENT_BYTES: "16384" });
});
afterAll(async () => {
  await lp.stop();
});

const packr = new Packr({ structuredClone: false, useRecords: false });
const recordPackr = new Packr({ useRecords: true, structuredClone: false });
const MSGPACK = { "content-type": "application/msgpack" };
const NDJSON = { "content-type": "application/x-ndjson" };

async function expectStatus(response: Response, status: number, errorMatch?: RegExp) {
  const text = await response.text();
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${text}`);
  if (status === 202) expect(text).toBe("");
  else {
    const body = JSON.parse(text);
    expect(body.errors).toBeString();
    if (errorMatch) expect(body.errors).toMatch(errorMatch);
  }
}

describe("formats and encodings → 202, stored with their fields", () => {
  const events = [
    { message: "one", nested: { n: 1 } },
    { message: "two", nested: { n: 2 } },
  ];
  const bodies: [string, () => NonNullable<RequestInit["body"]>, Record<string, string>][] = [
    ["JSON object", () => JSON.stringify(events[0]), {}],
    ["JSON array", () => JSON.stringify(events), {}],
    ["JSON with charset", () => JSON.stringify(events), { "content-type": "application/json; charset=utf-8" }],
    ["NDJSON", () => `${JSON.stringify(events[0])}\n\n${JSON.stringify(events[1])}\n`, NDJSON],
    ["NDJSON with CRLF", () => `${JSON.stringify(events[0])}\r\n${JSON.stringify(events[1])}\r\n`, { "content-type": "application/ndjson" }],
    ["JSON lines", () => events.map((e) => JSON.stringify(e)).join("\n"), { "content-type": "application/jsonl" }],
    ["MessagePack map", () => packr.pack(events[0]), MSGPACK],
    ["MessagePack array", () => packr.pack(events), MSGPACK],
    ["MessagePack x-msgpack", () => packr.pack(events), { "content-type": "application/x-msgpack" }],
    ["msgpackr records", () => recordPackr.pack(events), MSGPACK],
  ];
  const encodings: [string, (b: Buffer) => Buffer][] = [
    ["identity", (b) => b],
    ["gzip", (b) => zlib.gzipSync(b)],
    ["deflate", (b) => zlib.deflateSync(b)],
    ["br", (b) => zlib.brotliCompressSync(b)],
    ["zstd", (b) => zlib.zstdCompressSync(b)],
  ];
  for (const [label, make, headers] of bodies) {
    test.each(encodings)(`${label}, Content-Encoding %s`, async (encoding, compress) => {
      const source = await lp.createSource();
      const raw = make();
      const body = compress(Buffer.from(typeof raw === "string" ? raw : (raw as Uint8Array)));
      await expectStatus(await lp.ingest(source.token, body, { ...headers, "content-encoding": encoding }), 202);
      const stored = await lp.stored(source.id);
      const expected = label.endsWith("object") || label.endsWith("map") ? [events[0]] : events;
      expect(stored.map((r) => r.raw)).toEqual(expected);
    });
  }

  test("zstd cut short is refused whole (its decoder returns what it got so far); whole frames, skippable ones too, are stored", async () => {
    const source = await lp.createSource();
    const ndjson = (from: number) => Array.from({ length: 10 }, (_, i) => JSON.stringify({ n: from + i })).join("\n") + "\n";
    const frames = Buffer.concat([zlib.zstdCompressSync(ndjson(0)), zlib.zstdCompressSync(ndjson(10))]);
    const zstd = { ...NDJSON, "content-encoding": "zstd" };
    const small = zlib.zstdCompressSync(JSON.stringify([{ a: 1 }, { b: 2 }]));
    const cuts: [Buffer, Record<string, string>][] = [
      [frames.subarray(0, frames.length - 5), zstd], // the first frame whole: 202 with half the events before
      [small.subarray(0, small.length - 5), { "content-encoding": "zstd" }], // was "Request body is empty"
      [Buffer.concat([small, Buffer.from([0x28, 0xb5, 0x2f, 0xfd])]), { "content-encoding": "zstd" }], // a frame's magic alone after a whole one
    ];
    for (const [cut, headers] of cuts) await expectStatus(await lp.ingest(source.token, cut, headers), 406, /unexpected end of file/);
    expect(await lp.stored(source.id)).toHaveLength(0);
    const skippable = Buffer.concat([Buffer.from([0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3]), frames]);
    await expectStatus(await lp.ingest(source.token, skippable, zstd), 202);
    expect((await lp.stored(source.id)).map((row) => row.raw.n).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  test("raw deflate (no zlib header) is accepted as deflate", async () => {
    const source = await lp.createSource();
    await expectStatus(await lp.ingest(source.token, zlib.deflateRawSync(JSON.stringify(events)), { "content-encoding": "deflate" }), 202);
    expect(await lp.stored(source.id)).toHaveLength(2);
  });

  test("a large gzip body takes the thread-pool path", async () => {
    const source = await lp.createSource();
    const many = Array.from({ length: 1500 }, (_, i) => ({ i, message: `m${i} ${crypto.randomUUID()}` }));
    const body = zlib.gzipSync(JSON.stringify(many), { level: 0 });
    expect(body.length).toBeGreaterThan(16_384);
    const big = await startTestLogpond({ INGEST_MAX_BODY_BYTES: String(1 << 20) });
    try {
      const s = await big.createSource();
      await expectStatus(await big.ingest(s.token, body, { "content-encoding": "gzip" }), 202);
      // Read back in id order: a request's events get consecutive ids in the order they were sent.
      expect((await big.stored(s.id)).map((r) => r.raw.i)).toEqual(many.map((e) => e.i));
    } finally {
      await big.stop();
    }
    expect(source.id).toBeString();
  });

  test("big bodies decoded in slices on a decode thread (JSON array, NDJSON, MessagePack maps and records, gzip'd): every event stored once, in order, as sent", async () => {
    // Keys that come and go make msgpackr define records all through the body, so later slices use definitions from earlier ones.
    const events = Array.from({ length: 15_000 }, (_, i) => ({
      i,
      message: `event ${i} ${crypto.randomUUID()} ${crypto.randomUUID()}`,
      ...(i % 7 === 0 ? { [`key${i % 50}`]: { n: i, list: [i, String(i)] } } : {}),
      ...(i % 3 === 0 ? { level: "warn" } : {}),
    }));
    const bodies: [string, Buffer, Record<string, string>][] = [
      ["JSON array", Buffer.from(JSON.stringify(events)), {}],
      ["NDJSON", Buffer.from(events.map((e) => JSON.stringify(e)).join("\n")), NDJSON],
      ["MessagePack maps", packr.pack(events), MSGPACK],
      ["MessagePack records", recordPackr.pack(events), MSGPACK],
      ["MessagePack records, gzip'd", zlib.gzipSync(recordPackr.pack(events)), { ...MSGPACK, "content-encoding": "gzip" }],
    ];
    const big = await startTestLogpond({ INGEST_MAX_BODY_BYTES: String(8 << 20), INGEST_MAX_DECOMPRESSED_BYTES: String(8 << 20) });
    try {
      for (const [label, body, headers] of bodies) {
        const s = await big.createSource();
        const decompressed = headers["content-encoding"] === "gzip" ? zlib.gunzipSync(body) : body;
        expect([label, decompressed.length > 1 << 20]).toEqual([label, true]); // past BIG_BODY_BYTES
        await expectStatus(await big.ingest(s.token, body, headers), 202);
        const stored = (await big.stored(s.id)).map((r) => r.raw);
        expect([label, stored.length]).toEqual([label, events.length]);
        expect(stored).toEqual(events);
      }
    } finally {
      await big.stop();
    }
  });
});

describe("status codes", () => {
  let source: TestSource;
  beforeAll(async () => {
    source = await lp.createSource();
  });

  test("401 without a token, with WWW-Authenticate", async () => {
    for (const authorization of [undefined, "", "Bearer", "Basic abc", "Bearer  "]) {
      const response = await fetch(`${lp.ingestUrl}/`, {
        method: "POST",
        headers: authorization === undefined ? { "content-type": "application/json" } : { authorization, "content-type": "application/json" },
        body: "{}",
      });
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toBe("Bearer");
      expect(await response.json()).toEqual({ errors: "Unauthorized" });
    }
  });

  test("403 with an unknown token or the API token", async () => {
    for (const token of ["nope", `${source.token}x`, "test-api-token-0123456789abcdef"]) {
      const response = await lp.ingest(token, "{}");
      expect(response.status).toBe(403);
      expect(await response.json()).toEqual({ errors: "Unauthorized" });
    }
  });

  test("lower-case bearer works on ingestion too", async () => {
    const response = await lp.ingest("", '{"a":1}', { authorization: `bearer ${source.token}` });
    expect(response.status).toBe(202);
  });

  const notAcceptable: [string, NonNullable<RequestInit["body"]>, Record<string, string>][] = [
    ["empty JSON body", "", {}],
    ["invalid JSON", "{", {}],
    ["JSON string", '"hello"', {}],
    ["JSON number", "42", {}],
    ["JSON null", "null", {}],
    ["array of strings", '["a","b"]', {}],
    ["array with a null", '[{"a":1},null]', {}],
    ["nested array event", "[[{}]]", {}],
    ["trailing garbage", '{"a":1} x', {}],
    ["NDJSON bad line", '{"a":1}\n{oops}\n', NDJSON],
    ["NDJSON only blank lines", "\n\n", NDJSON],
    ["NDJSON line not an object", '{"a":1}\n5\n', NDJSON],
    ["empty MessagePack", new Uint8Array(0), MSGPACK],
    ["MessagePack string", packr.pack("hello"), MSGPACK],
    ["MessagePack trailing bytes", Buffer.concat([packr.pack({ a: 1 }), Buffer.from([1])]), MSGPACK],
    ["MessagePack 0xc1", Buffer.from([0xc1]), MSGPACK],
    ["MessagePack 0xc1 in an event", Buffer.from([0x81, 0xa1, 0x61, 0xc1]), MSGPACK],
    ["MessagePack Set", new Packr({ moreTypes: true, structuredClone: false }).pack({ s: new Set([1]) }), MSGPACK],
    ["MessagePack RegExp", new Packr({ moreTypes: true, structuredClone: false }).pack({ r: /x/g }), MSGPACK],
    ["MessagePack Error", new Packr({ moreTypes: true, structuredClone: false }).pack({ e: new Error("x") }), MSGPACK],
    ["MessagePack typed array", new Packr({ moreTypes: true, structuredClone: false }).pack({ t: new Uint16Array([1, 2]) }), MSGPACK],
    [
      "MessagePack structured clone",
      new Packr({ structuredClone: true }).pack(
        (() => {
          const o: any = { a: 1 };
          o.self = o;
          return o;
        })(),
      ),
      MSGPACK,
    ],
    ["MessagePack map key that is a map", Buffer.from([0x81, 0x81, 0xa1, 0x61, 0x01, 0x02]), MSGPACK],
    ["gzip that is not gzip", "not gzip", { "content-encoding": "gzip" }],
    ["truncated gzip", zlib.gzipSync('{"a":1}').subarray(0, 10), { "content-encoding": "gzip" }],
    ["deep JSON (100k)", zlib.gzipSync(`${"[".repeat(100_000)}${"]".repeat(100_000)}`), { "content-encoding": "gzip" }],
    ["deep JSON object (40k)", zlib.gzipSync(`${'{"a":'.repeat(40_000)}1${"}".repeat(40_000)}`), { "content-encoding": "gzip" }],
    ["JSON object one level too deep", `{"a":${'{"a":'.repeat(64)}1${"}".repeat(64)}}`, {}],
    [
      "deep MessagePack (100k)",
      zlib.gzipSync(Buffer.concat([Buffer.from([0x81, 0xa1, 0x61]), Buffer.alloc(100_000, 0x91), Buffer.from([0x01])])),
      { ...MSGPACK, "content-encoding": "gzip" },
    ],
    ["MessagePack one level too deep", Buffer.concat([Buffer.from([0x81, 0xa1, 0x61]), Buffer.alloc(64, 0x91), Buffer.from([0x01])]), MSGPACK],
  ];
  test.each(notAcceptable)("406: %s", async (_label, body, headers) => {
    await expectStatus(await lp.ingest(source.token, body, headers), 406);
  });

  test("406 names the first bad event's index", async () => {
    const response = await lp.ingest(source.token, '[{"a":1},{"b":2},"three",4]');
    expect(response.status).toBe(406);
    expect(((await response.json()) as any).errors).toMatch(/event 2/);
  });

  test("nesting exactly at INGEST_MAX_DEPTH is accepted", async () => {
    const s = await lp.createSource();
    const body = `${'{"a":'.repeat(63)}{}${"}".repeat(63)}`;
    await expectStatus(await lp.ingest(s.token, body), 202);
    expect(await lp.stored(s.id)).toHaveLength(1);
  });

  test("413: body over INGEST_MAX_BODY_BYTES (with Content-Length and chunked)", async () => {
    const big = JSON.stringify([{ message: "x".repeat(70_000) }]);
    await expectStatus(await lp.ingest(source.token, big), 413, /65536/);
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 10; i++) controller.enqueue(new TextEncoder().encode(" ".repeat(10_000)));
        controller.close();
      },
    });
    await expectStatus(await lp.ingest(source.token, stream), 413);
  });

  test("413: decompressed over INGEST_MAX_DECOMPRESSED_BYTES (a gzip bomb)", async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(50 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(65536);
    await expectStatus(await lp.ingest(source.token, bomb, { "content-encoding": "gzip" }), 413, /262144/);
  });

  test("413: one event over INGEST_MAX_EVENT_BYTES; nothing of the request stored", async () => {
    const s = await lp.createSource();
    const body = JSON.stringify([{ ok: 1 }, { message: "é".repeat(9000) }]);
    await expectStatus(await lp.ingest(s.token, body), 413, /event 1.*16384/);
    expect(await lp.stored(s.id)).toHaveLength(0);
  });

  // Names an object inherits (constructor, toString, __proto__) are not media types either.
  // (No Content-Type at all is told from the body: test/integration/shippers.test.ts.)
  test.each([
    ["text/plain"],
    ["application/x-www-form-urlencoded"],
    ["application/xml"],
    ["constructor"],
    ["toString"],
    ["__proto__"],
    ["hasOwnProperty; charset=utf-8"],
  ])("415: Content-Type %p", async (type) => {
    const response = await fetch(`${lp.ingestUrl}/`, {
      method: "POST",
      headers: type ? { authorization: `Bearer ${source.token}`, "content-type": type } : { authorization: `Bearer ${source.token}` },
      body: new Uint8Array(Buffer.from('{"a":1}')),
    });
    await expectStatus(response, 415, /application\/json/);
  });

  test("415: Content-Encoding compress", async () => {
    await expectStatus(await lp.ingest(source.token, "{}", { "content-encoding": "compress" }), 415, /gzip/);
  });

  test("all or nothing: one bad event rejects the request and stores nothing", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, '[{"a":1},{"b":2},7]'), 406);
    await expectStatus(
      await lp.ingest(s.token, packr.pack([{ a: 1 }, { s: new Packr({ moreTypes: true }).unpack(new Packr({ moreTypes: true }).pack(new Set([1]))) }])),
      406,
    );
    expect(await lp.stored(s.id)).toHaveLength(0);
  });

  test("an empty array is a 202 that stores nothing", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, "[]"), 202);
    await expectStatus(await lp.ingest(s.token, packr.pack([]), MSGPACK), 202);
    expect(await lp.stored(s.id)).toHaveLength(0);
  });

  test("503 + Retry-After when the buffer is full; nothing of that request is stored", async () => {
    const small = await startTestLogpond({ BUFFER_MAX_EVENTS: "5", FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000" });
    try {
      // Its start's sweep flushes the buffer first when a source was deleted (other tests did):
      // over before the buffer is filled.
      await small.retention.idle();
      const s = await small.createSource();
      await expectStatus(await small.ingest(s.token, JSON.stringify([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }])), 202);
      const full = await small.ingest(s.token, JSON.stringify([{ n: 5 }, { n: 6 }]));
      expect(full.status).toBe(503);
      expect(full.headers.get("retry-after")).toBe("1");
      await small.flusher.flush();
      await expectStatus(await small.ingest(s.token, JSON.stringify([{ n: 5 }])), 202);
      expect((await small.stored(s.id)).map((r) => r.raw.n)).toEqual([1, 2, 3, 4, 5]);
    } finally {
      await small.stop();
    }
  });
});

describe("normalisation, through a real COPY", () => {
  test("NUL and lone surrogates become U+FFFD, in values and keys", async () => {
    const s = await lp.createSource();
    const body = '{"a\\u0000b":"x\\u0000y","lone":"\\ud800z","low":"\\udc00","pair":"\\ud83d\\ude00","esc":"\\\\u0000"}';
    await expectStatus(await lp.ingest(s.token, body), 202);
    const [row] = await lp.stored(s.id);
    expect(row!.raw).toEqual({ "a\uFFFDb": "x\uFFFDy", lone: "\uFFFDz", low: "\uFFFD", pair: "😀", esc: "\\u0000" });
  });

  test("the same through MessagePack", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, packr.pack({ "k\u0000": "v\u0000", lone: "\ud800" }), MSGPACK), 202);
    // MessagePack strings are UTF-8: a lone surrogate arrives as 3 invalid bytes, each one U+FFFD.
    expect((await lp.stored(s.id))[0]!.raw).toEqual({ "k\uFFFD": "v\uFFFD", lone: "\uFFFD\uFFFD\uFFFD" });
  });

  test("64-bit integers stay exact (JSON and MessagePack)", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, '{"big":12345678901234567890,"neg":-9223372036854775808,"safe":9007199254740991,"f":1.5}'), 202);
    await expectStatus(await lp.ingest(s.token, packr.pack({ big: 2n ** 64n - 1n, neg: -(2n ** 63n), small: 5n }), MSGPACK), 202);
    const rows = await lp.stored(s.id);
    expect(rows[0]!.text).toContain('"big": 12345678901234567890');
    expect(rows[0]!.text).toContain('"neg": -9223372036854775808');
    expect(rows[0]!.text).toContain('"safe": 9007199254740991');
    expect(rows[1]!.text).toContain('"big": 18446744073709551615');
    expect(rows[1]!.text).toContain('"neg": -9223372036854775808');
    expect(rows[1]!.raw.small).toBe(5);
  });

  test("binary → base64; NaN/Infinity → strings; integer keys → strings; undefined → null; timestamps → ISO", async () => {
    const s = await lp.createSource();
    const map = new Map<unknown, unknown>([
      [1, "one"],
      [-2, "minus two"],
      ["k", "v"],
    ]);
    const body = new Packr({ structuredClone: false, mapsAsObjects: false, useRecords: false }).pack({
      bin: Buffer.from([0, 1, 2, 253, 254, 255]),
      nan: NaN,
      inf: Infinity,
      ninf: -Infinity,
      map,
      at: new Date("2026-11-21T12:30:41.695Z"),
      list: [undefined, NaN, Buffer.from("hi")],
    });
    await expectStatus(await lp.ingest(s.token, body, MSGPACK), 202);
    expect((await lp.stored(s.id))[0]!.raw).toEqual({
      bin: "AAEC/f7/",
      nan: "NaN",
      inf: "Infinity",
      ninf: "-Infinity",
      map: { "1": "one", "-2": "minus two", k: "v" },
      at: "2026-11-21T12:30:41.695Z",
      list: [null, "NaN", "aGk="],
    });
  });

  test("__proto__ and constructor are plain data (JSON and MessagePack)", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, '{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}}}'), 202);
    const map = new Map<string, unknown>([
      ["__proto__", { polluted: 2 }],
      ["constructor", "c"],
    ]);
    await expectStatus(await lp.ingest(s.token, new Packr({ mapsAsObjects: false, useRecords: false }).pack(map), MSGPACK), 202);
    const rows = await lp.stored(s.id);
    expect(rows[0]!.text).toBe('{"__proto__": {"polluted": 1}, "constructor": {"prototype": {"x": 1}}}');
    expect(rows[1]!.text).toBe('{"__proto__": {"polluted": 2}, "constructor": "c"}');
    expect(({} as any).polluted).toBeUndefined();
  });

  const tricky = [
    "tab\there",
    "new\nline",
    "cr\rhere",
    "back\\slash",
    "\\.",
    "\\N",
    "\\",
    'quote"s',
    "emoji 😀🎉",
    "line\u2028sep\u2029",
    "עברית RTL \u202e",
    "del\u007f",
    "ctrl\u0001\u001f",
    "",
    " ",
  ];
  test("tricky strings round-trip byte-exact, in values and keys (JSON)", async () => {
    const s = await lp.createSource();
    const event = Object.fromEntries(tricky.map((t, i) => [`${t}#${i}`, t]));
    await expectStatus(await lp.ingest(s.token, JSON.stringify([event, { all: tricky }])), 202);
    const rows = await lp.stored(s.id);
    expect(rows[0]!.raw).toEqual(event);
    expect(rows[1]!.raw).toEqual({ all: tricky });
  });
  test("tricky strings round-trip byte-exact, in values and keys (MessagePack records)", async () => {
    const s = await lp.createSource();
    const event = Object.fromEntries(tricky.map((t, i) => [`${t}#${i}`, t]));
    await expectStatus(await lp.ingest(s.token, recordPackr.pack([event, event, event, { all: tricky }]), MSGPACK), 202);
    const rows = await lp.stored(s.id);
    expect(rows.map((r) => r.raw)).toEqual([event, event, event, { all: tricky }]);
  });
  test("a tricky NDJSON body too", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, tricky.map((t) => JSON.stringify({ t })).join("\n"), NDJSON), 202);
    expect((await lp.stored(s.id)).map((r) => r.raw.t)).toEqual(tricky);
  });
});

describe("event time (dt)", () => {
  const at = "2026-11-21T12:30:41.695Z";
  // A fixed date: the longest retention keeps it as sent for years (codec/reception.ts redates a time retention would delete).
  const longLived = () => lp.createSource({ logs_retention: 3652 });
  const cases: [string, unknown, string][] = [
    ["seconds", 1795264241.695, at],
    ["seconds (integer)", 1795264241, "2026-11-21T12:30:41.000Z"],
    ["milliseconds", 1795264241695, at],
    ["microseconds", 1795264241695123, "2026-11-21T12:30:41.695123Z"],
    ["nanoseconds", 1795264241695123000, "2026-11-21T12:30:41.695123Z"],
    ["digits string (ms)", "1795264241695", at],
    ["digits string (ns)", "1795264241695123456", "2026-11-21T12:30:41.695123Z"],
    ["RFC 3339 with T", "2026-11-21T12:30:41.695Z", at],
    ["RFC 3339 with a space and an offset", "2026-11-21 14:30:41.695+02:00", at],
    ["negative offset without colon", "2026-11-21T07:30:41.695-0500", at],
    ["UTC suffix", "2026-11-21 12:30:41.695 UTC", at],
    ["no zone means UTC", "2026-11-21T12:30:41.695", at],
  ];
  test.each(cases)("%s", async (_label, dt, expected) => {
    const s = await longLived();
    await expectStatus(await lp.ingest(s.token, JSON.stringify({ dt, message: "m" })), 202);
    const [row] = await lp.stored(s.id);
    const [{ text }] = (await lp.sql`
      select to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') as text from log_events where source_id = ${Number(s.id)}`) as any;
    expect(`${text}Z`).toBe(expected.replace(/\.(\d{3})Z$/, ".$1000Z"));
    expect(row!.text).toContain(`"dt": ${JSON.stringify(dt)}`);
  });

  test("MessagePack timestamp extension", async () => {
    const s = await longLived();
    await expectStatus(await lp.ingest(s.token, packr.pack({ dt: new Date(at) }), MSGPACK), 202);
    const [row] = await lp.stored(s.id);
    expect(row!.dt.toISOString()).toBe(at);
    expect(row!.raw.dt).toBe(at);
  });

  test.each([
    ["absent", undefined],
    ["garbage", "yesterday"],
    ["a boolean", true],
    ["an object", { t: 1 }],
    ["year 10000", "10000-01-01T00:00:00Z"],
    ["31 April", "2026-04-31T00:00:00Z"],
    ["NaN string", "NaN"],
  ])("dt %s → reception time, kept as sent", async (_label, dt) => {
    const s = await lp.createSource();
    const before = Date.now();
    await expectStatus(await lp.ingest(s.token, JSON.stringify({ dt, message: "m" })), 202);
    const [row] = await lp.stored(s.id);
    expect(row!.dt.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(row!.dt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    expect(row!.raw.dt).toEqual(dt as any);
  });
});

describe("source state", () => {
  test("paused: 202, dropped and counted; resumed: stored", async () => {
    const s = await lp.createSource({ ingesting_paused: true });
    const before = lp.metrics.value("logpond_ingest_events_dropped_paused_total");
    await expectStatus(await lp.ingest(s.token, '[{"n":1},{"n":2}]'), 202);
    expect(lp.metrics.value("logpond_ingest_events_dropped_paused_total") - before).toBe(2);
    expect(await lp.stored(s.id)).toHaveLength(0);
    expect(await (await fetch(`${lp.apiUrl}/metrics`)).text()).toContain(
      `logpond_ingest_events_dropped_paused_total{protocol="better_stack",source_id="${s.id}"} 2\n`,
    );
    await lp.api("PATCH", `/api/v1/sources/${s.id}`, { ingesting_paused: false });
    await expectStatus(await lp.ingest(s.token, '{"n":3}'), 202);
    expect((await lp.stored(s.id)).map((r) => r.raw.n)).toEqual([3]);
  });

  test("deleted: the token stops at once (403) and stored events are purged", async () => {
    const s = await lp.createSource();
    await expectStatus(await lp.ingest(s.token, '[{"n":1},{"n":2}]'), 202);
    expect(await lp.stored(s.id)).toHaveLength(2);
    expect((await lp.api("DELETE", `/api/v1/sources/${s.id}`)).status).toBe(204);
    expect((await lp.ingest(s.token, '{"n":3}')).status).toBe(403);
    await waitFor("the source's events to be purged", async () => (await lp.stored(s.id)).length, { until: (n) => n === 0 });
    expect(await lp.stored(s.id)).toHaveLength(0);
  });

  test("another instance on the same database follows changes (LISTEN/NOTIFY)", async () => {
    const other = await startTestLogpond();
    try {
      const s = await lp.createSource();
      // The waits end when the other instance has heard the NOTIFY: how soon is not asserted.
      const answers = (status: number) =>
        waitFor(`the other instance to answer ${status}`, async () => (await other.ingest(s.token, '{"n":1}')).status, { until: (last) => last === status });
      expect(await answers(202)).toBe(202);
      await lp.api("PATCH", `/api/v1/sources/${s.id}`, { ingesting_paused: true });
      const dropped = other.metrics.value("logpond_ingest_events_dropped_paused_total");
      await waitFor(
        "the other instance to drop a paused source's events",
        async () => {
          await other.ingest(s.token, '{"n":2}');
          return other.metrics.value("logpond_ingest_events_dropped_paused_total");
        },
        { intervalMs: 0, until: (n) => n > dropped },
      );
      expect(other.metrics.value("logpond_ingest_events_dropped_paused_total")).toBeGreaterThan(dropped);
      await lp.api("DELETE", `/api/v1/sources/${s.id}`);
      expect(await answers(403)).toBe(403);
    } finally {
      await other.stop();
    }
  });
});

describe("the in-flight memory budget (docs/memory.md)", () => {
  test("an empty body's charge is released: a request alone over the budget still enters afterwards", async () => {
    const small = await startTestLogpond({ INGEST_INFLIGHT_MAX_BYTES: String(1024 * 1024) });
    try {
      const source = await small.createSource();
      await expectStatus(await small.ingest(source.token, ""), 406, /empty/);
      // 300 KB decompressed × COST_FACTOR is over 1 MiB: let in only because it is alone.
      const big = JSON.stringify([{ message: "x".repeat(300_000) }]);
      await expectStatus(await small.ingest(source.token, big), 202);
    } finally {
      await small.stop();
    }
  });

  test("a body is charged by its Content-Length before it is read: an upload under way holds its share", async () => {
    const small = await startTestLogpond({ INGEST_INFLIGHT_MAX_BYTES: String(1024 * 1024) });
    const socket = new net.Socket();
    try {
      const source = await small.createSource();
      const body = Buffer.from(JSON.stringify([{ message: "x".repeat(300_000) }]));
      const { hostname, port } = new URL(small.ingestUrl);
      await new Promise<void>((resolve, reject) => socket.once("error", reject).connect(Number(port), hostname, resolve));
      let answer = "";
      socket.on("data", (part) => (answer += part.toString()));
      // Headers and the first kilobyte only: the upload is under way.
      socket.write(
        `POST / HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${source.token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      socket.write(body.subarray(0, 1000));
      const inFlight = async () => Number(/^logpond_ingest_inflight_bytes (\d+)$/m.exec(await (await small.api("GET", "/metrics")).text())![1]);
      await waitFor("the upload's charge", inFlight, { intervalMs: 10, until: (bytes) => bytes >= body.length * 4 });
      expect(await inFlight()).toBe(body.length * 4);
      // A second body of the same size does not fit beside it: 503 without being read first.
      const second = await small.ingest(source.token, body);
      await expectStatus(second, 503, /Too many large requests/);
      expect(second.headers.get("retry-after")).toBe("1");
      socket.write(body.subarray(1000));
      await waitFor("the answer's headers", () => answer, { intervalMs: 10, until: (text) => text.includes("\r\n\r\n") });
      expect(answer).toStartWith("HTTP/1.1 202");
      expect(await inFlight()).toBe(0);
      await expectStatus(await small.ingest(source.token, body), 202);
    } finally {
      socket.destroy();
      await small.stop();
    }
  });
});
