// The field sidebar's arithmetic: among the rows shown, the few fields worth filtering by (present
// in many rows, few distinct values: level, service, http.status… rather than request ids) and
// their most frequent values; and the query term a click on a value adds. A level is counted under
// its severity in the one table of level names (src/query/levels.ts): `error`, `ERROR`, `err` and
// pino's 50 are one value, and `level=error` finds them all.
import { levelOf } from "./levels.js";

/** Shown first when present, in this order; other fields follow by how many rows have them. */
const PREFERRED = [
  "level",
  "severity",
  "service",
  "service.name",
  "app",
  "env",
  "environment",
  "host",
  "hostname",
  "http.method",
  "http.status",
  "status",
  "logger",
  "job",
];
/** Never offered: logpond's own fields and free text. */
const SKIP = new Set(["dt", "id", "source_id", "message", "msg", "time", "timestamp", "date"]);
/** A field with more distinct values than this among the rows is an identifier, not a facet. */
const DISTINCT_MAX = 25;
/** A path the query language reads back as the same path (see src/query/parse.ts FIELD_CHAR). */
const PATH = /^[A-Za-z0-9_@$-]+(\.[A-Za-z0-9_@$-]+)*$/;

/** [{ path, present, values: [{ value, n }] }], best fields first. */
export function topFields(rows, maxFields = 6, maxValues = 5) {
  const stats = new Map(); // path → { present, values: Map(key → { value, n }), wide }
  const note = (path, value) => {
    let stat = stats.get(path);
    if (!stat) stats.set(path, (stat = { present: 0, values: new Map(), wide: false }));
    stat.present++;
    if (stat.wide) return;
    const key = `${typeof value}:${value}`;
    const seen = stat.values.get(key);
    if (seen) seen.n++;
    else if (stat.values.size >= DISTINCT_MAX) stat.wide = true;
    else stat.values.set(key, { value, n: 1 });
  };
  const walk = (object, prefix, depth) => {
    for (const [key, value] of Object.entries(object)) {
      if (!prefix && SKIP.has(key)) continue;
      const path = prefix ? `${prefix}.${key}` : key;
      if (value !== null && typeof value === "object") {
        if (!Array.isArray(value) && depth < 2) walk(value, path, depth + 1);
      } else if (value !== null && (typeof value !== "string" || value.length <= 200) && PATH.test(path)) {
        note(path, path === "level" ? (levelOf(String(value)) ?? value) : value);
      }
    }
  };
  for (const row of rows) walk(row, "", 0);
  const rank = (path) => {
    const i = PREFERRED.indexOf(path);
    return i < 0 ? PREFERRED.length : i;
  };
  return (
    [...stats]
      // A field whose values mostly differ (ids, durations) says nothing as a facet.
      .filter(([path, stat]) => !stat.wide && (rank(path) < PREFERRED.length || stat.values.size <= Math.max(1, stat.present * 0.6)))
      .sort(([a, x], [b, y]) => rank(a) - rank(b) || y.present - x.present || (a < b ? -1 : 1))
      .slice(0, maxFields)
      .map(([path, stat]) => ({
        path,
        present: stat.present,
        values: [...stat.values.values()].sort((a, b) => b.n - a.n || (String(a.value) < String(b.value) ? -1 : 1)).slice(0, maxValues),
      }))
  );
}

/**
 * `path=value` (or `path!=value`), the value quoted when the query language needs it to be: a `*`,
 * a first character that would read as part of an operator or as a quote (`~ = : ! < > ' \``), an
 * ending that reads as Lucene's fuzzy or boost (`a~2`, `a^2`), or a list (`error,warn`).
 */
export function filterTerm(path, value, exclude = false) {
  const op = exclude ? "!=" : "=";
  if (typeof value !== "string") return `${path}${op}${value}`;
  const bare = /^[^\s()"\\*~=:!<>'`][^\s()"\\*,|]*$/.test(value) && !/[~^][0-9.]*$/.test(value);
  return `${path}${op}${bare ? value : `"${value.replace(/["\\]/g, "\\$&")}"`}`;
}

/** The query with one more term ANDed on; a query with OR is parenthesised first (OR binds last). */
export function withTerm(query, term) {
  const q = query.trim();
  if (!q) return term;
  return /\bor\b/i.test(q) ? `(${q}) ${term}` : `${q} ${term}`;
}

/** A field path as the query API takes one in by= (FIELD_PATH and FIELD_PATH_MAX_CHARS in src/query/request.ts). */
export function isFieldPath(path) {
  return typeof path === "string" && path.length <= 200 && /^[A-Za-z0-9_@$][A-Za-z0-9_@$-]*(\.[A-Za-z0-9_@$-]+)*$/.test(path);
}
