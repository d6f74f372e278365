// Partitions: log_blocks' daily ones (store/partitions.ts) are created once however many instances
// ask at the same time, and a new day's blocks move out of the default partition; a COPY caught
// routing a row to log_hot's default partition while a generation covering it was attached fails
// as a retryable error (not a data refusal, which would dead-letter a good event) and succeeds on
// retry. On a database of the test's own (the second test moves the id counter far ahead).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/store/db";
import { openFlushConnection, WriteError } from "../../src/store/copy";
import { DAY_MS, ensurePartitions, listPartitions, partitionFor } from "../../src/store/partitions";
import { GENERATION_IDS } from "../../src/store/sealer";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";
import { waitFor } from "../helpers/wait";

let db: ScratchDatabase;
beforeAll(async () => {
  db = await createScratchDatabase("partitions");
  await runMigrations(db.url);
});
afterAll(async () => {
  await db.drop();
});

const sourceId = 880_000_000 + Math.floor(Math.random() * 1_000_000);

test("concurrent callers create each day once; the default partition's blocks of that day move into it", async () => {
  const sql = db.sql;
  const day = new Date(Date.now() + 200 * DAY_MS);
  await sql`insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, ids, dts, body, hist_minutes, hist_levels, hist_counts)
    values (${sourceId}, ${day.toISOString()}::timestamptz, ${day.toISOString()}::timestamptz, 7, 7, 1, '{7}', array[${day.toISOString()}::timestamptz], '{"moved": true}', '{}', '{}', '{}')`;
  expect(await sql`select 1 from log_blocks_default where source_id = ${sourceId}`).toHaveLength(1);

  const created = await Promise.all(Array.from({ length: 4 }, () => ensurePartitions(sql, day, day)));
  const { name } = partitionFor(day);
  expect(created.flat()).toEqual([name]);
  expect((await listPartitions(sql)).filter((p) => p.name === name)).toHaveLength(1);
  const rows = await sql.unsafe(`select body from ${name} where source_id = ${sourceId}`);
  expect(rows.map((row) => row.body)).toEqual(['{"moved": true}']);
  expect(await sql`select 1 from log_blocks_default where source_id = ${sourceId}`).toHaveLength(0);
  const [event] = await sql`select raw from log_events where source_id = ${sourceId}`;
  expect(event!.raw).toEqual({ moved: true });
});

test("a COPY that routed a row to log_hot's default partition while its generation was attached is retried, not dead-lettered", async () => {
  const sql = db.sql;
  // Ids past every generation: the next COPY's row goes to the default partition.
  const far = 2 ** 50;
  await sql`update logpond_counters set value = ${far}::bigint where name = 'event_id'`;
  const name = `log_hot_g${far}`;
  const connection = openFlushConnection(db.url, 30_000); // the write's deadline: past the wait below
  const locker = await sql.reserve();
  try {
    await locker`begin`;
    await locker`lock table log_hot_default in access exclusive mode`;
    const writing = connection.write(crypto.randomUUID(), [`${sourceId}\t${new Date().toISOString()}\t{"raced": true}\n`]).then(
      () => undefined,
      (error: unknown) => error,
    );
    // Wait until the COPY waits for the default partition's lock, then attach the generation under
    // it.
    await waitFor(
      "the COPY to wait for the default partition's lock",
      async () => {
        const [waiting] = await sql`select count(*)::int as n from pg_locks l join pg_stat_activity a using (pid)
          where not l.granted and a.application_name = 'logpond-flush'`;
        return waiting!.n;
      },
      { intervalMs: 10, until: (n) => n > 0 },
    ).catch(async (error) => {
      await locker`rollback`; // let the clean-up below through
      throw error;
    });
    await locker.unsafe(`create table ${name} (like log_hot including defaults)`);
    await locker.unsafe(`alter table log_hot attach partition ${name} for values from (${far}) to (${far + GENERATION_IDS})`);
    await locker`commit`;
    const failure = await writing;
    expect(failure).toBeInstanceOf(WriteError);
    expect((failure as WriteError).kind).toBe("failed");
    expect((failure as WriteError).message).toContain("partition constraint");

    await connection.write(crypto.randomUUID(), [`${sourceId}\t${new Date().toISOString()}\t{"raced": true}\n`]);
    const rows = await sql.unsafe(`select raw from ${name} where source_id = ${sourceId}`);
    expect(rows.map((row) => row.raw)).toEqual([{ raced: true }]);
  } finally {
    locker.release();
    await connection.close();
  }
});
