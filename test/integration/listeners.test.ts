// API_HOST and INGEST_HOST: each listener binds its own address (both HOST unless set), so
// ingestion can face a network while the management API stays on loopback. Linux answers on all
// of 127.0.0.0/8, which gives two distinct local addresses; elsewhere the tests are skipped.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import { loadConfig } from "../../src/config";
import { PortInUseError } from "../../src/http/ports";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";

const linux = process.platform === "linux";
if (!linux) console.warn("listeners.test.ts: skipped, 127.0.0.2 is a local address on Linux only");

/** What a connection to this URL gets: an answer's status, or the connection error's code. */
async function reach(url: string): Promise<number | string> {
  try {
    const response = await fetch(url);
    await response.body?.cancel();
    return response.status;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

const on = (url: string, host: string) => {
  const moved = new URL(url);
  moved.hostname = host;
  return moved.toString().replace(/\/$/, "");
};

test("both default to HOST; each may be set on its own", () => {
  expect(loadConfig({})).toMatchObject({ apiHost: "127.0.0.1", ingestHost: "127.0.0.1" });
  expect(loadConfig({ HOST: "0.0.0.0" })).toMatchObject({ apiHost: "0.0.0.0", ingestHost: "0.0.0.0" });
  expect(loadConfig({ HOST: "0.0.0.0", API_HOST: "127.0.0.1" })).toMatchObject({ apiHost: "127.0.0.1", ingestHost: "0.0.0.0" });
  expect(loadConfig({ INGEST_HOST: "::" })).toMatchObject({ apiHost: "127.0.0.1", ingestHost: "::" });
});

describe.skipIf(!linux)("API_HOST=127.0.0.1, INGEST_HOST=127.0.0.2", () => {
  let lp: TestLogpond;
  beforeAll(async () => {
    lp = await startTestLogpond({ API_HOST: "127.0.0.1", INGEST_HOST: "127.0.0.2" });
  });
  afterAll(async () => {
    await lp?.stop();
  });

  test("each listener answers on its own address only", async () => {
    expect(new URL(lp.apiUrl).hostname).toBe("127.0.0.1");
    expect(new URL(lp.ingestUrl).hostname).toBe("127.0.0.2");
    expect(await reach(`${lp.apiUrl}/health`)).toBe(200);
    expect(await reach(`${lp.ingestUrl}/health`)).toBe(200);
    // The management port on the ingestion address, and the other way round: nobody listens.
    expect(await reach(`${on(lp.apiUrl, "127.0.0.2")}/health`)).toBe("ECONNREFUSED");
    expect(await reach(`${on(lp.ingestUrl, "127.0.0.1")}/health`)).toBe("ECONNREFUSED");
  });

  test("sources' ingesting_host names the ingestion address, and ingestion works there", async () => {
    const source = await lp.createSource();
    expect(source.attributes.ingesting_host).toBe(`127.0.0.2:${new URL(lp.ingestUrl).port}`);
    expect((await lp.ingest(source.token, '{"message":"on 127.0.0.2"}')).status).toBe(202);
    expect((await lp.stored(source.id)).map((row) => row.raw.message)).toEqual(["on 127.0.0.2"]);
  });
});

describe.skipIf(!linux)("a port in use is checked on the listener's own address", () => {
  let taken: Server;
  let port: number;
  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen({ host: "127.0.0.2", port: 0, exclusive: true }, resolve));
    port = (taken.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => taken.close(resolve));
  });

  test("taken there: the start stops naming the port and the address", async () => {
    const start = startTestLogpond({ API_HOST: "127.0.0.1", INGEST_HOST: "127.0.0.2", INGEST_PORT: String(port) });
    const error = await start.then(
      async (lp) => {
        await lp.stop();
        return undefined;
      },
      (e) => e,
    );
    expect(error).toBeInstanceOf(PortInUseError);
    expect(error.message).toContain(`INGEST_PORT ${port} on 127.0.0.2: already in use`);
  });

  test("the same port on another address is free", async () => {
    const lp = await startTestLogpond({ API_HOST: "127.0.0.1", INGEST_HOST: "127.0.0.3", INGEST_PORT: String(port) });
    try {
      expect(lp.ingestUrl).toBe(`http://127.0.0.3:${port}`);
      expect(await reach(`${lp.ingestUrl}/health`)).toBe(200);
    } finally {
      await lp.stop();
    }
  });
});
