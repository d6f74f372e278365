// /api/v2/sources driven as Better Stack's Terraform provider drives it (terraform-provider-logtail,
// internal/provider/resource_source.go and data_source.go): the create body Go's json.Marshal makes
// of its `source` struct (omitempty: only what the configuration names), every attribute its
// sourceRef reads back after create and refresh, the PATCH of what changed, the list it walks by
// table_name, and the DELETE whose 404 it takes as done. Plus the read tokens' rules, as on v1.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { V2_ATTRIBUTES } from "../../src/sources/v2";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { bearer, createReadToken } from "../helpers/tokens";

let lp: TestLogpond;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await lp.stop();
});

/** The keys of the provider's sourceRef: what it copies from every answer into its state. */
const PROVIDER_READS = [
  "name",
  "token",
  "team_id",
  "table_name",
  "platform",
  "ingesting_host",
  "ingesting_paused",
  "logs_retention",
  "metrics_retention",
  "live_tail_pattern",
  "created_at",
  "updated_at",
  "scrape_urls",
  "scrape_frequency_secs",
  "scrape_request_headers",
  "scrape_request_basic_auth_user",
  "scrape_request_basic_auth_password",
  "skip_ssl_verify",
  "data_region",
  "source_group_id",
  "vrl_transformation_logs",
  "vrl_transformation_spans",
  "blocked_metrics",
  "code_mapping_stack_root",
  "code_mapping_source_root",
];

/** Each attribute's Go type in the provider's struct: what json.Unmarshal accepts for it (null always). */
const GO_TYPES: Record<string, "string" | "number" | "boolean" | "string-or-number" | "array" | "object"> = {
  name: "string",
  token: "string",
  team_id: "string-or-number",
  table_name: "string",
  platform: "string",
  ingesting_host: "string",
  ingesting_paused: "boolean",
  logs_retention: "number",
  metrics_retention: "number",
  live_tail_pattern: "string",
  created_at: "string",
  updated_at: "string",
  scrape_urls: "array",
  scrape_frequency_secs: "number",
  scrape_request_headers: "array",
  scrape_request_basic_auth_user: "string",
  scrape_request_basic_auth_password: "string",
  skip_ssl_verify: "boolean",
  data_region: "string",
  source_group_id: "number",
  vrl_transformation_logs: "string",
  vrl_transformation_spans: "string",
  blocked_metrics: "array",
  code_mapping_stack_root: "string",
  code_mapping_source_root: "string",
};

function expectProviderReadable(attributes: Record<string, unknown>): void {
  for (const key of PROVIDER_READS) {
    expect(Object.hasOwn(attributes, key)).toBe(true);
    const value = attributes[key];
    if (value === null) continue;
    const type = GO_TYPES[key]!;
    if (type === "array") expect(Array.isArray(value)).toBe(true);
    else if (type === "string-or-number") expect(["string", "number"]).toContain(typeof value);
    else expect(typeof value).toBe(type);
  }
}

test("the provider's create, read, update, list and delete", async () => {
  // `resource "logtail_source" { name, platform, logs_retention, data_region = "germany", source_group_id = 0, vrl_transformation_logs = "" }`
  const name = `terraform ${crypto.randomUUID()}`;
  const created = await lp.api("POST", "/api/v2/sources", {
    name,
    platform: "nginx",
    logs_retention: 14,
    data_region: "germany",
    source_group_id: 0,
    vrl_transformation_logs: "",
  });
  expect(created.status).toBe(201);
  const { data } = (await created.json()) as { data: { id: string; type: string; attributes: Record<string, any> } };
  expect(created.headers.get("location")).toBe(`${lp.apiUrl}/api/v2/sources/${data.id}`);
  expect(data.type).toBe("source");
  expectProviderReadable(data.attributes);
  expect(data.attributes).toMatchObject({ name, platform: "nginx", logs_retention: 14, ingesting_paused: false, ...V2_ATTRIBUTES });
  expect(data.attributes.token).toMatch(/^[0-9A-Za-z]{24}$/);

  // Refresh: the same document; v1 shows the same source without the v2 attributes.
  const read = await lp.api("GET", `/api/v2/sources/${data.id}`);
  expect(read.status).toBe(200);
  const refreshed = ((await read.json()) as { data: { attributes: Record<string, unknown> } }).data.attributes;
  expect(refreshed).toEqual(data.attributes);
  const v1 = ((await (await lp.api("GET", `/api/v1/sources/${data.id}`)).json()) as { data: { attributes: Record<string, unknown> } }).data.attributes;
  expect(Object.keys(v1).filter((key) => key in V2_ATTRIBUTES)).toEqual([]);
  expect({ ...v1, ...V2_ATTRIBUTES } as Record<string, unknown>).toEqual(refreshed);

  // `terraform apply` after changing ingesting_paused and live_tail_pattern: PATCH of the changed ones.
  const patched = await lp.api("PATCH", `/api/v2/sources/${data.id}`, { ingesting_paused: true, live_tail_pattern: "{message}" });
  expect(patched.status).toBe(200);
  const after = ((await patched.json()) as { data: { attributes: Record<string, unknown> } }).data.attributes;
  expectProviderReadable(after);
  expect(after).toMatchObject({ ingesting_paused: true, live_tail_pattern: "{message}", logs_retention: 14 });

  // `data "logtail_source"`: pages of /api/v2/sources?page=N until pagination.next is null, by table_name.
  let found: { id: string; attributes: Record<string, unknown> } | undefined;
  for (let page = 1; ; page++) {
    const listed = await lp.api("GET", `/api/v2/sources?page=${page}`);
    expect(listed.status).toBe(200);
    const body = (await listed.json()) as { data: { id: string; attributes: Record<string, unknown> }[]; pagination: { next: string | null } };
    for (const source of body.data) expectProviderReadable(source.attributes);
    found ??= body.data.find((source) => source.attributes.table_name === data.attributes.table_name);
    if (body.pagination.next === null) break;
  }
  expect(found?.id).toBe(data.id);

  // `terraform destroy`: 204, then the provider takes a 404 as already gone; a refresh's 404 means "create again".
  expect((await lp.api("DELETE", `/api/v2/sources/${data.id}`)).status).toBe(204);
  expect((await lp.api("DELETE", `/api/v2/sources/${data.id}`)).status).toBe(404);
  expect((await lp.api("GET", `/api/v2/sources/${data.id}`)).status).toBe(404);
});

test("a minimal create (name and platform) and the provider's `team_name` are taken", async () => {
  const response = await lp.api("POST", "/api/v2/sources", { name: `minimal ${crypto.randomUUID()}`, platform: "http", team_name: "My team" });
  expect(response.status).toBe(201);
  const { data } = (await response.json()) as { data: { attributes: Record<string, unknown> } };
  expect(data.attributes).toMatchObject({ platform: "http", logs_retention: 30, live_tail_pattern: "{level} {message}", ...V2_ATTRIBUTES });
});

test("a feature logpond lacks is a 422 naming each attribute, and nothing is created", async () => {
  const name = `unsupported ${crypto.randomUUID()}`;
  const response = await lp.api("POST", "/api/v2/sources", {
    name,
    platform: "http",
    source_group_id: 7,
    metrics_retention: 30,
    scrape_urls: ["http://example.test/metrics"],
    vrl_transformation_logs: ".level = upcase(.level)",
    custom_bucket: { endpoint: "https://bucket.example.test", access_key_id: "a", secret_access_key: "b" },
    skip_ssl_verify: true,
    colour: "blue",
  });
  expect(response.status).toBe(422);
  const body = (await response.json()) as { errors: string; invalid_attributes: Record<string, string[]> };
  expect(Object.keys(body.invalid_attributes).sort()).toEqual(
    ["colour", "custom_bucket", "metrics_retention", "scrape_urls", "skip_ssl_verify", "source_group_id", "vrl_transformation_logs"].sort(),
  );
  expect(body.invalid_attributes.source_group_id).toEqual(["is not supported: logpond has no source groups (leave it unset or 0)"]);
  expect(body.invalid_attributes.colour).toEqual(["is not a permitted attribute"]);
  const listed = (await (await lp.api("GET", `/api/v2/sources?name=${encodeURIComponent(name)}`)).json()) as { data: unknown[] };
  expect(listed.data).toEqual([]);
});

test("data_region is taken on create only; v1 still refuses the v2 attributes", async () => {
  const source = await lp.createSource();
  const patched = await lp.api("PATCH", `/api/v2/sources/${source.id}`, { data_region: "us_west" });
  expect(patched.status).toBe(422);
  expect(((await patched.json()) as { invalid_attributes: Record<string, string[]> }).invalid_attributes).toEqual({
    data_region: ["can only be set when the source is created"],
  });
  const v1 = await lp.api("POST", "/api/v1/sources", { name: `v1 ${crypto.randomUUID()}`, data_region: "germany" });
  expect(v1.status).toBe(422);
  expect(((await v1.json()) as { invalid_attributes: Record<string, string[]> }).invalid_attributes).toEqual({ data_region: ["is not a permitted attribute"] });
});

test("read tokens: list and get what they may see, without the token; every write 403", async () => {
  const mine = await lp.createSource();
  const other = await lp.createSource();
  const scoped = await createReadToken(lp, [mine.id]);
  const get = await lp.api("GET", `/api/v2/sources/${mine.id}`, undefined, bearer(scoped.secret));
  expect(get.status).toBe(200);
  const attributes = ((await get.json()) as { data: { attributes: Record<string, unknown> } }).data.attributes;
  expect(attributes.token).toBeUndefined();
  expect(attributes).toMatchObject(V2_ATTRIBUTES);
  expect((await lp.api("GET", `/api/v2/sources/${other.id}`, undefined, bearer(scoped.secret))).status).toBe(404);
  const listed = (await (await lp.api("GET", "/api/v2/sources?per_page=250", undefined, bearer(scoped.secret))).json()) as { data: { id: string }[] };
  expect(listed.data.map((source) => source.id)).toEqual([mine.id]);
  for (const [method, path, body] of [
    ["POST", "/api/v2/sources", { name: "no" }],
    ["PATCH", `/api/v2/sources/${mine.id}`, { ingesting_paused: true }],
    ["DELETE", `/api/v2/sources/${mine.id}`, undefined],
  ] as const) {
    const response = await lp.api(method, path, body, bearer(scoped.secret));
    expect(response.status).toBe(403);
    await response.body?.cancel();
  }
  expect((await lp.api("GET", `/api/v2/sources/${mine.id}`)).status).toBe(200);
});
