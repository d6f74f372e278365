// A NUL character (\u0000) in a management request's text over real HTTP against the real
// PostgreSQL, which refuses it in text: a view's, a source's or a token's name, a source's
// live_tail_pattern, the sources list's name= filter. Each is a 422 (400 for the filter) naming
// where it is, never a 500, and nothing is stored.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

let lp: TestLogpond;
let source: TestSource;

beforeAll(async () => {
  lp = await startTestLogpond();
  source = await lp.createSource({ name: "nul text" });
});

afterAll(async () => {
  await lp?.stop();
});

const NUL = "a\u0000b";

describe("a NUL in a body's text: 422 naming the attribute", () => {
  test.each([
    ["POST", "/api/v2/views", () => ({ name: NUL, source_ids: [source.id] }), "name"],
    ["POST", "/api/v2/views", () => ({ name: "v", source_ids: [source.id], nested: { deep: [NUL] } }), "nested"],
    ["PATCH", "/api/v2/views/:view", () => ({ name: NUL }), "name"],
    ["POST", "/api/v1/sources", () => ({ name: NUL }), "name"],
    ["POST", "/api/v2/sources", () => ({ name: "s", live_tail_pattern: `{message}${NUL}` }), "live_tail_pattern"],
    ["PATCH", "/api/v1/sources/:source", () => ({ name: NUL }), "name"],
    ["POST", "/api/v1/tokens", () => ({ name: NUL, scope: "read" }), "name"],
  ])("%s %s", async (method, route, body, attribute) => {
    let path = route.replace(":source", source.id);
    if (path.includes(":view")) {
      const made = await lp.api("POST", "/api/v2/views", { name: "to change", source_ids: [source.id] });
      path = path.replace(":view", ((await made.json()) as any).data.id);
    }
    const response = await lp.api(method, path, body());
    const answer = (await response.json()) as any;
    expect({ status: response.status, invalid: answer.invalid_attributes }).toEqual({
      status: 422,
      invalid: { [attribute]: [expect.stringContaining("NUL character")] },
    });
  });

  test("nothing was stored", async () => {
    const views = ((await (await lp.api("GET", "/api/v2/views")).json()) as any).data;
    const sources = ((await (await lp.api("GET", "/api/v1/sources")).json()) as any).data;
    expect([...views, ...sources].filter((row: any) => row.attributes.name.includes("\u0000"))).toEqual([]);
    // The database is shared with the suite's other files (run one at a time): no source came after ours.
    expect((await lp.sql<{ name: string }[]>`select name from sources where id > ${Number(source.id)}`).map((row) => row.name)).toEqual([]);
  });
});

test("the sources list filtered by a name with a NUL: 400 naming name", async () => {
  for (const version of ["v1", "v2"]) {
    const response = await lp.api("GET", `/api/${version}/sources?name=${encodeURIComponent(NUL)}`);
    expect({ status: response.status, errors: ((await response.json()) as any).errors }).toEqual({
      status: 400,
      errors: expect.stringContaining("name must not contain a NUL character"),
    });
  }
});
