// The management listener's /api/v2/query routes (docs/api.md, "Reading"): read the parameters
// (query/request.ts), check the sources exist, read a page (query/read.ts), answer
// `{"data":[…],"pagination":{"next":…}}` with absolute links (and `meta` on an empty page); the
// histogram (query/histogram.ts) takes the same parameters; context (query/context.ts) answers the
// events around one event, with links to more on either side. The API token, or a read token (of
// some sources only, when it was made so: the others are answered as absent).
import { createHash } from "node:crypto";
import { Elysia } from "elysia";
import { AppError } from "../errors";
import type { Access, Authenticate } from "../http/auth";
import { BUCKETS, type Histogram, type Registry } from "../metrics";
import type { Sql } from "../store/db";
import { readAggregate, readAggregateRequest } from "./aggregate";
import { CONTEXT_DEFAULT, readContext, readContextRequest } from "./context";
import { readHistogram, readHistogramRequest } from "./histogram";
import type { ScanPool } from "./scan-pool";
import { readHistogramBy } from "./histogram-by";
import { newestBefore, readDeadLetters, readEvents } from "./read";
import { checkSources, makeCursor, nextLink, readBatch, readOrder, readRequest, readSourceIds, refuseUnknown, single } from "./request";

export interface QueryRoutesDeps {
  sql: Sql;
  authenticate: Authenticate;
  queryTimeoutMs: number;
  /** Times each request (logpond_query_request_duration_seconds). */
  metrics?: Registry;
  /** Where a histogram with a query counts its sealed blocks; without it PostgreSQL counts them. */
  scans?: ScanPool;
}

/** The timed query routes, the `route` label's values (the live-tail stream is no latency: not timed). */
export const QUERY_ROUTES = [
  "/api/v2/query/live-tail",
  "/api/v2/query/histogram",
  "/api/v2/query/dead-letters",
  "/api/v2/query/context",
  "/api/v2/query/aggregate",
] as const;
export type QueryRoute = (typeof QUERY_ROUTES)[number];

/** Its /metrics series: one histogram per route, every one rendered from the start. */
export function queryDurations(metrics: Registry): Record<QueryRoute, Histogram> {
  return metrics.histogramBy(
    "logpond_query_request_duration_seconds",
    "Query API requests' time from the token check to the answer (any answer), by route.",
    BUCKETS.query,
    "route",
    QUERY_ROUTES,
  );
}

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

function page(rows: string[], next: string | null, meta?: Record<string, unknown>): Response {
  const tail = meta === undefined ? "" : `,"meta":${JSON.stringify(meta)}`;
  return new Response(`{"data":[${rows.join(",")}],"pagination":{"next":${JSON.stringify(next)}}${tail}}`, { headers: JSON_HEADERS });
}

export function queryRoutes({ sql, authenticate, queryTimeoutMs, metrics: registry, scans }: QueryRoutesDeps) {
  const metrics = registry && queryDurations(registry);
  return new Elysia({ name: "logpond/query", prefix: "/api/v2/query" })
    .resolve(async ({ request }) => ({ access: await authenticate(request) }))
    .get(
      "/live-tail",
      timed(metrics, "/api/v2/query/live-tail", async ({ request, access }) => {
        const url = new URL(request.url);
        const read = readRequest(url);
        await checkSources(sql, read.sourceIds, read.malformed, access);
        const started = performance.now();
        const result = await readEvents(sql, read, queryTimeoutMs, {}, scans);
        const next = result.next ? nextLink(url, makeCursor(read, result.next)) : null;
        if (result.rows.length > 0) return page(result.rows, next);
        // An empty page says whether anything older matches, and where the newest of it is, so a
        // client can step back to it instead of widening the window blindly. Within the same budget.
        const older = await newestBefore(sql, read, queryTimeoutMs - Math.ceil(performance.now() - started));
        return page([], next, { empty_window: true, older: older === undefined ? null : older !== null, older_dt: older ?? null });
      }),
    )
    .get(
      "/histogram",
      timed(metrics, "/api/v2/query/histogram", async ({ request, access }) => {
        const read = readHistogramRequest(new URL(request.url));
        await checkSources(sql, read.sourceIds, read.malformed, access);
        const answer =
          read.by === undefined
            ? await readHistogram(sql, read, queryTimeoutMs, scans)
            : await readHistogramBy(sql, { ...read, by: read.by }, queryTimeoutMs, scans);
        return new Response(JSON.stringify(answer), { headers: JSON_HEADERS });
      }),
    )
    .get(
      "/aggregate",
      timed(metrics, "/api/v2/query/aggregate", async ({ request, access }) => {
        const read = readAggregateRequest(new URL(request.url));
        await checkSources(sql, read.sourceIds, read.malformed, access);
        return new Response(JSON.stringify(await readAggregate(sql, read, queryTimeoutMs, scans)), { headers: JSON_HEADERS });
      }),
    )
    .get(
      "/context",
      timed(metrics, "/api/v2/query/context", async ({ request, access }) => {
        const url = new URL(request.url);
        const read = readContextRequest(url);
        const known = read.sourceId > 0;
        await checkSources(sql, known ? [read.sourceId] : [], known ? [] : [read.sourceText.slice(0, 40)], access);
        const context = await readContext(sql, read, queryTimeoutMs);
        if (context === undefined) {
          throw new AppError("not_found", `Event ${read.id} was not found in source ${read.sourceId}${read.dt === undefined ? "" : ` at dt ${read.dt}`}`);
        }
        // More on a side: the context of that side's last row, with nothing on the other side (its first row is that row again).
        const link = (edge: { id: string; dt: string }, before: number, after: number) => {
          const target = new URL(url.pathname, url.origin);
          target.searchParams.set("source_id", String(read.sourceId));
          target.searchParams.set("id", edge.id);
          target.searchParams.set("dt", edge.dt);
          target.searchParams.set("before", String(before));
          target.searchParams.set("after", String(after));
          return target.toString();
        };
        const pagination = {
          before: context.moreBefore ? link(context.first, read.before || CONTEXT_DEFAULT, 0) : null,
          after: context.moreAfter ? link(context.last, 0, read.after || CONTEXT_DEFAULT) : null,
        };
        const meta = { anchor_id: read.id, anchor_index: context.anchorIndex };
        return new Response(`{"data":[${context.rows.join(",")}],"pagination":${JSON.stringify(pagination)},"meta":${JSON.stringify(meta)}}`, {
          headers: JSON_HEADERS,
        });
      }),
    )
    .get(
      "/dead-letters",
      timed(metrics, "/api/v2/query/dead-letters", async ({ request, access }) => {
        const url = new URL(request.url);
        // Silently ignoring a filter (query, from, to) would hand back rows the caller asked to leave out.
        refuseUnknown(url, "dead-letters", DEAD_LETTER_PARAMETERS, " (every dead letter of source_ids, by batch, order and cursor)");
        const { ids, malformed } = readSourceIds(url);
        const batch = readBatch(url);
        const order = readOrder(url);
        const binding = createHash("sha256")
          .update(JSON.stringify(["dead-letters", ids, order]))
          .digest("base64url")
          .slice(0, 16);
        const afterId = openDeadLetterCursor(single(url, "cursor"), binding);
        await checkSources(sql, ids, malformed, access);
        const result = await readDeadLetters(sql, { sourceIds: ids, batch, order, afterId }, queryTimeoutMs);
        const cursor = result.nextId === undefined ? null : Buffer.from(JSON.stringify({ v: 1, h: binding, i: result.nextId })).toString("base64url");
        return page(result.rows, cursor === null ? null : nextLink(url, cursor));
      }),
    );
}

/**
 * A handler timed into its route's histogram, whatever it answers or throws (a 400 is timed too).
 * Requests the token check refuses never reach it: they are no query.
 */
function timed(metrics: Record<QueryRoute, Histogram> | undefined, route: QueryRoute, handler: (context: QueryContext) => Promise<Response>) {
  if (metrics === undefined) return handler;
  return async (context: QueryContext): Promise<Response> => {
    const started = performance.now();
    try {
      return await handler(context);
    } finally {
      metrics[route].observe((performance.now() - started) / 1000);
    }
  };
}

type QueryContext = { request: Request; access: Access };

/** What a dead-letter listing takes; anything else (the live tail's query, from, to included) is a 400. */
const DEAD_LETTER_PARAMETERS = ["source_ids", "batch", "order", "cursor"];

function openDeadLetterCursor(cursor: string | null, binding: string): string | undefined {
  if (cursor === null || cursor === "") return undefined;
  let body: { v?: unknown; h?: unknown; i?: unknown } | undefined;
  try {
    body = JSON.parse(Buffer.from(cursor, "base64url").toString());
  } catch {
    body = undefined;
  }
  if (typeof body !== "object" || body === null || body.v !== 1 || typeof body.i !== "string" || !/^[0-9]{1,19}$/.test(body.i)) {
    throw new AppError("bad_request", "cursor is not one this API gave out; take it from pagination.next");
  }
  if (body.h !== binding) throw new AppError("bad_request", "cursor belongs to other parameters (source_ids or order changed); start again without cursor");
  return body.i;
}
