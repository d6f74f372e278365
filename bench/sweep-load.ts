// bench/storage.ts part 4: sustained ingest throughput of `bun src/main.ts` (acknowledged and
// committed) while a retention sweep deletes stored rows ÷ the same load without a sweep.
// The rows are bench/storage.ts's (sources 1..100); here they get sources rows, 30 days of
// retention; before each window with a sweep, another fifth of sources 1..90 drops to 1 day, so
// every sweep has rows of its own to delete on every page (6/7 of that fifth's rows).
// Windows alternate without / with, ROUNDS of each plus a last one without; each window with a
// sweep is divided by the mean of its two neighbours and the median of those ratios is the
// figure, so background work (a checkpoint, autovacuum, a warming JIT) cannot decide it alone:
// a single before/during/after triple measured two sweep-free windows 16% apart on an idle
// machine (240k and 285k events/s). Each window reports PostgreSQL's WAL and autovacuum.
// A CHECKPOINT before every window: what the bench's own load and VACUUM dirtied (2.4 GB of WAL)
// is written back first, and every window pays full-page images for the pages it changes.
import type postgres from "postgres";
import { sweep } from "../src/retention/sweep";
import { spawnService, type Service } from "../test/helpers/service";
import { waitFor } from "../test/helpers/wait";

const SENDERS = 8;
const EVENTS_PER_REQUEST = 200;
const SECONDS = Number(process.env.SWEEP_LOAD_SECONDS ?? 8);
const ROUNDS = Number(process.env.SWEEP_LOAD_ROUNDS ?? 5);

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
  const body = JSON.stringify(
    Array.from({ length: EVENTS_PER_REQUEST }, (_, i) => ({ level: "info", message: `GET /api/items/${i} handled`, status: 200, duration_ms: i / 10 })),
  );
  const before = await flushed(service);
  const started = performance.now();
  const stopAt = Date.now() + seconds * 1000;
  let acked = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      while (Date.now() < stopAt) {
        const response = await fetch(`${service.ingestUrl}/`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body,
        });
        await response.arrayBuffer();
        if (response.status === 202) acked += EVENTS_PER_REQUEST;
      }
    }),
  );
  await waitFor("the service to commit what it acknowledged", () => flushed(service), { timeoutMs: 300_000, until: (n) => n >= before + acked });
  return acked / ((performance.now() - started) / 1000);
}

interface Window {
  rate: number;
  /** WAL written during the window, MB, and how many full-page images it held. */
  walMb: number;
  fullPages: number;
  /** Share of 250 ms samples in which an autovacuum worker was busy. */
  autovacuum: number;
  /** Rows deleted meanwhile (PostgreSQL's statistics, which lag by up to a second). */
  deleted: number;
  /** With a sweep: it finished before the window's end. */
  done?: boolean;
}

/** A load window, with what PostgreSQL's background work did meanwhile. */
async function window(sql: postgres.Sql, service: Service, token: string, alongside?: (signal: AbortSignal) => Promise<boolean>): Promise<Window> {
  // Each window starts right after a checkpoint, so the first change of every page it touches
  // costs a full-page image in both kinds of window (without it, later sweeps re-dirtied pages an
  // earlier one had already paid for, and looked cheaper than a sweep on pages of its own).
  await sql`checkpoint`;
  const wal = async () => (await sql<{ b: string; f: string }[]>`select wal_bytes::bigint as b, wal_fpi::bigint as f from pg_stat_wal`)[0]!;
  const deletes = async () =>
    Number((await sql<{ n: string }[]>`select coalesce(sum(n_tup_del), 0)::bigint as n from pg_stat_user_tables where relname like 'log_events%'`)[0]!.n);
  const walBefore = await wal();
  const deletedBefore = await deletes();
  const abort = new AbortController();
  let samples = 0;
  let busy = 0;
  const sampling = (async () => {
    while (!abort.signal.aborted) {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where backend_type = 'autovacuum worker' and state = 'active'`;
      samples++;
      if ((row?.n ?? 0) > 0) busy++;
      await Bun.sleep(250);
    }
  })();
  const side = alongside?.(abort.signal);
  const rate = await load(service, token, SECONDS);
  abort.abort();
  const done = await side;
  await sampling;
  const walAfter = await wal();
  return {
    rate,
    walMb: (Number(walAfter.b) - Number(walBefore.b)) / 1e6,
    fullPages: Number(walAfter.f) - Number(walBefore.f),
    autovacuum: busy / Math.max(samples, 1),
    deleted: (await deletes()) - deletedBefore,
    done,
  };
}

export async function sweepRatio(url: string, sql: postgres.Sql, print: (line: string) => void): Promise<void> {
  await sql`insert into sources (id, name, platform, table_name, token, logs_retention, live_tail_pattern)
    overriding system value
    select n, 'bench ' || n, 'http', 'bench_' || n, 'bench-token-' || n, 30, '{message}' from generate_series(1, 101) n
    on conflict do nothing`;
  await sql`checkpoint`;
  const service = await spawnService({ DATABASE_URL: url, LOG_LEVEL: "silent", RETENTION_SWEEP_INTERVAL_MS: "86400000" });
  try {
    const token = "bench-token-101"; // the load's own source, kept 30 days
    await load(service, token, 2); // JIT warm-up, not counted
    const without: Window[] = [];
    const during: Window[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      without.push(await window(sql, service, token));
      // Each round's sweep has rows of its own to delete, spread over every page (source ids
      // interleave): 1/ROUNDS of sources 1..90 drop to 1 day of retention.
      await sql`update sources set logs_retention = 1 where id <= 90 and id % ${ROUNDS} = ${round}`;
      during.push(
        await window(sql, service, token, (signal) =>
          sweep(sql, signal, () => {}).then(
            () => true,
            () => false,
          ),
        ),
      );
    }
    without.push(await window(sql, service, token));
    const ratios = during.map((d, i) => d.rate / ((without[i]!.rate + without[i + 1]!.rate) / 2));
    const sorted = [...ratios].sort((a, b) => a - b);
    const show = (w: Window) =>
      `${w.rate.toFixed(0)} (${w.deleted} rows deleted, WAL ${w.walMb.toFixed(0)} MB with ${w.fullPages} full pages, autovacuum ${(w.autovacuum * 100).toFixed(0)}%)`;
    print(
      `ingest during a sweep ÷ without: median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(3)} of ${ROUNDS} rounds (each: a ${SECONDS} s window with a sweep running ÷ the mean of the windows without around it: ${ratios.map((r) => r.toFixed(3)).join(", ")})`,
    );
    print(`  events/s with a sweep: ${during.map(show).join("; ")}; sweeps finished within their window: ${during.filter((w) => w.done).length}/${ROUNDS}`);
    print(`  events/s without: ${without.map(show).join("; ")}`);
  } finally {
    await service.stop();
  }
}
