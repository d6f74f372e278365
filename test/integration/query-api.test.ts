// GET /api/v2/query/live-tail and /dead-letters (docs/api.md, "Reading: the query API"), rule by rule, over real HTTP
// against the real PostgreSQL: parameters and their errors, defaults, the row shape, cursors
// (bound to their parameters), the statement timeout, and a cursor walk over 50,000 events with
// 1,000 sharing one dt while ingestion continues.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import postgres from "postgres";
import { BATCH_MAX, MAX_SOURCE_IDS } from "../../src/query/request";
import { openFlushConnection } from "../../src/store/copy";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let lp: TestLogpond;
let source: TestSource;
const LIVE = "/api/v2/query/live-tail";
const NOW = Date.now();
const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  lp = await startTestLogpond();
  // Some events here are older than the default retention (2026-01-02, 1850, year 500): the sweep
  // that runs at start would remove them if it reached their partition after they were stored (it
  // once did, between a query and the read-back). No other sweep runs in this file (nothing is
  // deleted). The longest retention keeps 2026-01-02 as sent (ingestion redates a time retention
  // would delete: codec/reception.ts).
  await lp.retention.idle();
  source = await lp.createSource({ logs_retention: 3652 });
  const events = [
    { dt: iso(NOW - 31 * 60_000), message: "outside the default window", level: "info" },
    { dt: iso(NOW - 5 * 60_000), message: "disk full on /var", level: "error", http: { status: 507 } },
    { dt: iso(NOW - 4 * 60_000), message: "request served", level: "info", http: { status: 200 } },
    { dt: "2026-01-02T03:04:05.123456Z", message: "micro", id: "theirs", source_id: 999, level: "debug" },
  ];
  expect((await lp.ingest(source.token, JSON.stringify(events))).status).toBe(202);
  await lp.flusher.flush();
});
afterAll(async () => {
  await lp.stop();
});

const get = (query: string, headers?: Record<string, string>) => lp.api("GET", `${LIVE}?${query}`, undefined, headers);
async function expectError(response: Response, status: number, fragment: string) {
  const body = (await response.json()) as { errors: string };
  expect({ status: response.status, errors: body.errors }).toEqual({ status, errors: expect.stringContaining(fragment) });
}

describe("auth", () => {
  test.each([LIVE, "/api/v2/query/dead-letters", `${LIVE}/stream`])("%s needs the API token", async (path) => {
    for (const authorization of [undefined, "Bearer wrong-token-0123456789", `Bearer ${source.token}`]) {
      const response = await fetch(`${lp.apiUrl}${path}?source_ids=${source.id}`, { headers: authorization ? { authorization } : {} });
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toBe("Bearer");
      expect(await response.json()).toEqual({ errors: "Invalid authentication" });
    }
  });
});

describe("parameters", () => {
  test("source_ids is required", async () => {
    await expectError(await get(""), 400, "source_ids is required");
    await expectError(await get("source_ids="), 400, "source_ids is required");
    await expectError(await get("source_ids=,"), 400, "source_ids is required");
  });
  test("unknown or malformed source ids → 404 naming them", async () => {
    await expectError(await get(`source_ids=${source.id},987654321`), 404, "Source 987654321 was not found");
    await expectError(await get("source_ids=abc,0,-3"), 404, "Sources abc, 0, -3 were not found");
    await expectError(await get("source_ids=99999999999999999999"), 404, "99999999999999999999");
  });
  test(`at most ${MAX_SOURCE_IDS} source ids`, async () => {
    await expectError(await get(`source_ids=${Array.from({ length: MAX_SOURCE_IDS + 1 }, (_, i) => i + 1).join(",")}`), 400, `at most ${MAX_SOURCE_IDS}`);
  });
  test.each(["0", String(BATCH_MAX + 1), "abc", "-1", "1.5", "1e3"])("batch=%s → 400", async (batch) => {
    await expectError(await get(`source_ids=${source.id}&batch=${batch}`), 400, `batch must be a whole number from 1 to ${BATCH_MAX}`);
  });
  test.each(["1", String(BATCH_MAX)])("batch=%s is accepted", async (batch) => {
    expect((await get(`source_ids=${source.id}&batch=${batch}`)).status).toBe(200);
  });
  test.each(["yesterday", "2026-13-01T00:00:00Z", "12345", "2026-02-30"])("from=%s → 400", async (from) => {
    await expectError(await get(`source_ids=${source.id}&from=${encodeURIComponent(from)}`), 400, "from must be an RFC 3339");
    await expectError(await get(`source_ids=${source.id}&to=${encodeURIComponent(from)}`), 400, "to must be an RFC 3339");
  });
  test("from after to → 400", async () => {
    await expectError(await get(`source_ids=${source.id}&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z`), 400, "is after to");
  });
  test("order must be newest_first or oldest_first", async () => {
    await expectError(await get(`source_ids=${source.id}&order=random`), 400, "order must be newest_first or oldest_first");
  });
  test("a query that does not parse → 400 naming the position", async () => {
    await expectError(await get(`source_ids=${source.id}&query=${encodeURIComponent("level:error AND (a OR")}`), 400, "position 22");
  });
  test.each([
    "garbage",
    "eyJ2IjoxfQ",
    Buffer.from('{"v":1,"h":"x","f":"a","t":"b","d":"c","i":"1"}').toString("base64url"),
    // Shaped as a time but none (a 500 from PostgreSQL before): February 30th, 24:61.
    Buffer.from('{"v":1,"h":"x","f":"2025-01-01T00:00:00.000000Z","t":"2025-02-01T00:00:00.000000Z","d":"2025-02-30T00:00:00.999999Z","i":"1"}').toString(
      "base64url",
    ),
    Buffer.from('{"v":1,"h":"x","f":"2025-01-01T00:00:00.000000Z","t":"2025-02-01T24:61:00.000000Z","d":"2025-01-10T00:00:00.000000Z","i":"1"}').toString(
      "base64url",
    ),
  ])("cursor %s → 400", async (cursor) => {
    await expectError(await get(`source_ids=${source.id}&cursor=${cursor}`), 400, "cursor is not one this API gave out");
  });
});

describe("rows and defaults", () => {
  test("default window: the last 30 minutes, newest first", async () => {
    const body: any = await (await get(`source_ids=${source.id}`)).json();
    expect(body.data.map((row: any) => row.message)).toEqual(["request served", "disk full on /var"]);
    expect(body.pagination).toEqual({ next: null });
  });
  test("dt, source_id and id are logpond's, shadowing the event's own fields", async () => {
    const body: any = await (await get(`source_ids=${source.id}&from=2026-01-01T00:00:00Z&to=2026-01-03T00:00:00Z`)).json();
    const [row] = body.data;
    const [stored] = (await lp.stored(source.id)).filter((r) => r.raw.message === "micro");
    expect(row).toEqual({ message: "micro", level: "debug", dt: "2026-01-02T03:04:05.123456Z", source_id: source.id, id: String(stored!.id) });
  });
  test("events dated before 1901 are found by from/to (Date.UTC's 0–99 mapping once made such times unreadable)", async () => {
    const old = await lp.createSource();
    // Older than any retention, so ingestion would redate them: written as a tool (or an earlier logpond) would.
    const tool = openFlushConnection(process.env.LOGPOND_TEST_DATABASE_URL!, 5_000);
    await tool.write(crypto.randomUUID(), [
      `${old.id}\t1850-06-01T12:00:00Z\t{"message": "victorian"}\n`,
      `${old.id}\t0500-06-01T12:00:00Z\t{"message": "year 500"}\n`,
    ]);
    await tool.close();
    const body: any = await (await get(`source_ids=${old.id}&order=oldest_first&from=0100-01-01T00:00:00Z&to=1900-01-01T00:00:00Z`)).json();
    expect(body.data.map((row: any) => [row.message, row.dt])).toEqual([
      ["year 500", "0500-06-01T12:00:00.000000Z"],
      ["victorian", "1850-06-01T12:00:00.000000Z"],
    ]);
  });
  test("oldest_first and from/to", async () => {
    const body: any = await (await get(`source_ids=${source.id}&order=oldest_first&from=${iso(NOW - 40 * 60_000)}&to=${iso(NOW)}`)).json();
    expect(body.data.map((row: any) => row.message)).toEqual(["outside the default window", "disk full on /var", "request served"]);
  });
  test("query filters", async () => {
    const cases: [string, string[]][] = [
      ["level:error", ["disk full on /var"]],
      ['"DISK FULL"', ["disk full on /var"]],
      ["http.status>=500", ["disk full on /var"]],
      ["http.status<500 OR level=error", ["request served", "disk full on /var"]],
      ["NOT level:error", ["request served"]],
      ["level!:err http.status=200", ["request served"]],
    ];
    for (const [query, messages] of cases) {
      const body: any = await (await get(`source_ids=${source.id}&query=${encodeURIComponent(query)}`)).json();
      expect({ query, messages: body.data.map((row: any) => row.message) }).toEqual({ query, messages });
    }
  });
  test("next is an absolute link with the same parameters; a cursor belongs to its parameters", async () => {
    const first: any = await (await get(`source_ids=${source.id}&batch=1&query=http.status>0`)).json();
    const next = new URL(first.pagination.next);
    expect(next.origin).toBe(lp.apiUrl);
    expect(next.pathname).toBe(LIVE);
    expect(next.searchParams.get("query")).toBe("http.status>0");
    expect(next.searchParams.get("batch")).toBe("1");
    const cursor = next.searchParams.get("cursor")!;
    // The same walk with another page size is fine; another query, order or window is not.
    const rest: any = await (await get(`source_ids=${source.id}&batch=5&query=${encodeURIComponent("http.status>0")}&cursor=${cursor}`)).json();
    expect(rest.data.map((row: any) => row.message)).toEqual(["disk full on /var"]);
    for (const other of ["query=level:x", "query=http.status>0&order=oldest_first", `query=http.status>0&from=${iso(NOW - 60_000)}`]) {
      await expectError(await get(`source_ids=${source.id}&${other}&cursor=${cursor}`), 400, "cursor belongs to other parameters");
    }
    const other = await lp.createSource();
    await expectError(
      await get(`source_ids=${other.id}&query=${encodeURIComponent("http.status>0")}&cursor=${cursor}`),
      400,
      "cursor belongs to other parameters",
    );
  });
  test("a query running past QUERY_TIMEOUT_MS is cancelled → 503 with the reason", async () => {
    const impatient = await startTestLogpond({ QUERY_TIMEOUT_MS: "300" });
    const locker = postgres(process.env.LOGPOND_TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    try {
      // A lock held elsewhere makes the read wait; the statement timeout ends the wait.
      await locker.begin(async (tx) => {
        await tx`lock table log_events in access exclusive mode`;
        await expectError(await impatient.api("GET", `${LIVE}?source_ids=${source.id}`), 503, "longer than 300 ms (QUERY_TIMEOUT_MS)");
      });
    } finally {
      await locker.end();
      await impatient.stop();
    }
  });
});

describe("dead letters", () => {
  test("listed newest first, paged with a cursor, same shape", async () => {
    const dead = await lp.createSource();
    for (let i = 0; i < 3; i++) {
      await lp.sql`insert into dead_letters (source_id, dt, raw, sqlstate, error) values (${Number(dead.id)}, ${"2026-11-22T00:00:00.000Z"}, ${`{"n":${i}}`}, '22P02', 'invalid input')`;
    }
    const firstText = await (await lp.api("GET", `/api/v2/query/dead-letters?source_ids=${dead.id}&batch=2`)).text();
    // Written as the event rows are (jsonb text), not json_build_object's `"id" : "2"`.
    expect(firstText).not.toContain('" : ');
    const first: any = JSON.parse(firstText);
    expect(first.data.map((row: any) => row.raw)).toEqual(['{"n":2}', '{"n":1}']);
    expect(first.data[0]).toMatchObject({ source_id: dead.id, dt: "2026-11-22T00:00:00.000Z", sqlstate: "22P02", error: "invalid input" });
    expect(first.data[0].failed_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const second: any = await (await fetch(first.pagination.next, { headers: { authorization: `Bearer test-api-token-0123456789abcdef` } })).json();
    expect(second).toEqual({ data: [expect.objectContaining({ raw: '{"n":0}' })], pagination: { next: null } });
    await expectError(
      await lp.api(
        "GET",
        `/api/v2/query/dead-letters?source_ids=${dead.id}&order=oldest_first&cursor=${new URL(first.pagination.next).searchParams.get("cursor")}`,
      ),
      400,
      "cursor belongs to other parameters",
    );
    await expectError(await lp.api("GET", "/api/v2/query/dead-letters?source_ids=123456789"), 404, "Source 123456789 was not found");
    await expectError(await lp.api("GET", `/api/v2/query/dead-letters?source_ids=${dead.id}&query=level%3Aerror`), 400, "dead-letters does not take query");
    await expectError(
      await lp.api("GET", `/api/v2/query/dead-letters?source_ids=${dead.id}&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`),
      400,
      "does not take from, to",
    );
    await expectError(await lp.api("GET", "/api/v2/query/dead-letters"), 400, "source_ids is required");
  });
});

describe("cursor walk", () => {
  test("50,000 events, 1,000 sharing one dt, ingestion continuing: every event of the window exactly once", async () => {
    const walked = await lp.createSource();
    const base = NOW - 20 * 60_000;
    const shared = iso(base + 600_000);
    const events = Array.from({ length: 50_000 }, (_, i) => ({ dt: i < 1000 ? shared : iso(base + (i % 1_000_000) * 20 + (i % 7)), n: i }));
    for (let i = 0; i < events.length; i += 5000) {
      expect((await lp.ingest(walked.token, JSON.stringify(events.slice(i, i + 5000)))).status).toBe(202);
    }
    await lp.flusher.flush();
    const window = `from=${iso(base - 1000)}&to=${iso(NOW)}`;

    let extra = 0;
    for (const order of ["newest_first", "oldest_first"]) {
      // More events arrive in the same window while the walk runs (sent between pages).
      const seen = new Map<number, number>();
      let url: string | null = `${lp.apiUrl}${LIVE}?source_ids=${walked.id}&batch=997&order=${order}&${window}`;
      let previous: [string, bigint] | undefined;
      while (url) {
        const response: Response = await fetch(url, { headers: { authorization: "Bearer test-api-token-0123456789abcdef" } });
        expect(response.status).toBe(200);
        const body: any = await response.json();
        for (const row of body.data) {
          seen.set(row.n, (seen.get(row.n) ?? 0) + 1);
          const key: [string, bigint] = [row.dt, BigInt(row.id)];
          if (previous) {
            const ascending = key[0] > previous[0] || (key[0] === previous[0] && key[1] > previous[1]);
            if (order === "oldest_first" ? !ascending : ascending)
              throw new Error(`${order}: ${JSON.stringify(key.map(String))} after ${JSON.stringify(previous.map(String))}`);
          }
          previous = key;
        }
        const more = Array.from({ length: 50 }, (_, i) => ({ dt: iso(base + Math.floor(Math.random() * 1_000_000)), n: 100_000 + extra + i }));
        more.push({ dt: shared, n: 200_000 + extra });
        extra += 50;
        await lp.ingest(walked.token, JSON.stringify(more));
        url = body.pagination.next;
      }
      for (let n = 0; n < 50_000; n++) if (seen.get(n) !== 1) throw new Error(`${order}: event ${n} seen ${seen.get(n) ?? 0} times`);
      for (const [n, times] of seen) if (times !== 1) throw new Error(`${order}: event ${n} seen ${times} times`);
    }
  }, 120_000);
});
