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

/** The backend (not `except`) that waits for a lock, once there is one. */
async function waiting(except: number): Promise<number> {
  for (;;) {
    const [row] = await lp.sql<{ pid: number }[]>`
      select pid from pg_stat_activity where wait_event_type = 'Lock' and pid <> ${except} and datname = current_database() limit 1`;
    if (row) return row.pid;
    await Bun.sleep(20);
  }
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
    const released = Promise.withResolvers<void>();
    const held = locker.begin(async (tx) => {
      const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
      lockerPid = row!.pid;
      await tx.unsafe(`lock table ${tables.join(", ")} in access exclusive mode`);
      await released.promise;
    });
    while (lockerPid === 0) await Bun.sleep(5);
    const answer = lp.api("GET", url);
    const [terminated] = await lp.sql<{ done: boolean }[]>`select pg_terminate_backend(${await waiting(lockerPid)}) as done`;
    expect(terminated!.done).toBe(true);
    const response = await answer;
    released.resolve();
    await held;
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(await response.json()).toEqual({ errors: "The database is unavailable; retry later" });
    expect(lp.logs.some((line) => line.startsWith("storage unavailable (GET "))).toBe(true);
    expect((await lp.api("GET", url)).status).toBe(200);
  });
}
