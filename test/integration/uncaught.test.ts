// The process-wide handlers main.ts installs (src/uncaught.ts), in a real `bun src/main.ts`: an
// error nothing handles is injected by signal (test/helpers/inject-uncaught.ts, preloaded). A
// rejection is printed with its stack, counted in /metrics, and logpond serves on; an exception
// is printed and counted too, and logpond stops as on SIGTERM: what it acknowledged is written,
// and it exits 1. Without the handlers bun exited 1 at once, the buffer lost.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { createSource, SERVICE_API_TOKEN, spawnService, type Service } from "../helpers/service";
import { waitFor } from "../helpers/wait";

const ROOT = path.join(import.meta.dir, "..", "..");
const COMMAND = [process.execPath, "--preload", path.join(ROOT, "test", "helpers", "inject-uncaught.ts"), path.join(ROOT, "src", "main.ts")];

async function start(kind: "rejection" | "exception", env: Record<string, string> = {}): Promise<{ service: Service; dataDir: string }> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "logpond-uncaught-"));
  const service = await spawnService(
    { DATABASE_URL: process.env.LOGPOND_TEST_DATABASE_URL!, DATA_DIR: dataDir, LOGPOND_TEST_UNCAUGHT: kind, ...env },
    { command: COMMAND },
  );
  return { service, dataDir };
}

async function uncaught(service: Service): Promise<Record<string, number>> {
  const text = await (await fetch(`${service.apiUrl}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^logpond_uncaught_errors_total\{kind="(\w+)"\} (\d+)$/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

async function send(service: Service, token: string, events: unknown[]): Promise<number> {
  const response = await fetch(`${service.ingestUrl}/`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(events),
  });
  return response.status;
}

async function stored(sourceId: number): Promise<number> {
  const sql = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from log_events where source_id = ${sourceId}`;
    return row!.n;
  } finally {
    await sql.end();
  }
}

test("an unhandled rejection is printed with its stack and counted; logpond serves on", async () => {
  const { service, dataDir } = await start("rejection");
  try {
    expect(await uncaught(service)).toEqual({ rejection: 0, exception: 0 });
    const source = await createSource(service, "uncaught rejection");
    expect(await send(service, source.token, [{ n: 1 }])).toBe(202);
    service.proc.kill("SIGUSR2");
    await waitFor("the first rejection to be counted", async () => (await uncaught(service)).rejection === 1);
    service.proc.kill("SIGUSR2");
    await waitFor("the second rejection to be counted", async () => (await uncaught(service)).rejection === 2);
    expect(service.output()).toMatch(/uncaught: a promise was rejected with no handler; serving on: Error: injected rejection\n\s+at /);
    // Serving on: ingestion, the query API, and the stop all work as before.
    expect(await send(service, source.token, [{ n: 2 }, { n: 3 }])).toBe(202);
    const page = await fetch(`${service.apiUrl}/api/v2/query/live-tail?source_ids=${source.id}`, { headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` } });
    expect(page.status).toBe(200);
    expect(await uncaught(service)).toEqual({ rejection: 2, exception: 0 });
    expect(await service.stop()).toBe(0);
    expect(await stored(source.id)).toBe(3);
  } finally {
    if (service.proc.exitCode === null) service.proc.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("an uncaught exception is printed with its stack; logpond stops as on SIGTERM, writes what it acknowledged, exits 1", async () => {
  // A long flush interval: the events are still buffered when the exception comes.
  const { service, dataDir } = await start("exception", { FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000000" });
  try {
    const source = await createSource(service, "uncaught exception");
    expect(
      await send(
        service,
        source.token,
        Array.from({ length: 500 }, (_, n) => ({ n })),
      ),
    ).toBe(202);
    service.proc.kill("SIGUSR2");
    expect(await service.proc.exited).toBe(1);
    const output = service.output();
    expect(output).toMatch(/uncaught: an exception escaped a callback; state may be inconsistent, stopping as on SIGTERM: Error: injected exception\n\s+at /);
    expect(output).toContain("uncaught exception: stopping (draining");
    expect(output).toContain("stopped; nothing left behind");
    expect(await stored(source.id)).toBe(500);
  } finally {
    if (service.proc.exitCode === null) service.proc.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  }
});
