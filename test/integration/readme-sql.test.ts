// The README's SQL examples (its "SQL" section, read from README.md itself) answer what was sent,
// with events in both tiers (sealed blocks and hot chunks), as the database's owner and as the
// read-only role docs/storage.md tells Grafana users to make, with exactly the grants it names.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

const README = readFileSync(path.join(import.meta.dir, "..", "..", "README.md"), "utf8");
const STORAGE_DOC = readFileSync(path.join(import.meta.dir, "..", "..", "docs", "storage.md"), "utf8");
const REQUEST_ID = "req-7f3a9c2e";
const ROLE = `grafana_${crypto.randomUUID().slice(0, 8)}`;

/** The statements of the README's SQL block, one per `;`, comments dropped. */
function readmeStatements(): string[] {
  const block = /\*\*SQL\*\*[\s\S]*?```sql\n([\s\S]*?)```/.exec(README)?.[1];
  if (!block) throw new Error("README.md has no SQL block after **SQL**");
  const code = block
    .split("\n")
    .filter((line) => !line.trimStart().startsWith("--"))
    .join("\n");
  return code
    .split(";")
    .map((statement) => statement.trim())
    .filter(Boolean);
}

/** The grants docs/storage.md gives the read-only role, for `ROLE`. */
function documentedGrants(): string[] {
  const grants = [...STORAGE_DOC.matchAll(/grant [a-z ]+ on [a-z_, ]+ to grafana/g)].map((match) => match[0].replace(/grafana$/, ROLE));
  if (grants.length === 0) throw new Error("docs/storage.md names no grant for the grafana role");
  return grants;
}

let lp: TestLogpond;
let a: TestSource;
let b: TestSource;
const sent: { source: string; level: string; request: boolean; dt: number }[] = [];
beforeAll(async () => {
  lp = await startTestLogpond({ SEAL_INTERVAL_MS: "600000" });
  a = await lp.createSource();
  b = await lp.createSource();
  // Events of the last seconds (today, before now()): half sealed into blocks, half left in hot chunks.
  const send = async (half: number) => {
    for (const source of [a, b]) {
      const events = Array.from({ length: 40 }, (_, i) => {
        const level = i % 3 === 0 ? "error" : "info";
        const request = i === 7;
        const dt = Date.now() - 2_000 + half * 500 + i;
        sent.push({ source: source.id, level, request, dt });
        return {
          dt: new Date(dt).toISOString(),
          level,
          message: `half ${half} event ${i}`,
          ...(request ? { request_id: REQUEST_ID } : {}),
        };
      });
      expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
    }
    await lp.flusher.flush();
  };
  await send(0);
  await lp.sealer.sealNow();
  await send(1);
  const [tiers] = await lp.sql<{ blocks: number; chunks: number }[]>`
    select (select count(*)::int from log_blocks where source_id = any(${[Number(a.id), Number(b.id)]}::bigint[]) and generation is null) as blocks,
      (select count(*)::int from log_chunks where source_id = any(${[Number(a.id), Number(b.id)]}::bigint[])) as chunks`;
  expect(tiers!.blocks).toBeGreaterThan(0);
  expect(tiers!.chunks).toBeGreaterThan(0);
});

afterAll(async () => {
  await lp?.sql.unsafe(`drop owned by ${ROLE}`).catch(() => {});
  await lp?.sql.unsafe(`drop role if exists ${ROLE}`).catch(() => {});
  await lp?.stop();
});

/** Runs the README's statements (its sources 12 and 13 are ours) as `role`, or as the owner. */
async function runReadme(role?: string): Promise<{ today: number; answers: Record<string, unknown>[][] }> {
  const statements = readmeStatements();
  expect(statements.length).toBe(3);
  return await lp.sql.begin(async (tx) => {
    if (role) await tx.unsafe(`set local role ${role}`);
    // The start of the session's current_date: events sent just before midnight are not "today".
    const [{ today }] = (await tx.unsafe("select current_date::timestamptz as today")) as unknown as [{ today: Date }];
    const answers: Record<string, unknown>[][] = [];
    for (const statement of statements) {
      const text = statement.replace("array[12, 13]", `array[${a.id}, ${b.id}]`);
      expect(text === statement).toBe(!statement.includes("array[12, 13]"));
      answers.push([...(await tx.unsafe(text))]);
    }
    return { today: today.getTime(), answers };
  });
}

function check({ today, answers }: { today: number; answers: Record<string, unknown>[][] }): void {
  const [perMinute, request, deadLetters] = answers;
  // Errors per minute today: every error sent (all of the last seconds), unless midnight fell between.
  const errors = sent.filter((event) => event.level === "error" && event.dt >= today).length;
  expect(errors).toBeGreaterThan(0);
  expect(perMinute!.reduce((sum, row) => sum + Number(row.count), 0)).toBe(errors);
  // One request's events, sealed and hot, in time order.
  const ours = request!.filter((row) => (row.raw as { request_id?: string }).request_id === REQUEST_ID);
  expect(ours.length).toBe(sent.filter((event) => event.request).length);
  expect(ours.map((row) => (row.raw as { message: string }).message).sort()).toEqual(["half 0 event 7", "half 0 event 7", "half 1 event 7", "half 1 event 7"]);
  expect(Array.isArray(deadLetters)).toBe(true);
}

test("the README's SQL examples answer what was sent, sealed and hot", async () => {
  check(await runReadme());
});

test("the read-only role docs/storage.md describes runs them with the grants it names", async () => {
  await lp.sql.unsafe(`create role ${ROLE} nologin`);
  for (const grant of documentedGrants()) await lp.sql.unsafe(grant);
  check(await runReadme(ROLE));
  // Read-only: the role may not change what it reads.
  const write = lp.sql.begin(async (tx) => {
    await tx.unsafe(`set local role ${ROLE}`);
    await tx.unsafe("delete from log_blocks where false");
  });
  await expect(write).rejects.toThrow(/permission denied/);
});
