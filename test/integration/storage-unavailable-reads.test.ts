// A read or a management request whose PostgreSQL connection is lost mid-statement (the server
// restarting, an administrator's pg_terminate_backend, a crash) answers 503 storage_unavailable with
// Retry-After, not 500 (http/errors.ts, store/unavailable.ts); the next request, on a new
// connection, answers. The statement is held on a lock another session takes, so the backend to
// terminate is known, then the lock is released.
import { afterAll, beforeAll, expect, test } from "bun:test";
import postgres from "postgres";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let lp: TestLogpond;
let source: TestSource;
let locker: postgres.Sql;
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  source = await lp.createSource();
  expect((await lp.ingest(source.token, JSON.stringify([{ message: "one" }, { message: "two" }]))).status).toBe(202);
  await lp.flusher.flush();
  locker = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
});

afterAll(async () => {
  await locker?.end({ timeout: 5 });
  await lp?.stop();
});

/** Terminates every backend of this database (not `except`) that waits for a lock; how many. */
async function terminateWaiters(except: number): Promise<number> {
  const rows = await lp.sql<{ done: boolean }[]>`
    select pg_terminate_backend(pid) as done from pg_stat_activity
    where wait_event_type = 'Lock' and pid <> ${except} and datname = current_database()`;
  return rows.filter((row) => row.done).length;
}

const cases: [string, string, string[]][] = [
  ["the query API's listing", `/api/v2/query/live-tail?source_ids=SOURCE`, ["log_blocks", "log_chunks", "log_hot"]],
  ["the histogram", `/api/v2/query/histogram?source_ids=SOURCE&from=now-1h`, ["log_blocks", "log_chunks", "log_hot"]],
  ["the sources list", "/api/v1/sources", ["sources"]],
];

for (const [name, pathname, tables] of cases) {
  test(`${name}: a connection lost mid-statement is a 503 with Retry-After, then it answers again`, async () => {
    const url = pathname.replace("SOURCE", source.id);
    expect((await lp.api("GET", url)).status).toBe(200);
    let lockerPid = 0;
    const locked = Promise.withResolvers<void>();
    const released = Promise.withResolvers<void>();
    const held = locker.begin(async (tx) => {
      const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
      lockerPid = row!.pid;
      await tx.unsafe(`lock table ${tables.join(", ")} in access exclusive mode`);
      locked.resolve();
      await released.promise;
    });
    let response: Response | undefined;
    try {
      // The lock taken, or the locker's failure thrown here.
      await Promise.race([locked.promise, held]);
      const answer = lp.api("GET", url).then((r) => (response = r));
      // The request's statement waits for the lock; so may a background job's (the retention sweep
      // at start), which is terminated too and tries again later. Until the request is answered.
      let terminated = 0;
      while (response === undefined) {
        terminated += await terminateWaiters(lockerPid);
        await Promise.race([answer, Bun.sleep(20)]);
      }
      expect(terminated).toBeGreaterThan(0);
    } finally {
      released.resolve();
      await held;
    }
    expect(response!.status).toBe(503);
    expect(response!.headers.get("retry-after")).toBe("1");
    expect(await response!.json()).toEqual({ errors: "The database is unavailable; retry later" });
    expect(lp.logs.some((line) => line.startsWith("storage unavailable (GET "))).toBe(true);
    expect((await lp.api("GET", url)).status).toBe(200);
  });
}
