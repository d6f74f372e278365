// Waiting on a condition with a deadline, for tests and benches: never on a timer alone. The
// deadline only ends a wait that would hang; a test asserts outcomes, never how soon they came.
import { inspect } from "node:util";

export interface WaitOptions<T> {
  /** How long before giving up (default 20 s: far past any outcome a test waits for, on a busy box). */
  timeoutMs?: number;
  /** Pause between two probes (default 20 ms). */
  intervalMs?: number;
  /** When the probed value counts as reached (default: truthy). */
  until?: (value: T) => boolean;
}

/**
 * Probes `probe` until its value is reached (truthy, or `until(value)`), and returns that value.
 * Past the deadline it throws, naming `what` was awaited and the last value seen, e.g.
 * `await waitFor("the hot tier to empty", () => hotRows(sql), { until: (n) => n === 0 })`.
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, options: WaitOptions<T> = {}): Promise<T> {
  const { timeoutMs = 20_000, intervalMs = 20, until = Boolean } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (until(value)) return value;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last value seen: ${inspect(value, { depth: 3, breakLength: Infinity, maxArrayLength: 20, maxStringLength: 2000 })}`,
      );
    }
    await Bun.sleep(intervalMs);
  }
}
