// The security suite: every route of both listeners, with every kind of credential — none, a
// wrong one, one shaped like a read token but unknown, a revoked read token, the other listener's
// token (a source token on management, the API token on ingestion), a read token, a read token
// limited to one source — and the status each must get. A route added without its row here fails
// the last test.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ingestApp, managementApp } from "../../src/listeners";
import { webRoutes } from "../../src/web/routes";
import { API_TOKEN, startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";
import { createReadToken, type TestToken } from "../helpers/tokens";

let lp: TestLogpond;
let mine: TestSource;
let other: TestSource;
let read: TestToken;
let scoped: TestToken;
let revoked: TestToken;
/** An event of `mine`, for the context route. */
let event: string;
/** Saved views: of `mine`, and of both sources. */
let myView: string;
let bothView: string;
const createView = async (sourceIds: string[]) =>
  ((await (await lp.api("POST", "/api/v2/views", { name: `view ${crypto.randomUUID()}`, source_ids: sourceIds })).json()) as any).data.id as string;
beforeAll(async () => {
  lp = await startTestLogpond();
  mine = await lp.createSource({ name: `mine ${crypto.randomUUID()}` });
  other = await lp.createSource({ name: `other ${crypto.randomUUID()}` });
  read = await createReadToken(lp);
  scoped = await createReadToken(lp, [mine.id]);
  revoked = await createReadToken(lp);
  expect((await lp.api("DELETE", `/api/v1/tokens/${revoked.id}`)).status).toBe(204);
  expect((await lp.ingest(mine.token, '{"message":"context anchor"}')).status).toBe(202);
  event = String((await lp.stored(mine.id))[0]!.id);
  myView = await createView([mine.id]);
  bothView = await createView([mine.id, other.id]);
});
afterAll(async () => {
  await lp.stop();
});

type Credential = "none" | "wrong" | "read-shaped" | "revoked" | "other listener's" | "read" | "scoped read" | "API";
const CREDENTIALS: Credential[] = ["none", "wrong", "read-shaped", "revoked", "other listener's", "read", "scoped read", "API"];

function authorization(credential: Credential, listener: "api" | "ingest"): string | undefined {
  switch (credential) {
    case "none":
      return undefined;
    case "wrong":
      return "Bearer wrong-token-0123456789";
    case "read-shaped":
      return `Bearer lpr_${"A".repeat(48)}`;
    case "revoked":
      return `Bearer ${revoked.secret}`;
    case "other listener's":
      return `Bearer ${listener === "api" ? mine.token : API_TOKEN}`;
    case "read":
      return `Bearer ${read.secret}`;
    case "scoped read":
      return `Bearer ${scoped.secret}`;
    case "API":
      return `Bearer ${listener === "api" ? API_TOKEN : mine.token}`;
  }
}

interface Route {
  listener: "api" | "ingest";
  method: string;
  /** MINE / OTHER stand for the two sources' ids, TOKEN for a throwaway token's id. */
  path: string;
  body?: string;
  /** The status for each credential; a missing one means the same as `else`. */
  expect: Partial<Record<Credential, number>> & { else: number };
}

const UNAUTHENTICATED = { none: 401, wrong: 401, "read-shaped": 401, revoked: 401, "other listener's": 401 } as const;
/** A read: any read token may, a scoped one only of its source. */
const READ = (ok: number, scopedOk = ok) => ({ ...UNAUTHENTICATED, "scoped read": scopedOk, else: ok });
/** A management write: read tokens are refused before anything is read. */
const WRITE = (ok: number) => ({ ...UNAUTHENTICATED, read: 403, "scoped read": 403, else: ok });
/** Ingestion: the source token only; every other token is unknown there. */
const INGEST = (ok: number, unknown: number, missing = 401) => ({ none: missing, API: ok, else: unknown });
const OPEN = { else: 200 };

const ROUTES: Route[] = [
  { listener: "api", method: "GET", path: "/", expect: OPEN },
  { listener: "api", method: "GET", path: "/web/app.js", expect: OPEN },
  { listener: "api", method: "GET", path: "/health", expect: OPEN },
  { listener: "api", method: "GET", path: "/ready", expect: OPEN },
  { listener: "api", method: "GET", path: "/metrics", expect: OPEN },
  { listener: "api", method: "GET", path: "/api/v1/sources", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v1/sources/MINE", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v1/sources/OTHER", expect: READ(200, 404) },
  { listener: "api", method: "POST", path: "/api/v1/sources", body: '{"name":"security suite"}', expect: WRITE(201) },
  { listener: "api", method: "PATCH", path: "/api/v1/sources/MINE", body: '{"live_tail_pattern":"{message}"}', expect: WRITE(200) },
  { listener: "api", method: "POST", path: "/api/v1/sources/THROWAWAY/regenerate-token", expect: WRITE(200) },
  { listener: "api", method: "DELETE", path: "/api/v1/sources/THROWAWAY", expect: WRITE(204) },
  { listener: "api", method: "GET", path: "/api/v2/sources", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/sources/MINE", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/sources/OTHER", expect: READ(200, 404) },
  { listener: "api", method: "POST", path: "/api/v2/sources", body: '{"name":"security suite"}', expect: WRITE(201) },
  { listener: "api", method: "PATCH", path: "/api/v2/sources/MINE", body: '{"live_tail_pattern":"{message}"}', expect: WRITE(200) },
  { listener: "api", method: "POST", path: "/api/v2/sources/THROWAWAY/regenerate-token", expect: WRITE(200) },
  { listener: "api", method: "DELETE", path: "/api/v2/sources/THROWAWAY", expect: WRITE(204) },
  { listener: "api", method: "GET", path: "/api/v1/tokens", expect: WRITE(200) },
  { listener: "api", method: "POST", path: "/api/v1/tokens", body: '{"name":"security suite","scope":"read"}', expect: WRITE(201) },
  { listener: "api", method: "DELETE", path: "/api/v1/tokens/TOKEN", expect: WRITE(204) },
  { listener: "api", method: "GET", path: "/api/v2/query/live-tail?source_ids=MINE", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/query/live-tail?source_ids=OTHER", expect: READ(200, 404) },
  { listener: "api", method: "GET", path: "/api/v2/query/histogram?source_ids=MINE", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/query/histogram?source_ids=MINE,OTHER", expect: READ(200, 404) },
  { listener: "api", method: "GET", path: "/api/v2/query/dead-letters?source_ids=MINE", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/query/dead-letters?source_ids=OTHER", expect: READ(200, 404) },
  { listener: "api", method: "GET", path: "/api/v2/query/aggregate?source_ids=MINE&by=level", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/query/aggregate?source_ids=MINE,OTHER&by=level", expect: READ(200, 404) },
  { listener: "api", method: "GET", path: "/api/v2/query/context?source_id=MINE&id=EVENT", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/query/context?source_id=OTHER&id=EVENT", expect: { ...UNAUTHENTICATED, else: 404 } },
  { listener: "api", method: "GET", path: "/api/v2/query/live-tail/stream?source_ids=MINE", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/query/live-tail/stream?source_ids=OTHER", expect: READ(200, 404) },
  { listener: "api", method: "GET", path: "/api/v2/views", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/views/MYVIEW", expect: READ(200) },
  { listener: "api", method: "GET", path: "/api/v2/views/BOTHVIEW", expect: READ(200, 404) },
  { listener: "api", method: "POST", path: "/api/v2/views", body: '{"name":"security suite","source_ids":["MINE"]}', expect: WRITE(201) },
  { listener: "api", method: "PATCH", path: "/api/v2/views/MYVIEW", body: '{"query":"level:error"}', expect: WRITE(200) },
  { listener: "api", method: "DELETE", path: "/api/v2/views/THROWVIEW", expect: WRITE(204) },
  { listener: "ingest", method: "POST", path: "/", body: '{"message":"security suite"}', expect: INGEST(202, 403) },
  { listener: "ingest", method: "OPTIONS", path: "/", expect: { else: 204 } },
  { listener: "ingest", method: "POST", path: "/v1/logs", body: '{"resourceLogs":[]}', expect: INGEST(200, 403) },
  { listener: "ingest", method: "OPTIONS", path: "/v1/logs", expect: { else: 204 } },
  { listener: "ingest", method: "POST", path: "/loki/api/v1/push", body: '{"streams":[]}', expect: INGEST(204, 403) },
  { listener: "ingest", method: "GET", path: "/health", expect: OPEN },
  { listener: "ingest", method: "GET", path: "/ready", expect: OPEN },
];

async function resolvePath(path: string): Promise<string> {
  let resolved = path
    .replaceAll("MYVIEW", myView)
    .replaceAll("BOTHVIEW", bothView)
    .replaceAll("MINE", mine.id)
    .replaceAll("OTHER", other.id)
    .replaceAll("EVENT", event);
  if (resolved.includes("THROWVIEW")) resolved = resolved.replace("THROWVIEW", await createView([mine.id]));
  if (resolved.includes("THROWAWAY")) resolved = resolved.replace("THROWAWAY", (await lp.createSource()).id);
  if (resolved.includes("TOKEN")) resolved = resolved.replace("TOKEN", (await createReadToken(lp)).id);
  return resolved;
}

test.each(ROUTES.map((route) => [route.method, route.listener, route.path, route] as const))("%s %s%s: each credential's status", async (_, __, ___, route) => {
  const seen: Record<string, number> = {};
  const wanted: Record<string, number> = {};
  for (const credential of CREDENTIALS) {
    const auth = authorization(credential, route.listener);
    const response = await fetch(`${route.listener === "api" ? lp.apiUrl : lp.ingestUrl}${await resolvePath(route.path)}`, {
      method: route.method,
      headers: { "content-type": "application/json", ...(auth === undefined ? {} : { authorization: auth }) },
      body: route.body?.replaceAll("MINE", mine.id),
    });
    seen[credential] = response.status;
    wanted[credential] = route.expect[credential] ?? route.expect.else;
    if (response.status === 401 && route.listener === "api") {
      expect(response.headers.get("www-authenticate")).toBe("Bearer");
      expect(await response.json()).toEqual({ errors: "Invalid authentication" });
    } else if (response.status === 403 && route.listener === "api") {
      // Each refusal names what its write needs (docs/api.md, "Tokens and authentication").
      const needs = route.path.startsWith("/api/v2/views") ? "saving, changing and deleting views" : "managing sources and tokens";
      expect(await response.json()).toEqual({ errors: `This token may only read: ${needs} needs the API token` });
    } else await response.body?.cancel();
  }
  expect(seen).toEqual(wanted);
});

test("every route of both listeners has its row above", async () => {
  const listed = new Set(
    ROUTES.map(
      (route) => `${route.listener} ${route.method} ${route.path.split("?")[0]!.replace(/MYVIEW|BOTHVIEW|THROWVIEW|MINE|OTHER|THROWAWAY|TOKEN/, ":id")}`,
    ),
  );
  const served = new Set<string>();
  for (const [listener, app] of [
    ["api", managementApp],
    ["ingest", ingestApp],
  ] as const) {
    // The apps' route tables, built with stand-ins: only their paths are read.
    const built = (app as (deps: any) => { routes: { method: string; path: string }[] })({
      store: lp.store,
      metrics: lp.metrics,
      routes: { service: {}, authenticate: async () => ({ scope: "all" }), ingestingHost: () => "" },
      tokens: {},
      read: { tail: lp.tail, queryTimeoutMs: 1000, tailLimits: { maxRows: 1, maxBytes: 1 } },
      web: await webRoutes(),
      log: () => {},
    });
    for (const route of built.routes) served.add(`${listener} ${route.method} ${route.path}`);
  }
  // The page's other static files are served as /web/app.js is.
  const missing = [...served].filter((route) => !listed.has(route) && !route.includes("/web/"));
  expect(missing).toEqual([]);
});
