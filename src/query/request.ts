// Reads the query API's parameters (docs/api.md, "Reading: the query API") into a checked request, and owns the cursor: an
// opaque base64url JSON holding the resolved window and the last (dt, id) sent, bound by a hash
// to the parameters that define the walk (source_ids, query, order, from, to; not batch, which
// may change between pages harmlessly). Every refusal is a 400 naming the parameter.
import { createHash } from "node:crypto";
import { AppError } from "../errors";
import { type Access, maySee } from "../http/auth";
import { eventTime } from "../codec/time";
import { parseQuery, QueryError, type Node } from "./parse";
import type { Sql } from "../store/db";
import { sourceIdsAmong } from "../store/sources";

export const BATCH_DEFAULT = 100;
export const BATCH_MAX = 10_000;
export const WINDOW_DEFAULT_MS = 30 * 60_000;
export const MAX_SOURCE_IDS = 100;
const EARLIEST_MS = Date.UTC(1000, 0, 1);

export type Order = "newest_first" | "oldest_first";

export interface Position {
  /** RFC 3339 UTC with six fraction digits, as rows show it. */
  dt: string;
  id: string;
}

export interface ReadRequest {
  sourceIds: number[];
  /** As sent, for the next link. */
  given: URLSearchParams;
  query: Node | undefined;
  batch: number;
  order: Order;
  from: string;
  to: string;
  after: Position | undefined;
  binding: string;
}

const badRequest = (message: string) => new AppError("bad_request", message);

/**
 * A parameter that takes one value: 400 when it is sent more than once, since reading the first
 * would silently drop the others (`batch=1&batch=500`, `query=a&query=b`).
 */
export function single(url: URL, name: string): string | null {
  const values = url.searchParams.getAll(name);
  if (values.length > 1) throw badRequest(`${name} was sent ${values.length} times; send it once`);
  return values[0] ?? null;
}

/**
 * A list parameter: every value sent, each split at commas, so `by=a&by=b` (how many HTTP clients
 * write an array) is `by=a,b` instead of losing its second half.
 */
export function listParam(url: URL, name: string): string | null {
  const values = url.searchParams.getAll(name).filter((value) => value.trim() !== "");
  return values.length === 0 ? url.searchParams.get(name) : values.join(",");
}

/** A field path as the query language reads one (query/parse.ts): what by=, facets=… take. */
export const FIELD_PATH_MAX_CHARS = 200;
export const FIELD_PATH = /^[A-Za-z0-9_@$][A-Za-z0-9_@$-]*(\.[A-Za-z0-9_@$-]+)*$/;

/**
 * 400 naming every parameter a route does not take: ignored, it would answer something other than
 * what was asked (`histogram?by=service` counting by level, `context?query=x` every event).
 */
export function refuseUnknown(url: URL, route: string, takes: readonly string[], hint = ""): void {
  // An empty name (`?=x`) is no parameter anyone meant.
  const unknown = [...new Set(url.searchParams.keys())].filter((name) => name !== "" && !takes.includes(name));
  if (unknown.length === 0) return;
  const names = unknown.slice(0, 5).map((name) => JSON.stringify(name.slice(0, 40)).slice(1, -1));
  const more = unknown.length > 5 ? ` and ${unknown.length - 5} more` : "";
  throw badRequest(`${route} does not take ${names.join(", ")}${more}: it takes ${takes.join(", ")}${hint}`);
}

/** Source ids as sent (comma-separated, and over repeats): 400 when missing, and any that is not a positive integer is returned as unknown. */
export function readSourceIds(url: URL): { ids: number[]; malformed: string[] } {
  const raw = listParam(url, "source_ids");
  if (raw === null || raw.trim() === "") throw badRequest("source_ids is required: a comma-separated list of source ids, e.g. source_ids=12,13");
  const parts = raw
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "");
  if (parts.length === 0) throw badRequest("source_ids is required: a comma-separated list of source ids, e.g. source_ids=12,13");
  if (parts.length > MAX_SOURCE_IDS) throw badRequest(`source_ids lists ${parts.length} sources; at most ${MAX_SOURCE_IDS} at once`);
  const ids: number[] = [];
  const malformed: string[] = [];
  for (const part of parts) {
    if (/^[0-9]{1,15}$/.test(part) && Number(part) > 0) ids.push(Number(part));
    else malformed.push(part.slice(0, 40));
  }
  return { ids: [...new Set(ids)].sort((a, b) => a - b), malformed };
}

export function readBatch(url: URL): number {
  const raw = single(url, "batch");
  if (raw === null || raw === "") return BATCH_DEFAULT;
  if (!/^[0-9]{1,6}$/.test(raw) || Number(raw) < 1 || Number(raw) > BATCH_MAX) {
    throw badRequest(`batch must be a whole number from 1 to ${BATCH_MAX} (got ${JSON.stringify(raw.slice(0, 32))})`);
  }
  return Number(raw);
}

export function readOrder(url: URL): Order {
  const raw = single(url, "order");
  if (raw === null || raw === "") return "newest_first";
  if (raw !== "newest_first" && raw !== "oldest_first") {
    throw badRequest(`order must be newest_first or oldest_first (got ${JSON.stringify(raw.slice(0, 32))})`);
  }
  return raw;
}

export function readQuery(url: URL): Node | undefined {
  const raw = single(url, "query") ?? "";
  try {
    return parseQuery(raw);
  } catch (error) {
    if (error instanceof QueryError) throw badRequest(error.message);
    throw error;
  }
}

/** An instant as RFC 3339 UTC with six fraction digits (sortable as text for years 1000–9999). */
export function micros(iso: string): string {
  return iso.length === 24 ? `${iso.slice(0, 23)}000Z` : iso;
}

/** `now`, or `now-<n><unit>` with s, m, h, d or w (`now-15m`, `now-24h`, `now-7d`). */
const RELATIVE = /^now(?:\s*-\s*(\d{1,9})\s*([smhdw]))?$/i;
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** A `from`/`to` as sent: RFC 3339, or relative to `now` (one clock reading per request). */
function readInstant(url: URL, name: "from" | "to", now: Date): string | undefined {
  const raw = single(url, name);
  if (raw === null || raw === "") return undefined;
  const relative = RELATIVE.exec(raw.trim());
  if (relative) {
    const back = relative[1] === undefined ? 0 : Number(relative[1]) * UNIT_MS[relative[2]!.toLowerCase()]!;
    return micros(new Date(Math.max(now.getTime() - back, EARLIEST_MS)).toISOString());
  }
  const parsed = /^\d{4}-\d{2}-\d{2}/.test(raw.trim()) ? eventTime(raw) : undefined;
  if (parsed === undefined) {
    throw badRequest(
      `${name} must be an RFC 3339 / ISO 8601 time such as 2026-11-22T10:00:00Z, or relative to now such as now-15m, now-24h, now-7d (got ${JSON.stringify(raw.slice(0, 64))})`,
    );
  }
  return micros(parsed);
}

/**
 * from/to as sent, or their defaults (to = now, from = to − 30 minutes), for routes without a
 * cursor (the histogram); 400 when from is after to.
 */
export function readWindow(url: URL, clock: Date): { from: string; to: string } {
  const to = readInstant(url, "to", clock) ?? micros(clock.toISOString());
  const from = readInstant(url, "from", clock) ?? micros(new Date(Math.max(Date.parse(`${to.slice(0, 23)}Z`) - WINDOW_DEFAULT_MS, EARLIEST_MS)).toISOString());
  if (from > to) throw badRequest(`from (${from}) is after to (${to})`);
  return { from, to };
}

/** The whole request; `now` is injectable for tests. Source existence is checked by the caller. */
export function readRequest(url: URL, now: () => Date = () => new Date()): ReadRequest & { malformed: string[] } {
  const { ids, malformed } = readSourceIds(url);
  const batch = readBatch(url);
  const order = readOrder(url);
  const query = readQuery(url);
  const clock = now();
  const fromGiven = readInstant(url, "from", clock);
  const toGiven = readInstant(url, "to", clock);
  // Bound to from/to as sent: a relative time resolves anew on every page, while the cursor
  // carries the window the first page resolved.
  const binding = bind(ids, url.searchParams.get("query") ?? "", order, url.searchParams.get("from") ?? undefined, url.searchParams.get("to") ?? undefined);

  let from: string, to: string, after: Position | undefined;
  const cursor = single(url, "cursor");
  if (cursor !== null && cursor !== "") {
    ({ from, to, after } = openCursor(cursor, binding));
  } else {
    to = toGiven ?? micros(clock.toISOString());
    from = fromGiven ?? micros(new Date(Math.max(Date.parse(`${to.slice(0, 23)}Z`) - WINDOW_DEFAULT_MS, EARLIEST_MS)).toISOString());
    after = undefined;
  }
  if (from > to) throw badRequest(`from (${from}) is after to (${to})`);
  return { sourceIds: ids, malformed, given: url.searchParams, query, batch, order, from, to, after, binding };
}

function bind(ids: number[], query: string, order: Order, from: string | undefined, to: string | undefined): string {
  return createHash("sha256")
    .update(JSON.stringify([ids, query, order, from ?? "", to ?? ""]))
    .digest("base64url")
    .slice(0, 16);
}

interface CursorBody {
  v: 1;
  h: string;
  f: string;
  t: string;
  d: string;
  i: string;
}

export function makeCursor(request: ReadRequest, last: Position): string {
  const body: CursorBody = { v: 1, h: request.binding, f: request.from, t: request.to, d: last.dt, i: last.id };
  return Buffer.from(JSON.stringify(body)).toString("base64url");
}

const DT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
/** A DT text that names a time (not February 30th or 24:61), as every bound given out does. */
const realTime = (t: string) => {
  const ms = Date.parse(`${t.slice(0, 19)}Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 19) === t.slice(0, 19);
};

function openCursor(cursor: string, binding: string): { from: string; to: string; after: Position } {
  let body: Partial<CursorBody> | undefined;
  try {
    body = JSON.parse(Buffer.from(cursor, "base64url").toString());
  } catch {
    body = undefined;
  }
  const valid =
    typeof body === "object" &&
    body !== null &&
    body.v === 1 &&
    [body.f, body.t, body.d].every((t) => typeof t === "string" && DT.test(t) && realTime(t)) &&
    typeof body.i === "string" &&
    /^-?[0-9]{1,19}$/.test(body.i);
  if (!valid) throw badRequest("cursor is not one this API gave out; take it from pagination.next");
  if (body!.h !== binding) {
    throw badRequest("cursor belongs to other parameters (source_ids, query, order, from or to changed); start again without cursor");
  }
  return { from: body!.f!, to: body!.t!, after: { dt: body!.d!, id: body!.i! } };
}

/** pagination.next: this URL with the same parameters as sent and the new cursor. */
export function nextLink(url: URL, cursor: string): string {
  const target = new URL(url.pathname, url.origin);
  for (const [key, value] of url.searchParams) if (key !== "cursor") target.searchParams.append(key, value);
  target.searchParams.set("cursor", cursor);
  return target.toString();
}

/** 404 naming every id that is malformed, not a source, or one `access` may not see (as if absent). */
export async function checkSources(sql: Sql, ids: number[], malformed: string[], access: Access): Promise<void> {
  const known = new Set((await sourceIdsAmong(sql, ids)).filter((id) => maySee(access, id)));
  const unknown = [...malformed, ...ids.filter((id) => !known.has(id)).map(String)];
  if (unknown.length > 0) {
    throw new AppError("not_found", `Source${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} ${unknown.length > 1 ? "were" : "was"} not found`);
  }
}
