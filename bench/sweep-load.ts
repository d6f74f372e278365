// bench/storage.ts part 4: sustained ingest throughput of `bun src/main.ts` (acknowledged and
// committed) while a retention sweep deletes most of the stored rows ÷ the same load without a
// sweep (before and after; their mean).
// The rows are bench/storage.ts's (sources 1..100); here they get sources rows, 30 days of
// retention, then 90 of them drop to 1 day so the sweep has ~6/7 of 90% of the rows to delete.
import type postgres from "postgres";
import { sweep } from "../src/retention/sweep";
import { spawnService, type Service } from "../test/helpers/service";

const SENDERS = 8;
const EVENTS_PER_REQUEST = 200;
const SECONDS = Number(process.env.SWEEP_LOAD_SECONDS ?? 10);

/** Flushed events so far, from the service's /metrics. */
async function flushed(service: Service): Promise<number> {
  const text = await (await fetch(`${service.apiUrl}/metrics`)).text();
  return Number(/^logpond_flush_events_total (\d+)$/m.exec(text)?.[1] ?? 0);
}

/**
 * Sustained events/s: senders for `seconds`, then the clock runs until everything acknowledged
 * is committed (what the buffer absorbed is not throughput).
 */
async function load(service: Service, token: string, seconds: number): Promise<number> {
  const body = JSON.stringify(Array.from({ length: EVENTS_PER_REQUEST }, (_, i) => ({ level: "info", message: `GET /api/items/${i} handled`, status: 200, duration_ms: i / 10 })));
  const before = await flushed(service);
  const started = performance.now();
  const stopAt = Date.now() + seconds * 1000;
  let acked = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      while (Date.now() < stopAt) {
        const response = await fetch(`${service.ingestUrl}/`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body });
        await response.arrayBuffer();
        if (response.status === 202) acked += EVENTS_PER_REQUEST;
      }
    }),
  );
  const deadline = Date.now() + 300_000;
  while ((await flushed(service)) < before + acked) {
    if (Date.now() > deadline) throw new Error("the service did not commit what it acknowledged within 5 minutes");
    await Bun.sleep(20);
  }
  return acked / ((performance.now() - started) / 1000);
}

export async function sweepRatio(url: string, sql: postgres.Sql, print: (line: string) => void): Promise<void> {
  await sql`insert into sources (id, name, platform, table_name, token, logs_retention, live_tail_pattern)
    overriding system value
    select n, 'bench ' || n, 'http', 'bench_' || n, 'bench-token-' || n, 30, '{message}' from generate_series(1, 101) n
    on conflict do nothing`;
  const service = await spawnService({ DATABASE_URL: url, LOG_LEVEL: "silent", RETENTION_SWEEP_INTERVAL_MS: "86400000" });
  try {
    const token = "bench-token-101"; // the load's own source, kept 30 days
    const before = await load(service, token, SECONDS);
    await sql`update sources set logs_retention = 1 where id <= 90`;
    const abort = new AbortController();
    const started = performance.now();
    const sweeping = sweep(sql, abort.signal, () => {}).then(
      (result) => ({ result, seconds: (performance.now() - started) / 1000 }),
      (error) => ({ error: error as Error, seconds: (performance.now() - started) / 1000 }),
    );
    const during = await load(service, token, SECONDS);
    const stillRunning = await Promise.race([sweeping.then(() => false), Bun.sleep(0).then(() => true)]);
    abort.abort();
    const swept = await sweeping;
    const after = await load(service, token, SECONDS);
    const baseline = (before + after) / 2;
    print(`ingest during a sweep: ${during.toFixed(0)} events/s vs ${baseline.toFixed(0)} without (${before.toFixed(0)} before, ${after.toFixed(0)} after) = ${(during / baseline).toFixed(3)}; the sweep ${stillRunning ? "was still running at the end of the load (stopped)" : "finished within the load"}: ${"result" in swept ? JSON.stringify({ rowsRemoved: swept.result.rowsRemoved, seconds: swept.seconds.toFixed(1) }) : `stopped after ${swept.seconds.toFixed(1)} s`}`);
  } finally {
    service.proc.kill("SIGTERM");
    await service.proc.exited;
  }
}
