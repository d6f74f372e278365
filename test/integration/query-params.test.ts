// The query routes and the views over real HTTP against the real PostgreSQL: a parameter that
// would be silently dropped or ignored (sent twice, one a route does not take, a source chosen
// inside the query) is either honoured as its documented form or refused with a 400 that says
// what to write (docs/api.md, "Reading: the query API").
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let lp: TestLogpond;
let web: TestSource;
let worker: TestSource;
const BASE = Date.parse("2025-11-20T10:00:00.000Z");
const FROM = new Date(BASE).toISOString();
const TO = new Date(BASE + 60_000).toISOString();
const WINDOW = `from=${FROM}&to=${TO}`;

beforeAll(async () => {
  lp = await startTestLogpond();
  web = await lp.createSource({ logs_retention: 3652 });
  worker = await lp.createSource({ logs_retention: 3652 });
  const events = (service: string) =>
    JSON.stringify(
      Array.from({ length: 6 }, (_, n) => ({ dt: new Date(BASE + n * 1000).toISOString(), n, service, level: n % 2 ? "error" : "info", host: `h${n % 3}` })),
    );
  expect((await lp.ingest(web.token, events("web"))).status).toBe(202);
  expect((await lp.ingest(worker.token, events("worker"))).status).toBe(202);
  await lp.flusher.flush();
});

afterAll(async () => {
  await lp?.stop();
});

const get = async (path: string) => {
  const response = await lp.api("GET", path);
  return { status: response.status, body: (await response.json()) as any };
};
async function expectRefused(path: string, fragment: string) {
  const { status, body } = await get(path);
  expect({ path, status, errors: body.errors }).toEqual({ path, status: 400, errors: expect.stringContaining(fragment) });
}

describe("a source chosen inside the query", () => {
  test.each(["/api/v2/query/live-tail", "/api/v2/query/histogram", "/api/v2/query/aggregate"])("%s: 400 saying to use source_ids=", async (route) => {
    const extra = route.endsWith("aggregate") ? "&by=level" : "";
    const query = encodeURIComponent(`source_id:${worker.id}`);
    await expectRefused(`${route}?source_ids=${web.id},${worker.id}&query=${query}&${WINDOW}${extra}`, `choose sources with source_ids=${worker.id}`);
  });

  test("the live stream refuses it before it starts", async () => {
    const response = await lp.api("GET", `/api/v2/query/live-tail/stream?source_ids=${web.id}&query=${encodeURIComponent(`-source_id=${web.id}`)}`);
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).errors).toContain("source_ids=");
  });

  test("a saved view's query: 422 saying to use source_ids", async () => {
    const response = await lp.api("POST", "/api/v2/views", { name: "by source", source_ids: [web.id], query: `source_id:${web.id}` });
    expect(response.status).toBe(422);
    expect(((await response.json()) as any).invalid_attributes.query[0]).toContain("source_ids");
  });
});

describe("a NUL character in the query (ingestion stores it as U+FFFD, so no event holds one)", () => {
  // In a field's value it once reached PostgreSQL as a text parameter, which refuses NUL: a 500.
  test.each([
    ["/api/v2/query/live-tail", "service:w\u0000"],
    ["/api/v2/query/live-tail", "service=web\u0000"],
    ["/api/v2/query/live-tail", "-host:\u0000*"],
    ["/api/v2/query/live-tail", '"w\u0000b"'],
    ["/api/v2/query/histogram", "service:w\u0000"],
    ["/api/v2/query/aggregate", "level:\u0000"],
  ])("%s?query=%p: 400 naming it", async (route, query) => {
    const extra = route.endsWith("aggregate") ? "&by=level" : "";
    await expectRefused(`${route}?source_ids=${web.id}&query=${encodeURIComponent(query)}&${WINDOW}${extra}`, "a NUL character cannot be matched");
  });
});

describe("by= sent twice", () => {
  test("by=level&by=host counts by the pair, as by=level,host does", async () => {
    const twice = await get(`/api/v2/query/aggregate?source_ids=${web.id}&${WINDOW}&by=level&by=host&top=100`);
    const once = await get(`/api/v2/query/aggregate?source_ids=${web.id}&${WINDOW}&by=level,host&top=100`);
    expect(twice.status).toBe(200);
    expect(twice.body.data.by.fields).toEqual(["level", "host"]);
    expect(twice.body.data.by).toEqual(once.body.data.by);
    expect(twice.body.data.by.groups).toBe(6);
  });

  test("more than two fields over the repeats: 400", async () => {
    await expectRefused(`/api/v2/query/aggregate?source_ids=${web.id}&by=level&by=host,service`, "by takes at most 2 fields (got 3)");
  });

  test("facets= sent twice are all counted", async () => {
    const { status, body } = await get(`/api/v2/query/aggregate?source_ids=${web.id}&${WINDOW}&facets=level&facets=host,service`);
    expect(status).toBe(200);
    expect(body.data.facets.map((f: any) => f.field)).toEqual(["level", "host", "service"]);
  });
});

describe("source_ids sent twice", () => {
  test("every source named is read, as in source_ids=a,b", async () => {
    const { status, body } = await get(`/api/v2/query/live-tail?source_ids=${web.id}&source_ids=${worker.id}&${WINDOW}&batch=100`);
    expect(status).toBe(200);
    expect(new Set(body.data.map((row: any) => row.source_id))).toEqual(new Set([web.id, worker.id]));
    const histogram = await get(`/api/v2/query/histogram?source_ids=${web.id}&source_ids=${worker.id}&${WINDOW}`);
    expect(histogram.body.meta.total).toBe(12);
  });
});

describe("a parameter that takes one value, sent twice: 400", () => {
  test.each([
    ["/api/v2/query/live-tail", "query=error&query=info", "query"],
    ["/api/v2/query/live-tail", "batch=1&batch=2", "batch"],
    ["/api/v2/query/live-tail", "order=oldest_first&order=newest_first", "order"],
    ["/api/v2/query/live-tail", `from=${FROM}&from=now-1h`, "from"],
    ["/api/v2/query/live-tail", `to=${TO}&to=now`, "to"],
    ["/api/v2/query/live-tail", "cursor=a&cursor=b", "cursor"],
    ["/api/v2/query/histogram", "buckets=5&buckets=10", "buckets"],
    ["/api/v2/query/aggregate", "by=level&top=3&top=5", "top"],
    ["/api/v2/query/aggregate", "distinct=host&distinct=level", "distinct"],
    ["/api/v2/query/aggregate", "field=n&field=n", "field"],
    ["/api/v2/query/dead-letters", "batch=1&batch=2", "batch"],
  ])("%s?%s", async (route, params, name) => {
    await expectRefused(`${route}?source_ids=${web.id}&${params}`, `${name} was sent 2 times`);
  });

  test.each(["before=1&before=2", "after=1&after=2", "id=1&id=2", `dt=${FROM}&dt=${TO}`])("/api/v2/query/context?%s", async (params) => {
    const name = params.slice(0, params.indexOf("="));
    const id = name === "id" ? "" : "&id=1";
    await expectRefused(`/api/v2/query/context?source_id=${web.id}${id}&${params}`, `${name} was sent 2 times`);
  });

  test("context's source_id sent twice", async () => {
    await expectRefused(`/api/v2/query/context?source_id=${web.id}&source_id=${worker.id}&id=1`, "source_id was sent 2 times");
  });
});

describe("a parameter a route does not take: 400 naming it and what the route takes", () => {
  test.each([
    ["/api/v2/query/histogram", "group_by=service", "histogram does not take group_by"],
    ["/api/v2/query/histogram", "q=error", "histogram does not take q"],
    ["/api/v2/query/aggregate", "by=level&group_by=host", "aggregate does not take group_by"],
    ["/api/v2/query/aggregate", "by=level&cursor=x", "aggregate does not take cursor"],
    ["/api/v2/query/dead-letters", "limit=5", "dead-letters does not take limit"],
  ])("%s?%s", async (route, params, message) => {
    await expectRefused(`${route}?source_ids=${web.id}&${params}`, message);
  });

  test.each(["from=now-1h", "batch=10", "q=error", "source_id=1"])("the live stream refuses %s before it starts, naming what it takes", async (params) => {
    const name = params.slice(0, params.indexOf("="));
    await expectRefused(
      `/api/v2/query/live-tail/stream?source_ids=${web.id}&${params}`,
      `live-tail/stream does not take ${name}: it takes source_ids, query, cursor`,
    );
  });

  test("the live stream takes what the page sends (source_ids, query) and cursor", async () => {
    const response = await lp.api("GET", `/api/v2/query/live-tail/stream?source_ids=${web.id}&query=level:error&cursor=`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    await response.body?.cancel();
  });

  test("context takes no query", async () => {
    await expectRefused(`/api/v2/query/context?source_id=${web.id}&id=1&query=error`, "context does not take query");
  });

  test("aggregate: top without by or facets", async () => {
    await expectRefused(`/api/v2/query/aggregate?source_ids=${web.id}&distinct=host&top=3`, "top applies to by= and facets=");
  });

  test("the views list takes no parameters", async () => {
    await expectRefused(`/api/v2/views?source_ids=${web.id}`, "/api/v2/views takes no parameters");
  });
});
