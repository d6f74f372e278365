// The one table of level names: which texts of an event's `level` field name the same severity.
// Search (`level:error`, query/sql.ts and query/match.ts), the histogram's counts per level
// (query/histogram.ts) and the page (its sidebar and bars: web/routes.ts serves this file to the
// browser, transpiled as it is) all fold levels through it, so a chart's "error" and the rows of
// `level:error` are the same events. Self-contained (no imports): it runs in the browser too.

/** The severities, most severe first (OpenTelemetry's names, lowercased). */
export const LEVELS = ["fatal", "error", "warn", "info", "debug", "trace"] as const;
export type Level = (typeof LEVELS)[number];

/**
 * The texts each severity goes by, lowercased (a level compares with its ASCII letters lowered).
 * Names from syslog (err, crit, emerg, notice…), OpenTelemetry's short names (ERROR2…ERROR4),
 * log4j, Python (critical), java.util.logging (severe, fine, finer, finest), Serilog (verbose),
 * Go's zap and logrus (panic), Serilog's three-letter forms (FTL, ERR, WRN, INF, DBG, VRB); numbers as pino and bunyan write them (10 trace … 60 fatal).
 * Syslog's numeric severities (0–7) are not here: they collide with OpenTelemetry's numbers.
 */
export const LEVEL_ALIASES: Readonly<Record<Level, readonly string[]>> = {
  fatal: ["fatal", "fatal2", "fatal3", "fatal4", "critical", "crit", "alert", "emerg", "emergency", "panic", "ftl", "60"],
  error: ["error", "err", "eror", "error2", "error3", "error4", "severe", "50"],
  warn: ["warn", "warning", "wrn", "warn2", "warn3", "warn4", "40"],
  info: ["info", "inf", "information", "informational", "notice", "info2", "info3", "info4", "30"],
  debug: ["debug", "dbg", "dbug", "debug2", "debug3", "debug4", "fine", "20"],
  trace: ["trace", "trc", "trace2", "trace3", "trace4", "verbose", "finer", "finest", "vrb", "10"],
};

const BY_ALIAS = new Map<string, Level>();
for (const level of LEVELS) for (const alias of LEVEL_ALIASES[level]) BY_ALIAS.set(alias, level);

/**
 * The severity a level's text names (the text as `#>>` prints the field: a number as its digits),
 * compared with ASCII letters lowered only, as the query language folds case; undefined for a
 * text the table does not know.
 */
export function levelOf(text: string): Level | undefined {
  if (text.length > 16) return undefined;
  return BY_ALIAS.get(text.replace(/[A-Z]/g, (c) => c.toLowerCase()));
}

/** How a level is counted and shown: its severity when the table knows it, else its text with ASCII letters lowered. */
export function foldLevel(text: string): string {
  return levelOf(text) ?? text.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** Every alias and its severity, for SQL (a jsonb object: alias → severity). */
export function aliasObject(): Record<string, Level> {
  return Object.fromEntries(BY_ALIAS);
}
