// The backlog: events logpond has committed that are not yet in blocks (the hot tier's rows),
// sampled through the whole run, and its trend, to tell whether the sealer keeps up with a load.
// Exact without touching log_hot (whose lock the sealer waits for): logpond's flushed count
// (/metrics) minus the events the bench's sources have in log_blocks (a seal writes its blocks
// and empties its hot table in one transaction).
import type postgres from "postgres";
import { fmt } from "../lib";
import type { Source } from "./service";
import { counter, metrics } from "./storage";

export interface BacklogSample {
  /** performance.now() */
  at: number;
  /** Committed, not yet in blocks. */
  rows: number;
}

export interface Backlog {
  samples: BacklogSample[];
  stop: () => Promise<void>;
}

/** Samples the backlog every `everyMs` until stopped. */
export function startBacklog(sql: postgres.Sql, apiUrl: string, sources: Source[], everyMs = 1000): Backlog {
  const ids = sources.map((s) => s.id);
  const samples: BacklogSample[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const next = performance.now() + everyMs;
      const flushed = counter(await metrics(apiUrl), "logpond_flush_events_total");
      const [row] = await sql`select coalesce(sum(n), 0)::bigint as n from log_blocks where generation is null and source_id = any(${ids}::bigint[])`;
      samples.push({ at: performance.now(), rows: Math.max(0, flushed - Number(row!.n)) });
      await Bun.sleep(Math.max(0, next - performance.now()));
    }
  })();
  return {
    samples,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

/** About `points` samples between `from` and `to`, as "t s: rows" from `from`. */
export function timeline(samples: BacklogSample[], from: number, to: number, points = 16): string {
  const within = samples.filter((s) => s.at >= from && s.at <= to);
  const step = Math.max(1, Math.round(within.length / points));
  const picked = within.filter((_, i) => i % step === 0 || i === within.length - 1);
  const digits = to - from < 30_000 ? 1 : 0;
  return picked.map((s) => `${fmt((s.at - from) / 1000, digits)} s: ${fmt(s.rows)}`).join(", ");
}

export interface Trend {
  /** Least-squares slope of the backlog over the window, rows per second. */
  slope: number;
  first: number;
  last: number;
  peak: number;
  samples: number;
}

/** The backlog's trend between `from` and `to` (performance.now()). */
export function trend(samples: BacklogSample[], from: number, to: number): Trend | undefined {
  const within = samples.filter((s) => s.at >= from && s.at <= to);
  if (within.length < 3) return undefined;
  const xs = within.map((s) => (s.at - from) / 1000);
  const ys = within.map((s) => s.rows);
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return { slope: den > 0 ? num / den : 0, first: ys[0]!, last: ys.at(-1)!, peak: Math.max(...ys), samples: within.length };
}

/** The lowest backlog in each of `parts` equal stretches of [from, to]: a sealer that keeps up returns to a floor that does not rise. */
export function floors(samples: BacklogSample[], from: number, to: number, parts = 4): (number | undefined)[] {
  const width = (to - from) / parts;
  return Array.from({ length: parts }, (_, i) => {
    const within = samples.filter((s) => s.at >= from + i * width && s.at <= from + (i + 1) * width);
    return within.length ? Math.min(...within.map((s) => s.rows)) : undefined;
  });
}

/**
 * Bounded when the backlog grows by less than this share of the load's rate over the last half:
 * a sealer that keeps up leaves a sawtooth (rows pile up for a SEAL_INTERVAL_MS, then go at once)
 * whose fitted slope is near 0 once the half spans a few intervals; one that falls behind grows at
 * the rate minus its own.
 */
export const BOUNDED_SHARE = 0.02;
