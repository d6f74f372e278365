// A saved view: the page's sources, query, range and columns under a name; how a request body
// becomes validated attributes and a row the JSON:API document. Pure: no HTTP, no database.
// Shaped after a Better Stack exploration of type `tail_query` (docs/api.md, "Saved views").
import { eventTime } from "../codec/time";
import { AppError } from "../errors";
import { MAX_QUERY_LENGTH, parseQuery, QueryError } from "../query/parse";
import { MAX_SOURCE_IDS } from "../query/request";
import type { savedViews } from "../store/schema";

export type ViewRow = typeof savedViews.$inferSelect;
export interface ViewChanges {
  name?: string;
  sourceIds?: number[];
  query?: string;
  rangeFrom?: string;
  rangeTo?: string | null;
  columns?: string[];
}

export const VIEW_LIMITS = { nameMaxChars: 255, columnsMax: 50, columnMaxChars: 200 };
const WRITABLE = new Set(["name", "source_ids", "query", "range", "columns"]);
const READ_ONLY = new Set(["id", "type", "created_at", "updated_at"]);
/** `now`, or `now-<n><unit>` (s, m, h, d, w), as the query API reads `from` and `to`. */
const RELATIVE = /^now(-\d{1,9}[smhdw])?$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
/** A field path as the query language reads one (src/query/parse.ts). */
const PATH = /^[A-Za-z0-9_@$][A-Za-z0-9_@$-]*(\.[A-Za-z0-9_@$-]+)*$/;

/** Validated attributes of a create (every required one present) or an update (only those sent). */
export function validateView(body: Record<string, unknown>, create: boolean): ViewChanges {
  const problems: Record<string, string[]> = {};
  const problem = (key: string, text: string) => (problems[key] ??= []).push(text);
  for (const key of Object.keys(body)) {
    if (READ_ONLY.has(key)) problem(key, "is read-only");
    else if (!WRITABLE.has(key)) problem(key, "is not a permitted attribute");
  }
  const out: ViewChanges = {};
  if ("name" in body || create) {
    const name = body.name;
    if (typeof name !== "string") problem("name", name === undefined || name === null ? "can't be blank" : "must be a string");
    else if (!name.trim()) problem("name", "can't be blank");
    else if (name.length > VIEW_LIMITS.nameMaxChars) problem("name", `is too long (maximum is ${VIEW_LIMITS.nameMaxChars} characters)`);
    else out.name = name.trim();
  }
  if ("source_ids" in body || create) {
    const ids = body.source_ids;
    if (!Array.isArray(ids) || ids.length === 0) problem("source_ids", "must be a non-empty array of source ids");
    else if (ids.length > MAX_SOURCE_IDS) problem("source_ids", `has too many ids (maximum is ${MAX_SOURCE_IDS})`);
    else {
      const bad = ids.filter((id) => !((typeof id === "string" && /^[1-9][0-9]{0,17}$/.test(id)) || (Number.isSafeInteger(id) && (id as number) > 0)));
      if (bad.length) problem("source_ids", `must hold source ids (numbers or numeric strings; got ${JSON.stringify(bad.slice(0, 3))})`);
      else out.sourceIds = [...new Set(ids.map(Number))];
    }
  }
  if ("query" in body) {
    const query = body.query ?? "";
    if (typeof query !== "string") problem("query", "must be a string");
    else if (query.length > MAX_QUERY_LENGTH) problem("query", `is too long (maximum is ${MAX_QUERY_LENGTH} characters)`);
    else {
      try {
        parseQuery(query);
        out.query = query.trim();
      } catch (error) {
        if (!(error instanceof QueryError)) throw error;
        problem("query", error.message.replace(/^query: /, "is not understood: "));
      }
    }
  } else if (create) out.query = "";
  if ("range" in body || create) {
    const range = body.range;
    if (range === undefined && create) {
      out.rangeFrom = "now-30m";
      out.rangeTo = null;
    } else if (typeof range !== "object" || range === null || Array.isArray(range)) {
      problem("range", 'must be an object such as {"from":"now-24h","to":"now"} ("to": null for a live view)');
    } else {
      const { from, to, ...rest } = range as Record<string, unknown>;
      for (const key of Object.keys(rest)) problem("range", `has no attribute ${JSON.stringify(key)} (only from and to)`);
      // An instant is read as the query API reads `from` and `to` (codec/time.ts), so a view saved
      // is one the query API takes when the view is opened (no 2026-02-30).
      const instant = (value: unknown) => typeof value === "string" && (RELATIVE.test(value) || (INSTANT.test(value) && eventTime(value) !== undefined));
      const back = (value: string) => {
        const [, n, unit] = /^now(?:-(\d+)([smhdw]))?$/.exec(value)!;
        return n === undefined ? 0 : Number(n) * { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[unit as "s"];
      };
      if (!instant(from)) problem("range", `from must be now, now-<n><s|m|h|d|w> or an RFC 3339 time (got ${JSON.stringify(from)?.slice(0, 64)})`);
      if (to !== null && to !== undefined && !instant(to)) {
        problem("range", `to must be null (live), now, now-<n><s|m|h|d|w> or an RFC 3339 time (got ${JSON.stringify(to).slice(0, 64)})`);
      }
      if (
        instant(from) &&
        typeof to === "string" &&
        instant(to) &&
        INSTANT.test(from as string) &&
        INSTANT.test(to) &&
        Date.parse(from as string) > Date.parse(to)
      ) {
        problem("range", "from is after to");
      }
      // Both relative: `now` then `now-1h` is backwards whenever the view is opened.
      if (typeof from === "string" && typeof to === "string" && RELATIVE.test(from) && RELATIVE.test(to) && back(from) < back(to)) {
        problem("range", "from is after to");
      }
      out.rangeFrom = from as string;
      out.rangeTo = (to as string | null | undefined) ?? null;
    }
  }
  if ("columns" in body) {
    const columns = body.columns;
    if (!Array.isArray(columns)) problem("columns", "must be an array of field paths");
    else if (columns.length > VIEW_LIMITS.columnsMax) problem("columns", `has too many fields (maximum is ${VIEW_LIMITS.columnsMax})`);
    else {
      const bad = columns.filter((c) => typeof c !== "string" || c.length > VIEW_LIMITS.columnMaxChars || !PATH.test(c));
      if (bad.length) problem("columns", `must hold field paths such as level or http.status (got ${JSON.stringify(bad.slice(0, 3)).slice(0, 120)})`);
      else out.columns = columns as string[];
    }
  } else if (create) out.columns = [];
  if (Object.keys(problems).length) throw new AppError("validation", "Validation errors", { invalidAttributes: problems });
  return out;
}

export function toViewDocument(row: ViewRow) {
  return {
    id: String(row.id),
    type: "view",
    attributes: {
      name: row.name,
      source_ids: row.sourceIds.map(String),
      query: row.query,
      range: { from: row.rangeFrom, to: row.rangeTo },
      columns: row.columns,
      created_at: row.createdAt.toISOString(),
      updated_at: row.updatedAt.toISOString(),
    },
  };
}
