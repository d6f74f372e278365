// periodic() on a clock the test drives: one run at a time, the next an interval after the
// previous ended, kick() to run at once, stop() aborting a run and waiting for it up to a deadline,
// and a failed run counted in /metrics while the job goes on.
import { expect, test } from "bun:test";
import { Metrics } from "../../src/metrics";
import { periodic } from "../../src/periodic";
import { quiet, TestClock } from "../helpers/clock";
import { parseExposition, sampleValue } from "../helpers/prometheus";

const INTERVAL = 1_000;

/** A job whose runs end when the test says; it records when each started and how many overlapped. */
function heldJob() {
  const runs: { at: number; end: (error?: Error) => void; signal: AbortSignal }[] = [];
  let active = 0;
  let most = 0;
  const clock = new TestClock();
  const run = (signal: AbortSignal) =>
    new Promise<number>((resolve, reject) => {
      most = Math.max(most, ++active);
      runs.push({
        at: clock.now(),
        signal,
        end: (error) => {
          active--;
          if (error) reject(error);
          else resolve(runs.length);
        },
      });
    });
  return { clock, run, runs, overlapped: () => most > 1 };
}

test("the first run an interval from the start (or at once), each next one an interval after the previous ended", async () => {
  const { clock, run, runs } = heldJob();
  const job = periodic({ intervalMs: INTERVAL, run, failed: () => {}, clock });
  clock.advance(INTERVAL - 1);
  await quiet();
  expect(runs.length).toBe(0);
  clock.advance(1);
  await quiet();
  expect(runs.map((r) => r.at)).toEqual([INTERVAL]);
  clock.advance(5 * INTERVAL); // a run longer than the interval: nothing piles up meanwhile
  await quiet();
  expect(runs.length).toBe(1);
  runs[0]!.end();
  await quiet();
  clock.advance(INTERVAL - 1);
  await quiet();
  expect(runs.length).toBe(1);
  clock.advance(1);
  await quiet();
  expect(runs.map((r) => r.at)).toEqual([INTERVAL, 7 * INTERVAL]);
  runs[1]!.end();
  await job.stop();

  const eager = heldJob();
  const atStart = periodic({ intervalMs: INTERVAL, run: eager.run, atStart: true, failed: () => {}, clock: eager.clock });
  await quiet();
  expect(eager.runs.map((r) => r.at)).toEqual([0]);
  eager.runs[0]!.end();
  await atStart.stop();
});

test("single flight: a kick or runNow() while a run is under way waits for it; kicks coalesce into one more run", async () => {
  const { clock, run, runs, overlapped } = heldJob();
  const job = periodic({ intervalMs: INTERVAL, run, failed: () => {}, clock });
  job.kick(); // at once, nothing running
  await quiet();
  expect(runs.length).toBe(1);
  job.kick();
  job.kick();
  const own = job.runNow();
  await quiet();
  expect(runs.length).toBe(1);
  runs[0]!.end();
  await quiet();
  expect(runs.length).toBe(2); // one at a time: the next queued one only now
  runs[1]!.end();
  await quiet();
  expect(runs.length).toBe(3);
  runs[2]!.end();
  expect(await own).toBeGreaterThanOrEqual(2); // runNow() gets its own run's value
  await quiet();
  expect(runs.length).toBe(3); // the two kicks made one run
  await job.idle();
  expect(overlapped()).toBe(false);
  // Re-armed after the kicked runs: the next timed one an interval after the last ended.
  clock.advance(INTERVAL);
  await quiet();
  expect(runs.length).toBe(4);
  runs[3]!.end();
  await job.stop();
});

test("stop() aborts the run under way through its signal, waits for it, and nothing runs after", async () => {
  const { clock, run, runs } = heldJob();
  const failed: Error[] = [];
  const job = periodic({ intervalMs: INTERVAL, run, atStart: true, failed: (error) => failed.push(error), clock });
  await quiet();
  const [first] = runs;
  first!.signal.addEventListener("abort", () => first!.end(new Error("aborted")));
  let stopped = false;
  const stopping = job.stop().then(() => (stopped = true));
  expect(first!.signal.aborted).toBe(true);
  await stopping;
  expect(stopped).toBe(true);
  expect(failed).toEqual([]); // a run ended by the stop is no failure
  expect(job.errors).toBe(0);
  job.kick();
  clock.advance(10 * INTERVAL);
  await quiet();
  expect(runs.length).toBe(1);
  expect(clock.pending).toBe(0);
  await expect(job.runNow()).rejects.toThrow();
});

test("stop(deadline) gives up waiting for a run that ignores the signal once the deadline passes", async () => {
  const { clock, run, runs } = heldJob();
  const job = periodic({ intervalMs: INTERVAL, run, atStart: true, failed: () => {}, clock });
  await quiet();
  let stopped = false;
  const stopping = job.stop(clock.now() + 500).then(() => (stopped = true));
  clock.advance(499);
  await quiet();
  expect(stopped).toBe(false);
  clock.advance(1);
  await stopping;
  expect(stopped).toBe(true);
  runs[0]!.end();
});

test("a failed run is counted in /metrics and told once; the next run still comes an interval later", async () => {
  const { clock, run, runs } = heldJob();
  const metrics = new Metrics();
  const failed: string[] = [];
  const job = periodic({
    intervalMs: INTERVAL,
    run,
    atStart: true,
    failed: (error) => failed.push(error.message),
    errors: { metrics, name: "logpond_test_job_errors_total", help: "Test job runs that failed." },
    clock,
  });
  await quiet();
  runs[0]!.end(new Error("database away"));
  await quiet();
  expect(failed).toEqual(["database away"]);
  expect(job.errors).toBe(1);
  expect(sampleValue(parseExposition(metrics.render()), "logpond_test_job_errors_total")).toBe(1);
  clock.advance(INTERVAL);
  await quiet();
  expect(runs.length).toBe(2);
  runs[1]!.end();
  await quiet();
  expect(job.errors).toBe(1);
  await job.stop();
});

test("at a fixed rate, turns come every interval from the start whenever runs end; one falling in a run makes one more right after it", async () => {
  const { clock, run, runs, overlapped } = heldJob();
  const job = periodic({ intervalMs: INTERVAL, run, atStart: true, fixedRate: true, failed: () => {}, clock });
  await quiet();
  clock.advance(INTERVAL); // the turn at 1 interval comes while the first run is under way
  await quiet();
  clock.advance(0.5 * INTERVAL);
  await quiet();
  expect(runs.length).toBe(1);
  runs[0]!.end();
  await quiet();
  expect(runs.map((r) => r.at)).toEqual([0, 1.5 * INTERVAL]);
  runs[1]!.end();
  await quiet();
  clock.advance(0.5 * INTERVAL); // the next turn: 2 intervals from the start, not 1 after the last run ended
  await quiet();
  expect(runs.map((r) => r.at)).toEqual([0, 1.5 * INTERVAL, 2 * INTERVAL]);
  runs[2]!.end();
  await job.stop();
  expect(overlapped()).toBe(false);
  expect(clock.pending).toBe(0);
});

test("with no interval it runs only when kicked; with `retry` a failed run is tried again after a growing backoff until one succeeds", async () => {
  const { clock, run, runs } = heldJob();
  const failed: string[] = [];
  const job = periodic({ run, retry: { firstMs: 200, maxMs: 2_000 }, failed: (error) => failed.push(error.message), clock });
  clock.advance(60_000);
  await quiet();
  expect([runs.length, clock.pending]).toEqual([0, 0]);
  job.kick();
  await quiet();
  runs[0]!.end(new Error("first"));
  await quiet();
  expect(failed).toEqual(["first"]);
  clock.advance(99); // the first retry: 0.1–0.2 s later
  await quiet();
  expect(runs.length).toBe(1);
  clock.advance(101);
  await quiet();
  expect(runs.length).toBe(2);
  runs[1]!.end(new Error("second"));
  await quiet();
  clock.advance(199); // the second: 0.2–0.4 s later
  await quiet();
  expect(runs.length).toBe(2);
  clock.advance(201);
  await quiet();
  expect(runs.length).toBe(3);
  runs[2]!.end();
  await quiet();
  // Succeeded: nothing armed until the next kick.
  expect([clock.pending, job.errors]).toEqual([0, 2]);
  clock.advance(60_000);
  await quiet();
  expect(runs.length).toBe(3);
  await job.stop();
});

test("with `failed: rethrow` a failed run is counted and escapes as an uncaught exception, as a plain timer's throw does", async () => {
  // In a process of its own: bun test fails any test that lets an exception escape.
  const script = `
    import { periodic, rethrow } from ${JSON.stringify(`${import.meta.dir}/../../src/periodic.ts`)};
    let job;
    process.on("uncaughtException", (error) => {
      console.log(JSON.stringify({ uncaught: error.message, errors: job.errors }));
      process.exit(0);
    });
    job = periodic({ run: async () => { throw new Error("turn failed"); }, failed: rethrow });
    job.kick();
  `;
  const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  expect({ code, err }).toEqual({ code: 0, err: "" });
  expect(JSON.parse(out)).toEqual({ uncaught: "turn failed", errors: 1 });
});
