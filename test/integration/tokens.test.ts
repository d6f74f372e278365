// Tokens made through /api/v1/tokens: created by the API token only, the secret shown once and
// kept as a digest, listed without secrets, revoked at once (open live-tail streams end, on every
// instance); a read token reads (of its sources only, when it has source_ids) and writes nothing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { TailClient } from "../../src/tail/client";
import { TailHub } from "../../src/tail/hub";
import { startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { SseReader } from "../helpers/sse";
import { bearer, createReadToken } from "../helpers/tokens";
import { waitFor } from "../helpers/wait";

let lp: TestLogpond;
let a: TestSource;
let b: TestSource;
beforeAll(async () => {
  lp = await startTestLogpond();
  a = await lp.createSource({ name: `a ${crypto.randomUUID()}` });
  b = await lp.createSource({ name: `b ${crypto.randomUUID()}` });
  expect((await lp.ingest(a.token, JSON.stringify([{ message: "in a", level: "error" }]))).status).toBe(202);
  expect((await lp.ingest(b.token, JSON.stringify([{ message: "in b", level: "error" }]))).status).toBe(202);
  await lp.flusher.flush();
});
afterAll(async () => {
  await lp.stop();
});

const SECRET = /^lpr_[0-9A-Za-z]{48}$/;
const as = (secret: string, method: string, path: string, body?: unknown) => lp.api(method, path, body, bearer(secret));

describe("create, list, revoke", () => {
  test("201 with the secret once; listed without it; only its digest is stored", async () => {
    const response = await lp.api("POST", "/api/v1/tokens", { name: "  grafana  ", scope: "read", source_ids: [Number(b.id), a.id] });
    expect(response.status).toBe(201);
    const { data } = (await response.json()) as any;
    expect(data).toEqual({
      id: expect.stringMatching(/^[0-9]+$/),
      type: "token",
      attributes: {
        name: "grafana",
        scope: "read",
        source_ids: [a.id, b.id].sort((x, y) => Number(x) - Number(y)),
        token: expect.stringMatching(SECRET),
        created_at: expect.any(String),
        last_used_at: null,
      },
    });
    const secret = data.attributes.token as string;

    const listed = (await (await lp.api("GET", "/api/v1/tokens")).json()) as any;
    const mine = listed.data.find((t: any) => t.id === data.id);
    const { token: _, ...withoutSecret } = data.attributes;
    expect(mine).toEqual({ id: data.id, type: "token", attributes: withoutSecret });
    expect(JSON.stringify(listed)).not.toContain(secret);

    const [row] = await lp.sql`select to_jsonb(t)::text as text, digest from api_tokens t where id = ${Number(data.id)}`;
    expect(row!.text).not.toContain(secret);
    expect(Buffer.from(row!.digest)).toEqual(createHash("sha256").update(secret).digest());
  });

  test("every source when source_ids is left out or null", async () => {
    for (const extra of [{}, { source_ids: null }]) {
      const response = await lp.api("POST", "/api/v1/tokens", { name: "all", scope: "read", ...extra });
      expect(response.status).toBe(201);
      expect(((await response.json()) as any).data.attributes.source_ids).toBeNull();
    }
  });

  test.each([
    [{ scope: "read" }, "name", "can't be blank"],
    [{ name: "", scope: "read" }, "name", "must be a string"],
    [{ name: "x".repeat(256), scope: "read" }, "name", "is too long (maximum is 255 characters)"],
    [{ name: "n" }, "scope", "can't be blank (one of: read)"],
    [{ name: "n", scope: "write" }, "scope", "must be one of: read"],
    [{ name: "n", scope: "read", source_ids: [] }, "source_ids", "must list at least one source id, or be left out for every source"],
    [{ name: "n", scope: "read", source_ids: "1" }, "source_ids", "must be a list of source ids, or left out for every source"],
    [{ name: "n", scope: "read", source_ids: ["abc"] }, "source_ids", '"abc" is not a source id'],
    [{ name: "n", scope: "read", source_ids: [987654321] }, "source_ids", "987654321 is not a source"],
    [{ name: "n", scope: "read", token: "mine" }, "token", "is read-only"],
    [{ name: "n", scope: "read", admin: true }, "admin", "is not a permitted attribute"],
  ])("%j → 422 (%s)", async (body, attribute, message) => {
    const response = await lp.api("POST", "/api/v1/tokens", body);
    expect(response.status).toBe(422);
    expect(await response.json()).toEqual({ errors: "Validation errors", invalid_attributes: { [attribute]: [message] } });
  });

  test("a body that is not JSON → 400", async () => {
    expect((await lp.api("POST", "/api/v1/tokens", "not json")).status).toBe(400);
  });

  test("DELETE revokes at once: the next request with it is 401; a second DELETE, or an id that is not one → 404", async () => {
    const token = await createReadToken(lp);
    expect((await as(token.secret, "GET", `/api/v2/query/live-tail?source_ids=${a.id}`)).status).toBe(200);
    expect((await lp.api("DELETE", `/api/v1/tokens/${token.id}`)).status).toBe(204);
    const after = await as(token.secret, "GET", `/api/v2/query/live-tail?source_ids=${a.id}`);
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual({ errors: "Invalid authentication" });
    const listed = (await (await lp.api("GET", "/api/v1/tokens")).json()) as any;
    expect(listed.data.map((t: any) => t.id)).not.toContain(token.id);
    for (const id of [token.id, "abc", "0", "99999999999999999999"]) {
      const response = await lp.api("DELETE", `/api/v1/tokens/${id}`);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ errors: "Resource with the provided ID was not found" });
    }
  });

  test("last_used_at records a use", async () => {
    const token = await createReadToken(lp);
    expect((await as(token.secret, "GET", "/api/v1/sources")).status).toBe(200);
    await waitFor(
      "last_used_at to be set",
      async () => {
        const listed = (await (await lp.api("GET", "/api/v1/tokens")).json()) as any;
        return listed.data.find((t: any) => t.id === token.id).attributes.last_used_at;
      },
      { until: (usedAt) => usedAt !== null },
    );
  });
});

describe("a revocation ends the token's open streams", () => {
  test("on this instance, and on another one sharing the database; the API token's streams stay", async () => {
    const other = await startTestLogpond();
    const token = await createReadToken(lp, [a.id]);
    const open = async (url: string, headers: Record<string, string>) => {
      const response = await fetch(`${url}/api/v2/query/live-tail/stream?source_ids=${a.id}`, { headers });
      expect(response.status).toBe(200);
      const reader = new SseReader(response);
      await reader.until(() => reader.position !== undefined, 20_000, "the live start");
      return reader;
    };
    try {
      const here = await open(lp.apiUrl, bearer(token.secret));
      const there = await open(other.apiUrl, bearer(token.secret));
      const admin = await open(other.apiUrl, bearer("test-api-token-0123456789abcdef"));
      expect((await lp.api("DELETE", `/api/v1/tokens/${token.id}`)).status).toBe(204);
      await here.until(() => here.ended, 20_000, "this instance's stream to end");
      await there.until(() => there.ended, 20_000, "the other instance's stream to end");
      // The API token's stream on the other instance still gets rows.
      expect((await lp.ingest(a.token, JSON.stringify([{ message: "after the revocation" }]))).status).toBe(202);
      await lp.flusher.flush();
      await admin.until(() => admin.rows().some((row) => row.message === "after the revocation"), 20_000, "a row after the revocation");
      await admin.close();
    } finally {
      await other.stop();
    }
  });
});

test("a stream added just after its token's revocation (checked just before it) ends as it is added", () => {
  const hub = new TailHub(lp.sql, { heartbeatMs: 10_000, log: () => {}, flushing: () => false });
  const stream = () => new TailClient(new Set([1]), undefined, undefined, { seq: 0, id: "" }, { maxRows: 10, maxBytes: 1 << 20 });
  hub.tokenRevoked(41);
  const late = stream();
  hub.add(late, 41);
  expect(late.closed).toBe(true);
  const other = stream();
  hub.add(other, 42);
  expect([other.closed, hub.size, hub.tokenIds()]).toEqual([false, 1, [42]]);
  hub.tokenRevoked(42);
  expect([other.closed, hub.size, hub.tokenIds()]).toEqual([true, 0, []]);
});

describe("what a read token sees", () => {
  test("sources without their ingest tokens; a scoped token only its own, the others absent", async () => {
    const all = await createReadToken(lp);
    const scoped = await createReadToken(lp, [a.id]);

    const listed = (await (await as(all.secret, "GET", "/api/v1/sources?per_page=250")).json()) as any;
    expect(listed.data.map((s: any) => s.id)).toEqual(expect.arrayContaining([a.id, b.id]));
    for (const source of listed.data) expect(source.attributes).not.toHaveProperty("token");
    const one = (await (await as(all.secret, "GET", `/api/v1/sources/${a.id}`)).json()) as any;
    const { token: _, ...rest } = a.attributes;
    expect(one.data.attributes).toEqual({ ...rest, updated_at: expect.any(String) });

    const mine = (await (await as(scoped.secret, "GET", "/api/v1/sources?per_page=1")).json()) as any;
    expect(mine.data.map((s: any) => s.id)).toEqual([a.id]);
    expect(mine.pagination.next).toBeNull();
    expect(mine.pagination.last).toContain("page=1");
    const hidden = await as(scoped.secret, "GET", `/api/v1/sources/${b.id}`);
    const absent = await lp.api("GET", "/api/v1/sources/987654321");
    expect([hidden.status, await hidden.json()]).toEqual([absent.status, await absent.json()]);
    expect(((await (await as(scoped.secret, "GET", `/api/v1/sources?name=${encodeURIComponent(b.attributes.name)}`)).json()) as any).data).toEqual([]);
  });

  test("the query API, histogram, dead letters and live tail: its sources answer, the others 404 as if absent", async () => {
    const scoped = await createReadToken(lp, [a.id]);
    const reads = ["/api/v2/query/live-tail", "/api/v2/query/histogram", "/api/v2/query/dead-letters", "/api/v2/query/live-tail/stream"];
    for (const path of reads) {
      const ok = await as(scoped.secret, "GET", `${path}?source_ids=${a.id}`);
      expect([path, ok.status]).toEqual([path, 200]);
      await ok.body?.cancel();
      for (const ids of [b.id, `${a.id},${b.id}`]) {
        const hidden = await as(scoped.secret, "GET", `${path}?source_ids=${ids}`);
        expect([path, hidden.status, await hidden.json()]).toEqual([path, 404, { errors: `Source ${b.id} was not found` }]);
      }
    }
    const rows = (await (await as(scoped.secret, "GET", `/api/v2/query/live-tail?source_ids=${a.id}`)).json()) as any;
    const messages = rows.data.map((row: any) => row.message);
    expect(messages).toContain("in a");
    expect(messages).not.toContain("in b");
  });

  test("every management write and the token routes → 403, before the body is read", async () => {
    const read = await createReadToken(lp);
    const writes: [string, string, unknown][] = [
      ["POST", "/api/v1/sources", { name: "nope" }],
      ["POST", "/api/v1/sources", "not json"],
      ["PATCH", `/api/v1/sources/${a.id}`, { ingesting_paused: true }],
      ["DELETE", `/api/v1/sources/${a.id}`, undefined],
      ["POST", `/api/v1/sources/${a.id}/regenerate-token`, undefined],
      ["GET", "/api/v1/tokens", undefined],
      ["POST", "/api/v1/tokens", { name: "escalate", scope: "read" }],
      ["DELETE", `/api/v1/tokens/${read.id}`, undefined],
    ];
    for (const [method, path, body] of writes) {
      const response = await as(read.secret, method, path, body);
      expect([method, path, response.status, await response.json()]).toEqual([
        method,
        path,
        403,
        { errors: "This token may only read: managing sources and tokens needs the API token" },
      ]);
    }
    // Nothing changed.
    const source = (await (await lp.api("GET", `/api/v1/sources/${a.id}`)).json()) as any;
    expect(source.data.attributes.token).toBe(a.token);
    expect(source.data.attributes.ingesting_paused).toBe(false);
    expect((await as(read.secret, "GET", "/api/v1/sources")).status).toBe(200);
  });
});
