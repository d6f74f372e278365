// The service as users run it: `bun src/main.ts` or `npm start` in its own process. SIGTERM drains
// and exits 0, also when sent to npm; a bad configuration stops the start with every problem listed;
// a second logpond on ports in use, or a HOST it cannot listen on, stops with a clear message; the
// embedded PostgreSQL keeps data across restarts and survives a logpond killed with SIGKILL.
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { embeddedCluster } from "../helpers/faults";
import { MAIN, SERVICE_API_TOKEN, spawnService } from "../helpers/service";
import { waitFor } from "../helpers/wait";

const API_TOKEN = SERVICE_API_TOKEN;
const start = spawnService;

const auth = { authorization: `Bearer ${API_TOKEN}` };

test("SIGTERM drains the buffer and exits 0", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-life-"));
  // A long flush interval: the events are still buffered when SIGTERM arrives.
  const lp = await start({ DATABASE_URL: process.env.LOGPOND_TEST_DATABASE_URL!, DATA_DIR: dataDir, FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000000" });
  const created = (await (await fetch(`${lp.apiUrl}/api/v1/sources`, { method: "POST", headers: auth, body: '{"name":"sigterm"}' })).json()) as any;
  const events = Array.from({ length: 500 }, (_, i) => ({ i }));
  const response = await fetch(`${lp.ingestUrl}/`, {
    method: "POST",
    headers: { authorization: `Bearer ${created.data.attributes.token}`, "content-type": "application/json" },
    body: JSON.stringify(events),
  });
  expect(response.status).toBe(202);
  lp.proc.kill("SIGTERM");
  expect(await lp.proc.exited).toBe(0);
  expect(lp.output()).toContain("nothing left behind");

  const { default: postgres } = await import("postgres");
  const sql = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1 });
  const [row] = await sql`select count(*)::int as count from log_events where source_id = ${Number(created.data.id)}`;
  await sql.end();
  expect(row?.count).toBe(500);
  rmSync(dataDir, { recursive: true, force: true });
});

test("LOG_LEVEL=silent: the banner, and no log line", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-silent-"));
  try {
    const lp = await start({ DATABASE_URL: process.env.LOGPOND_TEST_DATABASE_URL!, DATA_DIR: dataDir, LOG_LEVEL: "silent" });
    lp.proc.kill("SIGTERM");
    expect(await lp.proc.exited).toBe(0);
    expect(lp.output()).toContain("logpond is running");
    // Log lines open with their time; the info level's stop says "stopped; nothing left behind".
    expect(lp.output()).not.toMatch(/^\d{4}-\d\d-\d\dT/m);
    expect(lp.output()).not.toContain("stopped");
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a bad configuration lists every problem and exits 2", async () => {
  const proc = Bun.spawn([process.execPath, MAIN], {
    env: { ...process.env, API_PORT: "x", INGEST_ACK: "maybe", FLUSH_INTERVAL_MS: "0" },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(await proc.exited).toBe(2);
  const stderr = await new Response(proc.stderr as ReadableStream).text();
  expect(stderr).toContain("API_PORT");
  expect(stderr).toContain("INGEST_ACK");
  expect(stderr).toContain("FLUSH_INTERVAL_MS");
});

test("embedded PostgreSQL: data survives a restart and a SIGKILLed logpond; SIGTERM leaves no postgres", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-embedded-"));
  const env = { DATA_DIR: dataDir, DATABASE_URL: "" };
  try {
    const first = await start(env);
    const created = await fetch(`${first.apiUrl}/api/v1/sources`, { method: "POST", headers: auth, body: '{"name":"kept"}' });
    expect(created.status).toBe(201);
    first.proc.kill("SIGKILL");
    await first.proc.exited;

    // The postmaster of the killed logpond is still running; the next start must cope.
    const second = await start(env);
    expect(second.output()).toContain("left running by an earlier logpond");
    const list = (await (await fetch(`${second.apiUrl}/api/v1/sources`, { headers: auth })).json()) as any;
    expect(list.data.map((s: any) => s.attributes.name)).toEqual(["kept"]);
    second.proc.kill("SIGTERM");
    expect(await second.proc.exited).toBe(0);

    const ps = Bun.spawnSync(["ps", "-eo", "args"]).stdout.toString();
    expect(ps).not.toContain(dataDir);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);

test("SIGTERM while starting (its embedded PostgreSQL being made or started): it stops once started, exit 0, nothing left running", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-early-term-"));
  try {
    const proc = Bun.spawn([process.execPath, MAIN], {
      env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", API_PORT: "0", INGEST_PORT: "0", EMBEDDED_PG_PORT: "0", API_TOKEN },
      stdout: "pipe",
      stderr: "pipe",
    });
    // initdb's bootstrap, then the postmaster, hold this file: logpond is still starting then.
    await waitFor("the embedded cluster's lock file", () => existsSync(path.join(embeddedCluster(dataDir), "postmaster.pid")), { timeoutMs: 60_000 });
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    const left = Bun.spawnSync(["ps", "-eo", "pid,args"])
      .stdout.toString()
      .split("\n")
      .filter((line) => line.includes(dataDir));
    expect(left).toEqual([]);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);

test.each([
  ["npm start", ["npm", "start"]],
  ["bun run start", [process.execPath, "run", "start"]],
])(
  "SIGTERM to `%s` stops logpond and its embedded PostgreSQL: exit 0, nothing left running",
  async (_, command) => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-launcher-"));
    try {
      const lp = await start({ DATA_DIR: dataDir, DATABASE_URL: "" }, { command });
      const children = () =>
        Bun.spawnSync(["ps", "-eo", "pid,args"])
          .stdout.toString()
          .split("\n")
          .filter((line) => line.includes(dataDir));
      expect(children().length).toBeGreaterThan(0); // the postmaster, whose -D names the data folder
      lp.proc.kill("SIGTERM"); // to the launcher itself, as `docker stop` or systemd would send it
      expect(await lp.proc.exited).toBe(0);
      expect(lp.output()).toContain("nothing left behind");
      expect(children()).toEqual([]);
      expect(
        await fetch(`${lp.apiUrl}/health`).then(
          () => "answered",
          () => "closed",
        ),
      ).toBe("closed");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  },
  120_000,
);

test("a second logpond on ports in use exits 1 saying so, and the first keeps all its traffic", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-first-"));
  const otherDir = mkdtempSync(path.join(tmpdir(), "logpond-second-"));
  const first = await start({ DATABASE_URL: process.env.LOGPOND_TEST_DATABASE_URL!, DATA_DIR: dataDir });
  try {
    const ports = { API_PORT: new URL(first.apiUrl).port, INGEST_PORT: new URL(first.ingestUrl).port };
    const second = Bun.spawn([process.execPath, MAIN], {
      env: { ...process.env, ...ports, API_TOKEN: "another-token-0123456789", DATA_DIR: otherDir, EMBEDDED_PG_PORT: "0" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await second.exited).toBe(1);
    const stderr = await new Response(second.stderr as ReadableStream).text();
    expect(stderr).toContain(`API_PORT ${ports.API_PORT} and INGEST_PORT ${ports.INGEST_PORT}`);
    expect(stderr).toContain("already in use");

    const created = (await (await fetch(`${first.apiUrl}/api/v1/sources`, { method: "POST", headers: auth, body: '{"name":"one instance"}' })).json()) as any;
    const statuses = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        fetch(`${first.ingestUrl}/`, {
          method: "POST",
          headers: { authorization: `Bearer ${created.data.attributes.token}`, "content-type": "application/json" },
          body: JSON.stringify({ message: `request ${i}` }),
        }).then((response) => response.status),
      ),
    );
    expect(statuses.filter((status) => status !== 202)).toEqual([]);
  } finally {
    first.proc.kill("SIGTERM");
    expect(await first.proc.exited).toBe(0);
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(otherDir, { recursive: true, force: true });
  }
}, 120_000);

test("a HOST that does not resolve stops the start saying so, naming it, before the database starts", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-host-"));
  try {
    // Ports 0 as well: the host is tried whatever the ports (with them it used to pass the check).
    for (const ports of [{ API_PORT: "0", INGEST_PORT: "0" }, {}]) {
      const proc = Bun.spawn([process.execPath, MAIN], {
        env: { ...process.env, HOST: "not-a-host", API_TOKEN, DATA_DIR: dataDir, DATABASE_URL: "", EMBEDDED_PG_PORT: "0", ...ports },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(await proc.exited).toBe(1);
      const stderr = await new Response(proc.stderr as ReadableStream).text();
      expect(stderr).toContain('logpond: could not start: HOST="not-a-host" cannot be resolved to an address');
      expect(stderr).not.toContain("already in use");
    }
    // The embedded PostgreSQL was never started: its data folder was not made.
    expect(Bun.spawnSync(["ls", "-A", dataDir]).stdout.toString().trim()).toBe("");
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
