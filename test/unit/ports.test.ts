// The checks before the start (http/ports.ts): a HOST that does not resolve or is no address of
// this machine is reported as such, naming the value (it was reported as "ports already in use"),
// whatever the ports; a port taken is reported as in use. Real sockets on loopback.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import { assertPortsFree, HostError, PortInUseError } from "../../src/http/ports";

let taken: Server;
let port: number;
beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen({ host: "127.0.0.1", port: 0, exclusive: true }, resolve));
  port = (taken.address() as { port: number }).port;
});
afterAll(() => {
  taken.close();
});

const failure = (host: string, ports: Record<string, number>, variable = "HOST") =>
  assertPortsFree(Object.fromEntries(Object.entries(ports).map(([name, port]) => [name, { host, variable, port }]))).then(
    () => undefined,
    (error: Error) => error,
  );

test.each([
  ["not-a-host", /^HOST="not-a-host" cannot be resolved to an address\. Set it to an address of this machine/],
  ["999.1.1.1", /^HOST="999\.1\.1\.1" cannot be resolved to an address/],
  // TEST-NET-1 (RFC 5737): an address, but never one of this machine's.
  ["192.0.2.1", /^HOST="192\.0\.2\.1" \(192\.0\.2\.1\) cannot be listened on: .*EADDRNOTAVAIL/],
])("HOST=%s, with free ports or port 0: the host is named as the problem, not the ports", async (host, message) => {
  for (const ports of [
    { API_PORT: 0, INGEST_PORT: 0 },
    { API_PORT: port, INGEST_PORT: 0 },
  ]) {
    const error = await failure(host, ports);
    expect(error).toBeInstanceOf(HostError);
    expect(error!.message).toMatch(message);
    expect(error!.message).not.toContain("already in use");
  }
});

test("the variable the host came from is the one named", async () => {
  expect((await failure("not-a-host", { INGEST_PORT: 0 }, "INGEST_HOST"))!.message).toStartWith('INGEST_HOST="not-a-host" cannot be resolved');
});

test("a port taken on a good host is reported as in use, naming the listener", async () => {
  const error = await failure("127.0.0.1", { API_PORT: port, INGEST_PORT: 0 });
  expect(error).toBeInstanceOf(PortInUseError);
  expect(error!.message).toStartWith(`API_PORT ${port} on 127.0.0.1: already in use`);
});

test.each(["127.0.0.1", "localhost", "0.0.0.0"])("HOST=%s with port 0 passes", async (host) => {
  expect(await failure(host, { API_PORT: 0, INGEST_PORT: 0 })).toBeUndefined();
});

test("a bracketed IPv6 host (as Bun.serve takes it) is tried without its brackets", async () => {
  const plain = await failure("::1", { API_PORT: 0 });
  if (plain !== undefined) return console.log(`no IPv6 loopback here (${plain.message}); skipped`);
  expect(await failure("[::1]", { API_PORT: 0 })).toBeUndefined();
});
