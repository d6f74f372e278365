// Query tree → a SQL condition over `raw`, with every value a bound parameter ($n). The meaning of
// each operator is the one query/match.ts gives in JavaScript for the live stream; the two are
// checked against each other on random events (test/integration/query-language.test.ts). Never interpolates text.
// Every leaf is wrapped in coalesce(…, false) so NOT of a missing field is true, as in JS.
import { LEVEL_ALIASES, type Level } from "./levels";
import type { Node } from "./parse";
import { parseRegex, postgresPattern } from "./regex";

export interface Condition {
  text: string;
  params: unknown[];
}

/**
 * `first` is the number of the first placeholder to use (the caller's own come before). `asText`:
 * an expression equal to raw::text that is cheaper to get (the tiers' `line`: a sealed event's
 * text as stored, not printed again from jsonb).
 */
export function compileQuery(node: Node, first: number, asText = "raw::text"): Condition {
  const params: unknown[] = [];
  const param = (value: unknown, cast: string) => {
    params.push(value);
    return `$${first + params.length - 1}::${cast}`;
  };
  const walk = (n: Node): string => {
    switch (n.kind) {
      case "and":
      case "or":
        return `(${n.nodes.map(walk).join(n.kind === "and" ? " and " : " or ")})`;
      case "not":
        return `(not ${walk(n.node)})`;
      case "text":
        // raw::text is the event as PostgreSQL prints jsonb; the term is JSON-escaped the same way,
        // so a quote or backslash in the term matches the stored one.
        return `(${asText} ilike ${param(`%${likeEscape(jsonEscape(n.text))}%`, "text")})`;
      case "prefix":
        return `coalesce((raw #>> ${param(n.path, "text[]")}) ilike ${param(`${likeEscape(n.value)}%`, "text")}, false)`;
      case "exists":
        // #>> is null for a missing field and for a JSON null: a field holding null is missing.
        return `((raw #>> ${param(n.path, "text[]")}) is not null)`;
      case "level": {
        // The level's text (a number as its digits) lowered as the query language folds case, in
        // the severity's aliases (query/levels.ts).
        const exact = `coalesce(lower(raw #>> ${param(["level"], "text[]")}) = any(${param(LEVEL_ALIASES[n.level], "text[]")}), false)`;
        if (asText === "raw::text") return exact;
        // Over the tiers a sealed line is parsed into raw only for the query's needles, which
        // cannot say "one of these names"; its text says it first, for a few scans instead of a
        // parse (query/levels.ts: levelHeads). CASE keeps that order, which an AND would not.
        const heads = levelHeads(n.level);
        return `case when ${asText} ilike any(${param(heads.ilike, "text[]")}) or ${asText} like any(${param(heads.like, "text[]")}) then ${exact} else false end`;
      }
      case "regex": {
        const pattern = param(postgresPattern(parseRegex(n.pattern)), "text");
        return n.path === undefined ? `(${asText} ~ ${pattern})` : `coalesce((raw #>> ${param(n.path, "text[]")}) ~ ${pattern}, false)`;
      }
      case "field": {
        const path = param(n.path, "text[]");
        const value = `(raw #> ${path})`;
        const text = `(raw #>> ${path})`;
        switch (n.op) {
          case ":":
          case "!:": {
            const contains = `coalesce(${text} ilike ${param(`%${likeEscape(n.value)}%`, "text")}, false)`;
            return n.op === ":" ? contains : `(not ${contains})`;
          }
          case "=":
          case "!=": {
            const numberCase = n.number === undefined ? "false" : `${text}::numeric = ${param(n.value, "numeric")}`;
            const equal =
              `coalesce(case jsonb_typeof(${value}) when 'number' then ${numberCase}` +
              ` when 'string' then ${text} = ${param(n.value, "text")}` +
              ` when 'boolean' then ${text} = ${param(n.value, "text")} else false end, false)`;
            return n.op === "=" ? equal : `(not ${equal})`;
          }
          default:
            // CASE, not AND: PostgreSQL may evaluate AND's operands in any order, and the cast of a
            // string would raise an error; inside CASE it only runs for numbers.
            return `coalesce(case when jsonb_typeof(${value}) = 'number' then ${text}::numeric ${n.op} ${param(n.value, "numeric")} end, false)`;
        }
      }
    }
  };
  return { text: walk(node), params };
}

/**
 * Patterns one of which the text of every event whose `level` names this severity holds: it prints
 * `"level": "<name>"` (a name has no character JSON escapes) or `"level": <number>`, so the first
 * two characters of each name after `"level": "` (ILIKE for letters, LIKE for digits), and each
 * number after `"level": `. A necessary condition only; the exact test decides.
 */
export function levelHeads(level: Level): { ilike: string[]; like: string[] } {
  const ilike = new Set<string>();
  const like = new Set<string>();
  for (const alias of LEVEL_ALIASES[level]) {
    const head = `%"level": "${alias.slice(0, 2)}%`;
    if (/^[0-9]+$/.test(alias)) like.add(head).add(`%"level": ${alias}%`);
    else ilike.add(head);
  }
  return { ilike: [...ilike], like: [...like] };
}

/** Backslash-escapes LIKE's own characters (backslash is ILIKE's default escape). */
export function likeEscape(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** The text as it appears inside a JSON string literal. */
export function jsonEscape(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}
