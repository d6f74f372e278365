// Daily partitions (store/partitions.ts): created once however many instances ask at the same
// time, rows of a new day moved out of the default partition, and a COPY caught routing a row
// to the default partition while its day was attached fails as a retryable error (not a data
// refusal, which would dead-letter a good event) and succeeds on retry.
import { afterAll, expect, test } from "bun:test";
import postgres from "postgres";
import { openFlushConnection, WriteError } from "../../src/store/copy";
import { DAY_MS, ensurePartitions, listPartitions, partitionFor } from "../../src/store/partitions";

const url = process.env.LOGPOND_TEST_DATABASE_URL!;
const sql = postgres(url, { max: 6, onnotice: () => {} });
afterAll(async () => {
  await sql.end({ timeout: 5 });
});

const sourceId = 880_000_000 + Math.floor(Math.random() * 1_000_000);

test("concurrent callers create each day once; the default partition's rows of that day move into it", async () => {
  const day = new Date(Date.now() + 200 * DAY_MS); // far ahead: no other test writes there
  const connection = openFlushConnection(url, 5_000);
  await connection.write(crypto.randomUUID(), [`${sourceId}\t${day.toISOString()}\t{"moved": true}\n`]);
  await connection.close();
  expect(await sql`select 1 from log_events_default where source_id = ${sourceId}`).toHaveLength(1);

  const created = await Promise.all(Array.from({ length: 4 }, () => ensurePartitions(sql, day, day)));
  const { name } = partitionFor(day);
  expect(created.flat()).toEqual([name]);
  expect((await listPartitions(sql)).filter((p) => p.name === name)).toHaveLength(1);
  const rows = await sql.unsafe(`select raw from ${name} where source_id = ${sourceId}`);
  expect(rows.map((row) => row.raw)).toEqual([{ moved: true }]);
  expect(await sql`select 1 from log_events_default where source_id = ${sourceId}`).toHaveLength(0);
  await sql.unsafe(`alter table log_events detach partition ${name}; drop table ${name}`);
});

test("a COPY that routed a row to the default partition while its day was attached is retried, not dead-lettered", async () => {
  const day = new Date(Date.now() + 300 * DAY_MS);
  const { name, from, to } = partitionFor(day);
  const connection = openFlushConnection(url, 30_000); // the write's deadline: past the wait below
  const locker = await sql.reserve();
  try {
    await locker`begin`;
    await locker`lock table log_events_default in access exclusive mode`;
    const writing = connection.write(crypto.randomUUID(), [`${sourceId}\t${day.toISOString()}\t{"raced": true}\n`]).then(
      () => undefined,
      (error: unknown) => error,
    );
    // Wait until the COPY waits for the default partition's lock, then attach the day under it
    // (the deadline only ends a wait that would hang).
    const deadline = Date.now() + 20_000;
    let copyWaiting = false;
    while (!copyWaiting && Date.now() < deadline) {
      const [waiting] = await sql`select count(*)::int as n from pg_locks l join pg_stat_activity a using (pid)
        where not l.granted and a.application_name = 'logpond-flush'`;
      copyWaiting = waiting!.n > 0;
      if (!copyWaiting) await Bun.sleep(10);
    }
    if (!copyWaiting) await locker`rollback`; // let the clean-up below through
    expect(copyWaiting).toBe(true);
    await locker.unsafe(`create table ${name} (like log_events including defaults)`);
    await locker.unsafe(`alter table log_events attach partition ${name} for values from ('${from.toISOString()}') to ('${to.toISOString()}')`);
    await locker`commit`;
    const failure = await writing;
    expect(failure).toBeInstanceOf(WriteError);
    expect((failure as WriteError).kind).toBe("failed");
    expect((failure as WriteError).message).toContain("partition constraint");

    await connection.write(crypto.randomUUID(), [`${sourceId}\t${day.toISOString()}\t{"raced": true}\n`]);
    const rows = await sql.unsafe(`select raw from ${name} where source_id = ${sourceId}`);
    expect(rows.map((row) => row.raw)).toEqual([{ raced: true }]);
  } finally {
    locker.release();
    await connection.close();
    await sql.unsafe(`alter table log_events detach partition ${name}; drop table if exists ${name}`).catch(() => {});
  }
});
