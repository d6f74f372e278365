// A client that stalls in the middle of its body gets a 408 within INGEST_BODY_TIMEOUT_MS, in the
// contract's error shape, and its connection is closed; one that hangs up mid-body is counted. The
// service goes on serving, counts both in /metrics, and logs no "internal error" for them (Bun's
// idle timer used to cut a stalled upload after 30 s with no answer, logged as an empty internal
// error). Raw TCP clients (node:net), real PostgreSQL.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

const BODY_TIMEOUT_MS = 500;
let lp: TestLogpond;
let source: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond({ INGEST_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS) });
  source = await lp.createSource();
});
afterAll(async () => {
  await lp.stop();
});

interface Exchange {
  socket: Socket;
  /** Everything received so far. */
  text(): string;
  closed(): boolean;
}

/** Opens a connection to the ingest listener and writes `head` (and nothing more). */
async function open(head: string): Promise<Exchange> {
  const url = new URL(lp.ingestUrl);
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  let received = "";
  let closed = false;
  socket.on("data", (part: Buffer) => (received += part.toString("latin1")));
  socket.on("close", () => (closed = true));
  socket.on("error", () => {});
  socket.write(head);
  return { socket, text: () => received, closed: () => closed };
}

function parse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf("\r\n\r\n");
  const [line, ...fields] = text.slice(0, end).split("\r\n");
  const headers = Object.fromEntries(fields.map((field) => [field.slice(0, field.indexOf(":")).toLowerCase(), field.slice(field.indexOf(":") + 1).trim()]));
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(line!)![1]), headers, body: text.slice(end + 4) };
}

async function rejected(reason: string): Promise<number> {
  const text = await (await lp.api("GET", "/metrics")).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith("logpond_ingest_requests_rejected_total{") && l.includes(`source_id="${source.id}"`) && l.includes(`reason="${reason}"`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

const head = (framing: string) => `POST / HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${source.token}\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`;

test.each([
  ["Content-Length, 10 of 100 bytes sent", () => `${head("content-length: 100")}[{"stall":`],
  ["chunked, one chunk sent and no end", () => `${head("transfer-encoding: chunked")}a\r\n[{"stall":\r\n`],
])("a body that stalls (%s) → 408 with the error body, the connection closed; the service serves on", async (_name, sent) => {
  const before = await rejected("body_timeout");
  const client = await open(sent());
  try {
    await waitFor("an answer and the connection's end", () => client.closed());
    const answer = parse(client.text());
    expect(answer.status).toBe(408);
    expect(answer.headers["content-type"]).toStartWith("application/json");
    expect(answer.headers.connection).toBe("close");
    expect(answer.headers["access-control-allow-origin"]).toBe("*");
    const body = JSON.parse(answer.body) as { errors: string };
    expect(Object.keys(body)).toEqual(["errors"]);
    expect(body.errors).toContain(`within ${BODY_TIMEOUT_MS} ms (INGEST_BODY_TIMEOUT_MS)`);
  } finally {
    client.socket.destroy();
  }
  expect(await rejected("body_timeout")).toBe(before + 1);
  // Serving on: an ordinary request is taken and stored; nothing of the stalled one is.
  expect((await lp.ingest(source.token, JSON.stringify({ after: _name }))).status).toBe(202);
  const stored = (await lp.stored(source.id)).map((row) => row.raw);
  expect(stored).toContainEqual({ after: _name });
  expect(stored.some((raw) => "stall" in raw)).toBe(false);
  expect(lp.logs.filter((line) => line.includes("internal error"))).toEqual([]);
});

test("a client that hangs up mid-body is counted (body_incomplete), not logged as an internal error", async () => {
  const before = await rejected("body_incomplete");
  const client = await open(`${head("content-length: 100")}[{"gone":`);
  // Hang up once the handler holds the request (its declared length is charged while it reads).
  const inFlight = async () => Number(/^logpond_ingest_inflight_bytes (\d+)$/m.exec(await (await lp.api("GET", "/metrics")).text())![1]);
  await waitFor("the request to be read", async () => (await inFlight()) > 0);
  client.socket.destroy();
  await waitFor("the refusal to be counted", async () => (await rejected("body_incomplete")) === before + 1);
  expect(await inFlight()).toBe(0);
  expect(lp.logs.filter((line) => line.includes("internal error"))).toEqual([]);
});
