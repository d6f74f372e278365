// /api/v2/views over real HTTP against the real PostgreSQL: create, list, get, update, delete; bad
// input (400 body, 422 attributes with their messages, 404 ids); the tokens (none: 401, a read
// token: reads only the views whose sources it may see, no write: 403); a Better Stack
// `tail_query` exploration's fields carried over as docs/api.md says.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { VIEW_LIMITS } from "../../src/views/model";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { bearer, createReadToken } from "../helpers/tokens";

const VIEWS_FORBIDDEN = "This token may only read: saving, changing and deleting views needs the API token";

let lp: TestLogpond;
let web: TestSource;
let worker: TestSource;

beforeAll(async () => {
  lp = await startTestLogpond();
  web = await lp.createSource({ name: "views web" });
  worker = await lp.createSource({ name: "views worker" });
});

afterAll(async () => {
  await lp?.stop();
});

const create = async (body: unknown) => {
  const response = await lp.api("POST", "/api/v2/views", body);
  return { status: response.status, location: response.headers.get("location"), body: (await response.json()) as any };
};

test("create, get, list, update, delete", async () => {
  const made = await create({
    name: "checkout errors",
    source_ids: [web.id, Number(worker.id)],
    query: "level:error http.status:>=500",
    range: { from: "now-24h", to: "now" },
    columns: ["level", "http.status", "message"],
  });
  expect(made.status).toBe(201);
  const view = made.body.data;
  expect(view).toEqual({
    id: expect.stringMatching(/^\d+$/),
    type: "view",
    attributes: {
      name: "checkout errors",
      source_ids: [web.id, worker.id],
      query: "level:error http.status:>=500",
      range: { from: "now-24h", to: "now" },
      columns: ["level", "http.status", "message"],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    },
  });
  expect(made.location).toBe(`${lp.apiUrl}/api/v2/views/${view.id}`);

  const got = await lp.api("GET", `/api/v2/views/${view.id}`);
  expect(await got.json()).toEqual({ data: view });

  // Defaults: everything but the name and the sources.
  const live = (await create({ name: "all of web", source_ids: [web.id] })).body.data;
  expect(live.attributes).toMatchObject({ query: "", range: { from: "now-30m", to: null }, columns: [] });

  const list = (await (await lp.api("GET", "/api/v2/views")).json()) as any;
  // Sorted by name; other test files' views share the database, so only this test's are compared.
  const ours = list.data.filter((v: any) => v.id === view.id || v.id === live.id);
  expect(ours.map((v: any) => v.attributes.name)).toEqual(["all of web", "checkout errors"]);

  const patched = await lp.api("PATCH", `/api/v2/views/${view.id}`, {
    query: "level:warn",
    range: { from: "2026-11-27T10:00:00Z", to: "2026-11-27T11:00:00Z" },
  });
  expect(patched.status).toBe(200);
  const after = ((await patched.json()) as any).data;
  expect(after.attributes).toMatchObject({ name: "checkout errors", query: "level:warn", range: { from: "2026-11-27T10:00:00Z", to: "2026-11-27T11:00:00Z" } });
  expect(after.attributes.columns).toEqual(["level", "http.status", "message"]);
  expect(Date.parse(after.attributes.updated_at)).toBeGreaterThanOrEqual(Date.parse(view.attributes.updated_at));

  expect((await lp.api("DELETE", `/api/v2/views/${view.id}`)).status).toBe(204);
  expect((await lp.api("GET", `/api/v2/views/${view.id}`)).status).toBe(404);
  expect((await lp.api("DELETE", `/api/v2/views/${view.id}`)).status).toBe(404);
  expect((await lp.api("DELETE", `/api/v2/views/${live.id}`)).status).toBe(204);
});

describe("bad input", () => {
  test.each([
    ["no name", { source_ids: ["1"] }, { name: ["can't be blank"] }],
    ["a blank name", { name: "  ", source_ids: ["1"] }, { name: ["can't be blank"] }],
    [
      "a long name",
      { name: "x".repeat(VIEW_LIMITS.nameMaxChars + 1), source_ids: ["1"] },
      { name: [`is too long (maximum is ${VIEW_LIMITS.nameMaxChars} characters)`] },
    ],
    ["no sources", { name: "a" }, { source_ids: ["must be a non-empty array of source ids"] }],
    ["a source id that is no id", { name: "a", source_ids: ["web"] }, { source_ids: ['must hold source ids (numbers or numeric strings; got ["web"])'] }],
    [
      "a query the language does not take",
      { name: "a", source_ids: ["1"], query: "status>=abc" },
      { query: [expect.stringMatching(/^is not understood: .* at position 9$/)] },
    ],
    [
      "a range that is no object",
      { name: "a", source_ids: ["1"], range: "24h" },
      { range: [expect.stringContaining('must be an object such as {"from":"now-24h","to":"now"}')] },
    ],
    [
      "a range from that is no time",
      { name: "a", source_ids: ["1"], range: { from: "yesterday", to: "now" } },
      { range: [expect.stringContaining('from must be now, now-<n><s|m|h|d|w> or an RFC 3339 time (got "yesterday")')] },
    ],
    [
      "a range backwards",
      { name: "a", source_ids: ["1"], range: { from: "2026-11-27T11:00:00Z", to: "2026-11-27T10:00:00Z" } },
      { range: ["from is after to"] },
    ],
    [
      "a relative range backwards (the query API refuses it when the view is opened)",
      { name: "a", source_ids: ["1"], range: { from: "now", to: "now-1h" } },
      { range: ["from is after to"] },
    ],
    [
      "a range from on a day the calendar has not (the query API refuses it when the view is opened)",
      { name: "a", source_ids: ["1"], range: { from: "2026-02-30T00:00:00Z", to: null } },
      { range: [expect.stringContaining('from must be now, now-<n><s|m|h|d|w> or an RFC 3339 time (got "2026-02-30T00:00:00Z")')] },
    ],
    ["columns that are no paths", { name: "a", source_ids: ["1"], columns: ["level", "a b"] }, { columns: [expect.stringContaining('got ["a b"]')] }],
    ["a read-only attribute", { name: "a", source_ids: ["1"], id: "7" }, { id: ["is read-only"] }],
    ["an unknown attribute", { name: "a", source_ids: ["1"], chart: "tail_chart" }, { chart: ["is not a permitted attribute"] }],
  ])("%s: 422 naming the attribute", async (_, body, problems) => {
    const { status, body: answer } = await create(body);
    expect(status).toBe(422);
    expect(answer).toEqual({ errors: "Validation errors", invalid_attributes: problems });
  });

  test("a source that does not exist: 422 naming it", async () => {
    const { status, body } = await create({ name: "ghost", source_ids: [web.id, "987654321"] });
    expect([status, body]).toEqual([422, { errors: "Validation errors", invalid_attributes: { source_ids: ["names sources that do not exist: 987654321"] } }]);
  });

  test("a body that is not a JSON object: 400", async () => {
    for (const body of ["{", "[1]"]) {
      const response = await lp.api("POST", "/api/v2/views", body);
      expect(response.status).toBe(400);
      expect(((await response.json()) as any).errors).toMatch(/^Request body (is not valid JSON|must be a JSON object)$/);
    }
  });

  test("an id that is no view: 404", async () => {
    for (const [method, path] of [
      ["GET", "/api/v2/views/999999"],
      ["GET", "/api/v2/views/abc"],
      ["PATCH", "/api/v2/views/999999"],
      ["DELETE", "/api/v2/views/0"],
    ] as const) {
      const response = await lp.api(method, path, method === "PATCH" ? { name: "x" } : undefined);
      expect([method, path, response.status]).toEqual([method, path, 404]);
      expect(await response.json()).toEqual({ errors: "Resource with the provided ID was not found" });
    }
  });
});

test("tokens: none is 401; a read token reads the views of its sources only and writes none (403)", async () => {
  const mine = (await create({ name: "web only", source_ids: [web.id] })).body.data;
  const both = (await create({ name: "web and worker", source_ids: [web.id, worker.id] })).body.data;
  const none = await fetch(`${lp.apiUrl}/api/v2/views`);
  expect(none.status).toBe(401);
  const token = await createReadToken(lp, [web.id]);
  const read = (method: string, path: string, body?: unknown) => lp.api(method, path, body, bearer(token.secret));
  const listed = ((await (await read("GET", "/api/v2/views")).json()) as any).data.map((v: any) => v.id);
  expect(listed).toContain(mine.id);
  expect(listed).not.toContain(both.id);
  expect((await read("GET", `/api/v2/views/${mine.id}`)).status).toBe(200);
  expect((await read("GET", `/api/v2/views/${both.id}`)).status).toBe(404);
  // The refusal says what the token may do and what the write needs, as the other 403s (docs/api.md).
  for (const [method, path, body] of [
    ["POST", "/api/v2/views", { name: "x", source_ids: [web.id] }],
    ["PATCH", `/api/v2/views/${mine.id}`, { name: "x" }],
    ["DELETE", `/api/v2/views/${mine.id}`, undefined],
    ["DELETE", "/api/v2/views/not-an-id", undefined],
  ] as const) {
    const response = await read(method, path, body);
    expect([method, path, response.status, await response.json()]).toEqual([method, path, 403, { errors: VIEWS_FORBIDDEN }]);
  }
  const all = await createReadToken(lp);
  expect((await lp.api("GET", `/api/v2/views/${both.id}`, undefined, bearer(all.secret))).status).toBe(200);
});

test("a Better Stack tail_query exploration carries over field for field (docs/api.md)", async () => {
  // The exploration as the logtail Terraform provider writes one: a tail chart, one tail_query
  // whose source_variable names a `source` variable.
  const exploration = {
    name: "Live error logs",
    date_range_from: "now-3h",
    date_range_to: "now",
    chart: { chart_type: "tail_chart" },
    queries: [{ query_type: "tail_query", where_condition: "level=error", source_variable: "source" }],
    variables: [{ name: "source", variable_type: "source", values: [Number(web.id)] }],
  };
  const query = exploration.queries[0]!;
  const variable = exploration.variables.find((v) => v.name === query.source_variable)!;
  const { status, body } = await create({
    name: exploration.name,
    source_ids: variable.values,
    query: query.where_condition,
    range: { from: exploration.date_range_from, to: exploration.date_range_to },
  });
  expect(status).toBe(201);
  expect(body.data.attributes).toMatchObject({ name: "Live error logs", source_ids: [web.id], query: "level=error", range: { from: "now-3h", to: "now" } });
});
