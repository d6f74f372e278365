// The management API, row by row of docs/api.md ("Management API: sources"), over real HTTP against a real PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MANAGEMENT_MAX_BODY_BYTES } from "../../src/http/body";
import { PER_PAGE_MAX } from "../../src/sources/routes";
import { DEFAULT_ATTRIBUTES, LIMITS } from "../../src/sources/model";
import { API_TOKEN, startTestLogpond, type TestLogpond } from "../helpers/logpond";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await lp.stop();
});

const TOKEN_SHAPE = /^[0-9A-Za-z]{24}$/;

describe("auth", () => {
  const routes: [string, string][] = [
    ["GET", "/api/v1/sources"],
    ["GET", "/api/v1/sources/1"],
    ["POST", "/api/v1/sources"],
    ["PATCH", "/api/v1/sources/1"],
    ["DELETE", "/api/v1/sources/1"],
    ["POST", "/api/v1/sources/1/regenerate-token"],
  ];
  test.each(routes)("%s %s without a token → 401", async (method, path) => {
    const response = await fetch(`${lp.apiUrl}${path}`, { method, body: method === "GET" || method === "DELETE" ? undefined : "{}" });
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toBe("Bearer");
    expect(await response.json()).toEqual({ errors: "Invalid authentication" });
  });
  test.each(routes)("%s %s with a wrong token → 401", async (method, path) => {
    for (const authorization of [`Bearer ${API_TOKEN}x`, "Bearer x", `Basic ${API_TOKEN}`, `Bearer${API_TOKEN}`, "Bearer "]) {
      const response = await lp.api(method, path, method === "GET" || method === "DELETE" ? undefined : "{}", { authorization });
      expect(response.status).toBe(401);
    }
  });
  test.each(routes)("%s %s with a source token → 401", async (method, path) => {
    const source = await lp.createSource();
    const response = await lp.api(method, path, undefined, { authorization: `Bearer ${source.token}` });
    expect(response.status).toBe(401);
  });
  test("the scheme is case-insensitive", async () => {
    for (const scheme of ["bearer", "BEARER", "Bearer", "bEaReR"]) {
      const response = await lp.api("GET", "/api/v1/sources", undefined, { authorization: `${scheme} ${API_TOKEN}` });
      expect(response.status).toBe(200);
    }
  });
  test("a token in the query string is not accepted", async () => {
    const response = await fetch(`${lp.apiUrl}/api/v1/sources?access_token=${API_TOKEN}`);
    expect(response.status).toBe(401);
  });
});

describe("create", () => {
  test("201 with the JSON:API document, defaults and a Location", async () => {
    const response = await lp.api("POST", "/api/v1/sources", { name: "  Nginx production  ", platform: "nginx" });
    expect(response.status).toBe(201);
    const { data } = (await response.json()) as any;
    expect(response.headers.get("location")).toBe(`${lp.apiUrl}/api/v1/sources/${data.id}`);
    expect(data.id).toMatch(/^[0-9]+$/);
    expect(data.type).toBe("source");
    expect(data.attributes).toMatchObject({
      name: "Nginx production",
      platform: "nginx",
      ingesting_host: lp.ingestUrl.replace("http://", ""),
      ingesting_paused: DEFAULT_ATTRIBUTES.ingesting_paused,
      logs_retention: DEFAULT_ATTRIBUTES.logs_retention,
      live_tail_pattern: DEFAULT_ATTRIBUTES.live_tail_pattern,
    });
    expect(data.attributes.table_name).toMatch(/^nginx_production(_[0-9]+)?$/);
    expect(data.attributes.token).toMatch(TOKEN_SHAPE);
    expect(Date.parse(data.attributes.created_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(data.attributes.updated_at).toBe(data.attributes.created_at);
  });

  test("platform defaults to http; all writable attributes are taken", async () => {
    const response = await lp.api("POST", "/api/v1/sources", {
      name: "full",
      ingesting_paused: true,
      logs_retention: 7,
      live_tail_pattern: "{message}",
    });
    const { data } = (await response.json()) as any;
    expect(data.attributes).toMatchObject({ platform: "http", ingesting_paused: true, logs_retention: 7, live_tail_pattern: "{message}" });
  });

  test("a form Content-Type (plain curl -d) is still parsed as JSON", async () => {
    const response = await lp.api("POST", "/api/v1/sources", '{"name":"from curl"}', { "content-type": "application/x-www-form-urlencoded" });
    expect(response.status).toBe(201);
  });

  test("two sources with the same name get distinct table names", async () => {
    const name = `Same Name ${Date.now()}`;
    const a = await lp.createSource({ name });
    const b = await lp.createSource({ name });
    const c = await lp.createSource({ name: name.toUpperCase() });
    const names = [a, b, c].map((s) => s.attributes.table_name);
    expect(new Set(names).size).toBe(3);
    expect(names[1]).toBe(`${names[0]}_2`);
    expect(names[2]).toBe(`${names[0]}_3`);
    expect(a.token).not.toBe(b.token);
  });

  test("table_name is lower case [a-z0-9_]", async () => {
    const source = await lp.createSource({ name: "Ünïcode — Straße/API v2!!" });
    expect(source.attributes.table_name).toMatch(/^[a-z0-9_]+$/);
  });

  test("body that is not JSON → 400", async () => {
    for (const body of ["", "{", "name=x", "nul\u0000"]) {
      const response = await lp.api("POST", "/api/v1/sources", body);
      expect(response.status).toBe(400);
      expect(((await response.json()) as any).errors).toBeString();
    }
  });

  test("a body over the management API's 1 MiB → 413 with the errors body, declared or streamed", async () => {
    const big = JSON.stringify({ name: "x".repeat(MANAGEMENT_MAX_BODY_BYTES) });
    const declared = await lp.api("POST", "/api/v1/sources", big);
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as any).errors).toContain("larger than the management API's limit");
    const chunks = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 5; i++) controller.enqueue(new TextEncoder().encode("x".repeat(MANAGEMENT_MAX_BODY_BYTES / 4)));
        controller.close();
      },
    });
    const streamed = await fetch(`${lp.apiUrl}/api/v1/sources`, { method: "POST", headers: { authorization: `Bearer ${API_TOKEN}` }, body: chunks });
    expect(streamed.status).toBe(413);
    expect(((await streamed.json()) as any).errors).toContain("larger than the management API's limit");
  });

  test("name null → 422 saying so once", async () => {
    const response = await lp.api("POST", "/api/v1/sources", JSON.stringify({ name: null }));
    expect(response.status).toBe(422);
    expect(((await response.json()) as any).invalid_attributes.name).toEqual(["can't be blank"]);
  });

  test("JSON that is not an object → 400", async () => {
    for (const body of ["[]", "42", "null", '"name"']) {
      expect((await lp.api("POST", "/api/v1/sources", body)).status).toBe(400);
    }
  });

  const invalid: [string, Record<string, unknown>, string][] = [
    ["missing name", {}, "name"],
    ["blank name", { name: "   " }, "name"],
    ["null name", { name: null }, "name"],
    ["name not a string", { name: 5 }, "name"],
    ["name too long", { name: "x".repeat(LIMITS.nameMaxChars + 1) }, "name"],
    ["unknown platform", { name: "a", platform: "cobol" }, "platform"],
    ["platform wrong type", { name: "a", platform: 1 }, "platform"],
    ["paused not boolean", { name: "a", ingesting_paused: "yes" }, "ingesting_paused"],
    ["retention below range", { name: "a", logs_retention: LIMITS.logsRetentionMinDays - 1 }, "logs_retention"],
    ["retention above range", { name: "a", logs_retention: LIMITS.logsRetentionMaxDays + 1 }, "logs_retention"],
    ["retention fractional", { name: "a", logs_retention: 1.5 }, "logs_retention"],
    ["retention a string", { name: "a", logs_retention: "30" }, "logs_retention"],
    ["pattern too long", { name: "a", live_tail_pattern: "x".repeat(LIMITS.liveTailPatternMaxChars + 1) }, "live_tail_pattern"],
    ["unknown attribute", { name: "a", colour: "red" }, "colour"],
    ["read-only token", { name: "a", token: "x" }, "token"],
    ["read-only table_name", { name: "a", table_name: "x" }, "table_name"],
  ];
  test.each(invalid)("%s → 422", async (_label, body, attribute) => {
    const response = await lp.api("POST", "/api/v1/sources", body);
    expect(response.status).toBe(422);
    const json = (await response.json()) as any;
    expect(json.errors).toBe("Validation errors");
    expect(json.invalid_attributes[attribute]).toBeArray();
  });

  test("the longest allowed values are accepted", async () => {
    const response = await lp.api("POST", "/api/v1/sources", {
      name: "n".repeat(LIMITS.nameMaxChars),
      logs_retention: LIMITS.logsRetentionMaxDays,
      live_tail_pattern: "p".repeat(LIMITS.liveTailPatternMaxChars),
    });
    expect(response.status).toBe(201);
  });
});

describe("get", () => {
  test("200 with the same document as create", async () => {
    const source = await lp.createSource();
    const response = await lp.api("GET", `/api/v1/sources/${source.id}`);
    expect(response.status).toBe(200);
    const { data } = (await response.json()) as any;
    expect(data.attributes).toEqual(source.attributes);
  });

  test.each(["abc", "1.5", "-1", "0", "99999999999", "9".repeat(30), "1e3", "%20"])("id %p → 404", async (id) => {
    const response = await lp.api("GET", `/api/v1/sources/${id}`);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ errors: "Resource with the provided ID was not found" });
  });
});

describe("update", () => {
  test("changes only the given attributes and bumps updated_at", async () => {
    const source = await lp.createSource({ logs_retention: 10 });
    await Bun.sleep(5);
    const response = await lp.api("PATCH", `/api/v1/sources/${source.id}`, { name: "renamed", ingesting_paused: true });
    expect(response.status).toBe(200);
    const { data } = (await response.json()) as any;
    expect(data.attributes).toMatchObject({ name: "renamed", ingesting_paused: true, logs_retention: 10 });
    expect(data.attributes.table_name).toBe(source.attributes.table_name);
    expect(data.attributes.token).toBe(source.token);
    expect(Date.parse(data.attributes.updated_at)).toBeGreaterThan(Date.parse(source.attributes.updated_at));
    const again = (await (await lp.api("GET", `/api/v1/sources/${source.id}`)).json()) as any;
    expect(again.data.attributes.name).toBe("renamed");
  });

  test.each([
    ["platform", "nginx"],
    ["token", "x"],
    ["table_name", "x"],
    ["id", "5"],
    ["created_at", "x"],
    ["updated_at", "x"],
  ])("%s is read-only → 422", async (attribute, value) => {
    const source = await lp.createSource();
    const response = await lp.api("PATCH", `/api/v1/sources/${source.id}`, { [attribute]: value });
    expect(response.status).toBe(422);
    expect(((await response.json()) as any).invalid_attributes[attribute]).toEqual(["is read-only"]);
  });

  test("wrong types → 422; not JSON → 400; unknown id → 404", async () => {
    const source = await lp.createSource();
    expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, { logs_retention: 0 })).status).toBe(422);
    expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, { name: "" })).status).toBe(422);
    expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, { wat: 1 })).status).toBe(422);
    expect((await lp.api("PATCH", `/api/v1/sources/${source.id}`, "{oops")).status).toBe(400);
    expect((await lp.api("PATCH", "/api/v1/sources/999999999", { name: "x" })).status).toBe(404);
    expect((await lp.api("PATCH", "/api/v1/sources/nope", { name: "x" })).status).toBe(404);
  });

  test("an empty object changes nothing but is fine", async () => {
    const source = await lp.createSource();
    const response = await lp.api("PATCH", `/api/v1/sources/${source.id}`, {});
    expect(response.status).toBe(200);
  });
});

describe("delete", () => {
  test("204 with no body, then get → 404, and delete again → 404", async () => {
    const source = await lp.createSource();
    const response = await lp.api("DELETE", `/api/v1/sources/${source.id}`);
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
    expect((await lp.api("GET", `/api/v1/sources/${source.id}`)).status).toBe(404);
    expect((await lp.api("DELETE", `/api/v1/sources/${source.id}`)).status).toBe(404);
    expect((await lp.api("DELETE", "/api/v1/sources/abc")).status).toBe(404);
  });
});

describe("regenerate-token", () => {
  test("returns a new token; the old one stops working for ingestion at once", async () => {
    const source = await lp.createSource();
    expect((await lp.ingest(source.token, '{"message":"before"}')).status).toBe(202);
    const response = await lp.api("POST", `/api/v1/sources/${source.id}/regenerate-token`);
    expect(response.status).toBe(200);
    const { data } = (await response.json()) as any;
    expect(data.attributes.token).toMatch(TOKEN_SHAPE);
    expect(data.attributes.token).not.toBe(source.token);
    expect((await lp.ingest(source.token, '{"message":"old"}')).status).toBe(403);
    expect((await lp.ingest(data.attributes.token, '{"message":"new"}')).status).toBe(202);
    expect((await lp.api("POST", "/api/v1/sources/999999999/regenerate-token")).status).toBe(404);
  });
});

describe("list", () => {
  test("pagination: first, middle and last page, absolute links, name filter", async () => {
    const tag = `page-${crypto.randomUUID().slice(0, 8)}`;
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await lp.createSource({ name: `${tag} ${i}` }));
    const page = async (query: string) => {
      const response = await lp.api("GET", `/api/v1/sources?${query}`);
      expect(response.status).toBe(200);
      return (await response.json()) as any;
    };
    const link = (p: number) => `${lp.apiUrl}/api/v1/sources?page=${p}&per_page=2&name=${tag}`;

    const first = await page(`name=${tag.toUpperCase()}&per_page=2`);
    expect(first.data.map((s: any) => s.id)).toEqual([made[0]!.id, made[1]!.id]);
    expect(first.pagination.first.toLowerCase()).toBe(link(1).toLowerCase());

    const middle = await page(`name=${tag}&per_page=2&page=2`);
    expect(middle.data.map((s: any) => s.id)).toEqual([made[2]!.id, made[3]!.id]);
    expect(middle.pagination).toEqual({ first: link(1), last: link(3), prev: link(1), next: link(3) });

    const last = await page(`name=${tag}&per_page=2&page=3`);
    expect(last.data.map((s: any) => s.id)).toEqual([made[4]!.id]);
    expect(last.pagination.next).toBeNull();
    expect(last.pagination.prev).toBe(link(2));

    const beyond = await page(`name=${tag}&per_page=2&page=9`);
    expect(beyond.data).toEqual([]);
    expect(beyond.pagination.next).toBeNull();
  });

  test("ordered by id; default per_page 50; larger per_page is clamped", async () => {
    const all = (await (await lp.api("GET", "/api/v1/sources")).json()) as any;
    const ids = all.data.map((s: any) => Number(s.id));
    expect(ids).toEqual([...ids].sort((a: number, b: number) => a - b));
    expect(all.pagination.first).toContain("per_page=50");
    for (const large of ["100000", "10000000000", "1".repeat(40)]) {
      const clamped = (await (await lp.api("GET", `/api/v1/sources?per_page=${large}`)).json()) as any;
      expect(clamped.pagination.first).toContain(`per_page=${PER_PAGE_MAX}`);
    }
  });

  test("first page of an empty filter has null prev/next and last = first", async () => {
    const body = (await (await lp.api("GET", `/api/v1/sources?name=${crypto.randomUUID()}`)).json()) as any;
    expect(body.data).toEqual([]);
    expect(body.pagination.prev).toBeNull();
    expect(body.pagination.next).toBeNull();
    expect(body.pagination.last).toBe(body.pagination.first);
  });

  test("the name filter treats % and _ literally", async () => {
    const body = (await (await lp.api("GET", "/api/v1/sources?name=%25")).json()) as any;
    expect(body.data).toEqual([]);
  });

  test.each(["0", "-1", "abc", "1.5", "9999999999"])("page=%p → 422", async (value) => {
    const response = await lp.api("GET", `/api/v1/sources?page=${value}`);
    expect(response.status).toBe(422);
    expect(((await response.json()) as any).invalid_attributes.page).toBeArray();
  });
  test.each(["0", "x"])("per_page=%p → 422", async (value) => {
    const response = await lp.api("GET", `/api/v1/sources?per_page=${value}`);
    expect(response.status).toBe(422);
  });
});

describe("health", () => {
  test("/health and /ready on both listeners; /metrics on management", async () => {
    for (const base of [lp.apiUrl, lp.ingestUrl]) {
      expect((await fetch(`${base}/health`)).status).toBe(200);
      expect(await (await fetch(`${base}/ready`)).json()).toEqual({ status: "ready" });
    }
    const metrics = await (await fetch(`${lp.apiUrl}/metrics`)).text();
    expect(metrics).toContain("logpond_ingest_events_received_total");
  });

  test("unknown routes → 404 JSON", async () => {
    const response = await fetch(`${lp.apiUrl}/nope`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as any).errors).toBeString();
  });
});
