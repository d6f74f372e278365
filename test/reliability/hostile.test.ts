// Hostile HTTP: bad requests written byte by byte on a raw socket (so nothing is tidied up by a
// client library), each with the status it must get. After every one the service must still
// answer a health probe, and at the end only the few valid requests' events may be stored.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Packr } from "msgpackr";
import { connect } from "node:net";
import * as zlib from "node:zlib";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

const LIMITS = { INGEST_MAX_BODY_BYTES: "262144", INGEST_MAX_DECOMPRESSED_BYTES: "1048576", INGEST_MAX_EVENT_BYTES: "65536" };

let lp: TestLogpond;
let source: TestSource;
let port: number;
beforeAll(async () => {
  lp = await startTestLogpond(LIMITS);
  source = await lp.createSource();
  port = Number(new URL(lp.ingestUrl).port);
});
afterAll(async () => {
  await lp.stop();
});

interface Sent {
  /** Status line's code, or null when the connection ended without an answer. */
  status: number | null;
  text: string;
}

/** Writes the parts (pausing between them), then waits for the answer or the end of the connection. */
function raw(parts: (string | Uint8Array)[], options: { pauseMs?: number; hangUp?: boolean; waitMs?: number } = {}): Promise<Sent> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    const received: Buffer[] = [];
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(received).toString("latin1");
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: match ? Number(match[1]) : null, text });
    };
    const timer = setTimeout(finish, options.waitMs ?? 10_000);
    socket.on("data", (data: Buffer) => {
      received.push(data);
      // One answer is all a test needs: stop once its body (by Content-Length) is complete.
      const text = Buffer.concat(received).toString("latin1");
      const head = text.indexOf("\r\n\r\n");
      const length = /\r\ncontent-length: (\d+)/i.exec(text);
      if (head >= 0 && (!length || text.length - head - 4 >= Number(length[1]))) finish();
    });
    socket.on("error", finish);
    socket.on("close", finish);
    socket.on("connect", async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        socket.write(part);
        if (options.pauseMs) await Bun.sleep(options.pauseMs);
      }
      if (options.hangUp) {
        await Bun.sleep(50);
        finish();
      }
    });
  });
}

const CRLF = "\r\n";
function request(headers: Record<string, string>, body: string | Uint8Array = "", line = "POST / HTTP/1.1"): (string | Uint8Array)[] {
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  const all = { host: "127.0.0.1", connection: "close", "content-length": String(bytes.length), ...headers };
  const head = [
    line,
    ...Object.entries(all)
      .filter(([, v]) => v !== "")
      .map(([k, v]) => `${k}: ${v}`),
  ].join(CRLF);
  return [head + CRLF + CRLF, bytes];
}
const bearer = () => `Bearer ${source.token}`;
const okJson = (extra: Record<string, string> = {}) => ({ authorization: bearer(), "content-type": "application/json", ...extra });
const packr = new Packr({ useRecords: false });

interface Case {
  name: string;
  send: () => Promise<Sent>;
  /** Expected status; null: the connection ends unanswered (the client hung up first). */
  status: number | null;
  /** Events this case stores when accepted. */
  stores?: number;
  errors?: RegExp;
}

const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
const msgpackDeep = (n: number) => Buffer.concat([Buffer.alloc(n, 0x91), Buffer.from([0x80])]);

const cases: Case[] = [
  // Authentication
  { name: "no Authorization header", status: 401, send: () => raw(request({ "content-type": "application/json" }, "{}")) },
  { name: "Bearer with no token", status: 401, send: () => raw(request({ authorization: "Bearer ", "content-type": "application/json" }, "{}")) },
  { name: "Basic credentials", status: 401, send: () => raw(request({ authorization: "Basic dXNlcjpwYXNz", "content-type": "application/json" }, "{}")) },
  {
    name: "BearerX scheme glued to the token",
    status: 401,
    send: () => raw(request({ authorization: `Bearer${source.token}`, "content-type": "application/json" }, "{}")),
  },
  { name: "unknown token", status: 403, send: () => raw(request({ authorization: "Bearer nope", "content-type": "application/json" }, "{}")) },
  {
    name: "valid token with one character more",
    status: 403,
    send: () => raw(request({ authorization: `${bearer()}x`, "content-type": "application/json" }, "{}")),
  },
  { name: "4 KiB token", status: 403, send: () => raw(request({ authorization: `Bearer ${"A".repeat(4096)}`, "content-type": "application/json" }, "{}")) },
  {
    name: "16 KiB token (header too large)",
    status: 431,
    send: () => raw(request({ authorization: `Bearer ${"A".repeat(16384)}`, "content-type": "application/json" }, "{}")),
  },
  {
    name: "token in the query string only",
    status: 401,
    send: () => raw(request({ "content-type": "application/json" }, "{}", `POST /?access_token=${source.token} HTTP/1.1`)),
  },
  // Lengths and framing
  {
    name: "Content-Length far above the limit (small body)",
    status: 413,
    errors: /INGEST_MAX_BODY_BYTES/,
    send: () => raw(request({ ...okJson(), "content-length": "99999999999" }, "{}"), { waitMs: 20_000 }),
  },
  { name: "negative Content-Length", status: 400, send: () => raw(request({ ...okJson(), "content-length": "-5" }, "{}")) },
  { name: "non-numeric Content-Length", status: 400, send: () => raw(request({ ...okJson(), "content-length": "12abc" }, "{}")) },
  {
    name: "Content-Length and chunked together (smuggling)",
    status: 400,
    send: () => raw(request({ ...okJson(), "transfer-encoding": "chunked" }, "2\r\n{}\r\n0\r\n\r\n")),
  },
  {
    name: "chunked with a bad chunk size",
    status: 400,
    send: () => raw(request({ ...okJson(), "content-length": "", "transfer-encoding": "chunked" }, "zz\r\n{}\r\n0\r\n\r\n")),
  },
  {
    name: "chunked body over INGEST_MAX_BODY_BYTES",
    status: 413,
    errors: /INGEST_MAX_BODY_BYTES/,
    send: () => {
      const piece = `${(65536).toString(16)}\r\n${"x".repeat(65536)}\r\n`;
      return raw(request({ ...okJson(), "content-length": "", "transfer-encoding": "chunked" }, `${piece.repeat(6)}0\r\n\r\n`));
    },
  },
  { name: "half a body, then a hang-up", status: null, send: () => raw(request({ ...okJson(), "content-length": "100" }, '[{"half":'), { hangUp: true }) },
  { name: "headers only, then a hang-up", status: null, send: () => raw([`POST / HTTP/1.1\r\nhost: x\r\nauthorization: ${bearer()}\r\n`], { hangUp: true }) },
  {
    name: "slow sender: a valid body in 6 pieces over 1.2 s",
    status: 202,
    stores: 1,
    send: () => {
      const [head, body] = request(okJson(), '{"slow":"sender","n":1}') as [string, Buffer];
      return raw([head, ...[0, 4, 8, 12, 16, 20].map((i) => body.subarray(i, i + 4))], { pauseMs: 200 });
    },
  },
  {
    name: "slow sender who stops mid-body and hangs up",
    status: null,
    send: () => raw(request({ ...okJson(), "content-length": "40" }, '{"slow":"quitter"'), { pauseMs: 300, hangUp: true }),
  },
  { name: "request line garbage", status: 400, send: () => raw(["GARBAGE\r\n\r\n"]) },
  { name: "64 KiB header", status: 431, send: () => raw(request({ ...okJson(), "x-big": "y".repeat(65536) }, "{}")) },
  { name: "GET on the ingestion path", status: 404, send: () => raw(request(okJson(), "", "GET / HTTP/1.1")) },
  // Encodings
  { name: "unsupported Content-Type", status: 415, errors: /application\/json/, send: () => raw(request({ ...okJson(), "content-type": "text/plain" }, "{}")) },
  {
    name: "no Content-Type, a body neither JSON nor MessagePack",
    status: 415,
    errors: /missing/,
    send: () => raw(request({ authorization: bearer() }, "hello")),
  },
  { name: "unsupported Content-Encoding", status: 415, errors: /gzip/, send: () => raw(request(okJson({ "content-encoding": "compress" }), "{}")) },
  {
    name: "stacked Content-Encoding",
    status: 415,
    send: () => raw(request(okJson({ "content-encoding": "gzip, br" }), zlib.brotliCompressSync(zlib.gzipSync("{}")))),
  },
  { name: "gzip header on a plain body", status: 406, send: () => raw(request(okJson({ "content-encoding": "gzip" }), '{"plain":true}')) },
  { name: "truncated gzip", status: 406, send: () => raw(request(okJson({ "content-encoding": "gzip" }), zlib.gzipSync('{"a":"truncated"}').subarray(0, 20))) },
  {
    name: "gzip bomb (64 MiB of zeros in ~64 KiB)",
    status: 413,
    errors: /INGEST_MAX_DECOMPRESSED_BYTES/,
    send: () => raw(request(okJson({ "content-encoding": "gzip" }), zlib.gzipSync(Buffer.alloc(64 << 20), { level: 9 }))),
  },
  { name: "zstd bomb", status: 413, send: () => raw(request(okJson({ "content-encoding": "zstd" }), zlib.zstdCompressSync(Buffer.alloc(32 << 20)))) },
  {
    name: "brotli with trailing garbage",
    status: 406,
    send: () => raw(request(okJson({ "content-encoding": "br" }), Buffer.concat([zlib.brotliCompressSync("{}"), Buffer.from("junk")]))),
  },
  // Bodies
  { name: "empty body", status: 406, send: () => raw(request(okJson(), "")) },
  { name: "JSON with trailing bytes", status: 406, send: () => raw(request(okJson(), '{"a":1} trailing')) },
  { name: "truncated JSON", status: 406, send: () => raw(request(okJson(), '[{"a":1},{"b":')) },
  { name: "a JSON number", status: 406, send: () => raw(request(okJson(), "42")) },
  { name: "an array with a non-object at index 1", status: 406, errors: /event 1/, send: () => raw(request(okJson(), '[{"a":1},2,{"c":3}]')) },
  { name: "100k nested JSON arrays", status: 406, send: () => raw(request(okJson(), `{"deep":${deep(100_000)}}`)) },
  {
    name: "100k nested MessagePack arrays",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, Buffer.concat([Buffer.from([0x81, 0xa1, 0x64]), msgpackDeep(100_000)]))),
  },
  {
    name: "truncated MessagePack",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, packr.pack([{ a: "truncated message" }]).subarray(0, 9))),
  },
  {
    name: "MessagePack with trailing bytes",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, Buffer.concat([packr.pack({ a: 1 }), Buffer.from([0xc0, 0xc0])]))),
  },
  {
    name: "MessagePack map32 claiming 4 billion entries",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, Buffer.from([0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 0x61]))),
  },
  {
    name: "MessagePack str32 claiming 4 GiB",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, Buffer.from([0x81, 0xa1, 0x61, 0xdb, 0xff, 0xff, 0xff, 0xf0, 0x61]))),
  },
  {
    name: "msgpackr structured-clone cycle (an object that contains itself)",
    status: 406,
    send: () => {
      const cyclic: Record<string, unknown> = { name: "loop" };
      cyclic.self = cyclic;
      return raw(request({ ...okJson(), "content-type": "application/msgpack" }, new Packr({ structuredClone: true }).pack(cyclic)));
    },
  },
  {
    name: "MessagePack unknown extension type 0x13",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, Buffer.from([0x81, 0xa1, 0x65, 0xd4, 0x13, 0x00]))),
  },
  {
    name: "MessagePack string instead of a map",
    status: 406,
    send: () => raw(request({ ...okJson(), "content-type": "application/msgpack" }, packr.pack("just a string"))),
  },
  {
    name: "NDJSON with a bad third line",
    status: 406,
    errors: /2/,
    send: () => raw(request({ ...okJson(), "content-type": "application/x-ndjson" }, '{"a":1}\n{"b":2}\n{"c":\n')),
  },
  {
    name: "one event over INGEST_MAX_EVENT_BYTES",
    status: 413,
    errors: /INGEST_MAX_EVENT_BYTES/,
    send: () => raw(request(okJson(), JSON.stringify([{ small: 1 }, { big: "z".repeat(70_000) }]))),
  },
  {
    name: "invalid UTF-8 inside a JSON string (kept, replaced)",
    status: 202,
    stores: 1,
    send: () => raw(request(okJson(), Buffer.from([...Buffer.from('{"bad":"'), 0xff, 0xfe, ...Buffer.from('"}')]))),
  },
];

test("the table holds at least 30 hostile requests", () => {
  expect(cases.filter((c) => c.status !== 202).length).toBeGreaterThanOrEqual(30);
});

for (const c of cases) {
  test(`${c.name} → ${c.status ?? "no answer"}`, async () => {
    const sent = await c.send();
    if (sent.status !== c.status) throw new Error(`expected ${c.status}, got ${sent.status}:\n${sent.text.slice(0, 400)}`);
    if (c.errors) expect(sent.text).toMatch(c.errors);
    const health = await fetch(`${lp.ingestUrl}/health`);
    expect(health.status).toBe(200);
  });
}

test("only the accepted requests' events were stored", async () => {
  const expected = cases.filter((c) => c.status === 202).reduce((sum, c) => sum + (c.stores ?? 0), 0);
  const stored = await lp.stored(source.id);
  expect(stored).toHaveLength(expected);
  expect(stored.map((row) => row.raw)).toEqual([{ slow: "sender", n: 1 }, { bad: "\uFFFD\uFFFD" }]);
});
