// The embedded PostgreSQL's supervisor (src/store/supervisor.ts) against a stand-in postmaster and
// a test clock: a death is followed by a launch at once, failed launches by capped backoff, the
// restart told to listeners and /metrics; a stop ends the retries (the postmaster is storage's to stop).
import { expect, test } from "bun:test";
import { Metrics } from "../../src/metrics";
import type { EmbeddedPostgres } from "../../src/store/embedded";
import { superviseEmbedded, supervisorSeries } from "../../src/store/supervisor";
import { quiet, TestClock } from "../helpers/clock";

/** A postmaster the test kills, whose next `failing` launches fail. */
class StandIn {
  pid = 100;
  launches = 0;
  stopped = 0;
  failing = 0;
  private die = (_how: string) => {};
  exited = this.next();
  readonly pg: EmbeddedPostgres;
  constructor() {
    const self = this;
    this.pg = {
      url: "postgres://stand-in",
      clusterDir: "/nowhere",
      version: "18",
      get pid() {
        return self.pid;
      },
      get exited() {
        return self.exited;
      },
      async relaunch(signal?: AbortSignal) {
        self.launches++;
        signal?.throwIfAborted();
        if (self.failing > 0) {
          self.failing--;
          throw new Error("FATAL: could not write lock file: No space left on device");
        }
        self.pid++;
        self.exited = self.next();
      },
      async stop() {
        self.stopped++;
      },
    };
  }
  kill(): void {
    this.die("exited with SIGKILL");
  }
  private next(): Promise<string> {
    return new Promise((resolve) => (this.die = resolve));
  }
}

test("a dead postmaster is launched again at once, then with backoff while launches fail; the restart is told and counted", async () => {
  const clock = new TestClock();
  const postmaster = new StandIn();
  const logs: string[] = [];
  const supervisor = superviseEmbedded(postmaster.pg, (line) => logs.push(line), clock);
  const metrics = new Metrics();
  supervisorSeries(supervisor, metrics);
  let told = 0;
  supervisor.onRestart(() => told++);

  postmaster.failing = 2;
  postmaster.kill();
  await quiet();
  expect([supervisor.up, postmaster.launches]).toEqual([false, 1]);
  expect(supervisor.down).toContain("could not be started again (1 tries");
  expect(metrics.value("logpond_postgres_up")).toBe(0);
  clock.advance(200); // the first retry: 0.1–0.2 s later
  await quiet();
  expect(postmaster.launches).toBe(2);
  clock.advance(400); // the second: 0.2–0.4 s later, and it comes up
  await quiet();
  expect([supervisor.up, supervisor.down, supervisor.restarts, told, postmaster.launches]).toEqual([true, undefined, 1, 1, 3]);
  expect(metrics.value("logpond_postgres_restarts_total")).toBe(1);
  expect(logs.at(-1)).toContain("running again (pid 101, 3 tries");

  postmaster.kill(); // the new one is watched too
  await quiet();
  expect([supervisor.restarts, told, postmaster.launches]).toEqual([2, 2, 4]);
  await supervisor.stop();
  expect(postmaster.stopped).toBe(0);
});

test("a stop while launches fail ends the retries: nothing is launched after it", async () => {
  const clock = new TestClock();
  const postmaster = new StandIn();
  const supervisor = superviseEmbedded(postmaster.pg, () => {}, clock);
  postmaster.failing = 100;
  postmaster.kill();
  await quiet();
  expect(postmaster.launches).toBe(1);
  await supervisor.stop();
  clock.advance(10_000);
  await quiet();
  expect([postmaster.launches, supervisor.up]).toEqual([1, false]);
  postmaster.kill(); // a postmaster ending after the stop is not launched again
  await quiet();
  expect(postmaster.launches).toBe(1);
});
