// One request's reception: its time, and the window of event times that storage keeps. An event
// whose time is outside the window is stored with the reception time as its `dt` and the time it
// carried under REDATED_FIELD: an event older than its source's retention allows (the sealer,
// store/sealer.ts, or the next retention sweep, retention/sweep.ts, would delete it) or too far
// ahead (no relative view would show it, and it would never expire). It is kept, never refused: a
// refusal makes shippers drop the whole batch. Pure; the window is made once per request.
import { microsOfMillis, microsText, type PgMicros } from "./time";

/** Where a redated event keeps the time it carried (RFC 3339 UTC, µs: the query API's `dt` text). */
export const REDATED_FIELD = "dt_sent";
const DAY_MS = 86_400_000;

/** Why an event was redated: the `reason` label of logpond_ingest_events_redated_total. */
export type RedateReason = "too_old" | "too_far_ahead";

export interface Reception {
  /** The reception time: the `dt` of events without a readable time, and of redated ones. */
  readonly at: PgMicros;
  /** Event times before this are too old (PgMicros; -Infinity: no bound). */
  readonly oldest: number;
  /** Event times after this are too far ahead (PgMicros; Infinity: no bound). */
  readonly newest: number;
}

export interface EventTimeRule {
  /** How far ahead of its reception an event's time may be (INGEST_MAX_FUTURE_MS). */
  maxFutureMs: number;
  /** How long an event stored now may wait for the next deletion that could remove it (retentionGraceMs). */
  retentionGraceMs: number;
}

/**
 * Expired rows are deleted at two moments: when the sealer seals them (every SEAL_INTERVAL_MS)
 * and by each retention sweep (every RETENTION_SWEEP_INTERVAL_MS), each by a cut-off of now less
 * the retention. An event stored now meets the next of them at most the longer interval later:
 * one whose time is within that much of its retention's end would be deleted by it, and counts
 * as too old.
 */
export function retentionGraceMs(sweepIntervalMs: number, sealIntervalMs: number): number {
  return Math.max(sweepIntervalMs, sealIntervalMs);
}

/** The reception at `nowMs` for a source keeping events `retentionDays` days. */
export function receptionOf(nowMs: number, retentionDays: number, rule: EventTimeRule): Reception {
  return {
    at: microsOfMillis(nowMs),
    // Numbers: a bound a few years from 2000 is exact in µs; comparing one with a bigint time is exact too.
    oldest: Number(microsOfMillis(nowMs - retentionDays * DAY_MS + rule.retentionGraceMs)),
    newest: Number(microsOfMillis(nowMs + rule.maxFutureMs)),
  };
}

/** A reception with no window (tools and tests that store events as they are dated). */
export function unbounded(at: PgMicros): Reception {
  return { at, oldest: -Infinity, newest: Infinity };
}

/**
 * Writes the time an event carried into it, under REDATED_FIELD or, when the event has a field of
 * that name already (its own is never overwritten), the first of `dt_sent_2`, `dt_sent_3`, … it
 * lacks. Called only for events out of the window: the text is their only allocation.
 */
export function redate(event: Record<string, unknown>, sent: PgMicros): void {
  let name = REDATED_FIELD;
  for (let n = 2; Object.hasOwn(event, name); n++) name = `${REDATED_FIELD}_${n}`;
  event[name] = microsText(sent);
}
