// SEAL_FROM=memory with INGEST_WORKERS=2 as users run it (`bun src/main.ts`, a database of the
// test's own): the workers build the blocks of what they commit, and the supervisor's sealer
// publishes them (cluster/stagers.ts) from the first generation on — the one open since the start
// is closed once the workers listen, so nothing a user sends after the banner is read back — and
// every event is stored once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { createSource, spawnService, type Service } from "../helpers/service";
import { waitFor } from "../helpers/wait";

let db: ScratchDatabase;
let dataDir: string;
let service: Service;

beforeAll(async () => {
  db = await createScratchDatabase("workers_memory");
  dataDir = mkdtempSync(path.join(tmpdir(), "logpond-workers-memory-"));
  service = await spawnService(
    { DATABASE_URL: db.url, DATA_DIR: dataDir, INGEST_WORKERS: "2", SEAL_FROM: "memory", SEAL_WORKERS: "1", SEAL_INTERVAL_MS: "300" },
    { startTimeoutMs: 120_000 },
  );
});
afterAll(async () => {
  if (service.proc.exitCode === null && service.proc.signalCode === null) await service.stop();
  await db.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${service.apiUrl}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}

test("the workers' blocks are published from the first generation after the start: every event built from memory, stored once", async () => {
  const source = await createSource(service, "workers-memory");
  const requests = 40;
  for (let r = 0; r < requests; r++) {
    const events = Array.from({ length: 5 }, (_, i) => ({ message: `event ${r}-${i}`, n: r * 5 + i }));
    const response = await fetch(`${service.ingestUrl}/`, {
      method: "POST",
      headers: { authorization: `Bearer ${source.token}`, "content-type": "application/json" },
      body: JSON.stringify(events),
    });
    expect(response.status).toBe(202);
  }
  const sent = requests * 5;
  await waitFor("every event sealed", () => metric("logpond_sealer_events_sealed_total"), { until: (n) => n >= sent, timeoutMs: 60_000, intervalMs: 100 });
  // Why a generation was read back, if one was (the sealer's log says which worker could not vouch for it).
  const readBack = service
    .output()
    .split("\n")
    .filter((line) => line.includes("read back from its rows") || line.includes("could not open a generation"));
  expect({ fromMemory: await metric("logpond_sealer_events_from_memory_total"), readBack }).toEqual({ fromMemory: sent, readBack: [] });
  const rows = await db.sql<{ n: number }[]>`select (raw->>'n')::int as n from log_events where source_id = ${source.id} order by 1`;
  expect(rows.map((row) => row.n)).toEqual(Array.from({ length: sent }, (_, i) => i));
  expect(Number((await db.sql`select count(*)::int as n from log_blocks where generation is not null`)[0]!.n)).toBe(0);
}, 120_000);
