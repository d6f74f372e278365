// The live-tail query language (docs/reading.md) → a syntax tree. A small recursive-descent parser
// over query/tokens.ts's tokens; the tree is all that leaves this file, so no text of a query can
// reach SQL except as a bound parameter (query/sql.ts). Errors are values with a 1-based
// character position.
//
// What the language does not take is refused with what it does take, never read as something
// that silently matches nothing (`-level:info`, `_exists_:x`, `status:>=500`, `x=err*` were once
// searches for those very characters). The forms are documented in docs/reading.md.
//
//   query  := or?                      or   := and (OR and)*
//   and    := unary ((AND)? unary)*    unary := (NOT | "-") unary | primary
//   primary:= "(" or ")" | field op value | word | word* | "phrase" | /regex/
//   op     := ":" | "!:" | "=" | "!=" | ">" | ">=" | "<" | "<=" | "=~" | "!~"
//   value after ":" / "!:" may also be * (exists), prefix*, /regex/, or >= <= > < and a number

import { levelOf, type Level } from "./levels";
import { parseRegex, RegexSyntaxError } from "./regex";
import { type Op, QueryError, type Token, tokenize } from "./tokens";

export { QueryError };
export type { Op };

export type Node =
  | { kind: "text"; text: string }
  | { kind: "field"; path: string[]; op: Op; value: string; number: number | undefined }
  /** The field's text starts with `value` (ASCII letters folded, as `:`). */
  | { kind: "prefix"; path: string[]; value: string }
  /** The field is present and not null. */
  | { kind: "exists"; path: string[] }
  /** The event's `level` names this severity in the one table of level names (query/levels.ts). */
  | { kind: "level"; level: Level }
  /** A pattern of query/regex.ts found in the field's text, or in the event's whole text when `path` is undefined. */
  | { kind: "regex"; path: string[] | undefined; pattern: string }
  | { kind: "not"; node: Node }
  | { kind: "and" | "or"; nodes: Node[] };

/** A number a comparison accepts: plain decimal, no exponent (so SQL numeric and JS agree). */
export const NUMBER = /^-?[0-9]{1,30}(\.[0-9]{1,30})?$/;
export const MAX_QUERY_LENGTH = 4096;
const MAX_DEPTH = 64;

/** Parses a query; undefined for an empty one (no filter). Throws QueryError. */
export function parseQuery(input: string): Node | undefined {
  if (input.length > MAX_QUERY_LENGTH) throw new QueryError(MAX_QUERY_LENGTH + 1, `longer than ${MAX_QUERY_LENGTH} characters`);
  const tokens = tokenize(input);
  if (tokens.length === 0) return undefined;
  let i = 0;
  let depth = 0;
  const end = input.length + 1;
  const peek = () => tokens[i];
  const isKeyword = (token: Token | undefined, word: string) => token?.kind === "word" && token.text.toUpperCase() === word;

  const or = (): Node => {
    const nodes = [and()];
    while (isKeyword(peek(), "OR")) {
      i++;
      nodes.push(and());
    }
    return nodes.length === 1 ? nodes[0]! : { kind: "or", nodes };
  };
  const and = (): Node => {
    const nodes = [unary()];
    for (;;) {
      const next = peek();
      if (next === undefined || next.kind === ")" || isKeyword(next, "OR")) break;
      if (isKeyword(next, "AND")) i++;
      nodes.push(unary());
    }
    return nodes.length === 1 ? nodes[0]! : { kind: "and", nodes };
  };
  const unary = (): Node => {
    if (isKeyword(peek(), "NOT") || peek()?.kind === "-") {
      i++;
      return { kind: "not", node: nested(unary) };
    }
    return primary();
  };
  const nested = (rule: () => Node): Node => {
    if (++depth > MAX_DEPTH) throw new QueryError(peek()?.at ?? end, `nested deeper than ${MAX_DEPTH} levels`);
    const node = rule();
    depth--;
    return node;
  };
  const primary = (): Node => {
    const token = tokens[i++];
    if (token === undefined) throw new QueryError(end, "a term is missing (after AND, OR, NOT or an opening parenthesis)");
    switch (token.kind) {
      case "(": {
        const node = nested(or);
        const close = tokens[i++];
        if (close?.kind !== ")") throw new QueryError(close?.at ?? end, `the parenthesis opened at position ${token.at} is not closed`);
        return node;
      }
      case ")":
        throw new QueryError(token.at, "unexpected ')'");
      case "-":
        throw new QueryError(token.at, "unexpected '-'");
      case "phrase":
        return { kind: "text", text: token.text };
      case "regex":
        return regexNode(undefined, token.pattern, token.positions);
      case "field":
        return fieldNode(token);
      case "word":
        return wordNode(token);
    }
  };

  const tree = or();
  const rest = peek();
  if (rest !== undefined) throw new QueryError(rest.at, rest.kind === ")" ? "unexpected ')'" : "unexpected term");
  return tree;
}

/** A bare word: a text term; a trailing `*` is dropped (a word already matches inside longer words). */
function wordNode(token: Extract<Token, { kind: "word" }>): Node {
  const { text, at } = token;
  if (["AND", "OR", "NOT"].includes(text.toUpperCase())) {
    throw new QueryError(at, `'${text}' needs a term before and after it (quote it to search for the word)`);
  }
  if (text === "&&" || text === "||")
    throw new QueryError(at, `'${text}' is not an operator here: write ${text === "&&" ? "AND" : "OR"} (quote it to search for the characters)`);
  if (text.startsWith("!"))
    throw new QueryError(
      at,
      `'!' before a term is not NOT: write NOT ${text.slice(1) || "term"} or -${text.slice(1) || "term"} (quote it to search for the '!')`,
    );
  if (text.startsWith("|")) {
    throw new QueryError(
      at,
      "pipes ('|') are not taken: a query only filters events; for counts by a field use /api/v2/query/aggregate (quote '|' to search for it)",
    );
  }
  if (/^\+[A-Za-z_@$]/.test(text) || text === "+") {
    throw new QueryError(
      at,
      `'+' is not an operator: every term is required already (write ${text.slice(1) || "the term"}); quote a word that starts with '+' ("${text}")`,
    );
  }
  if (/^[~^]/.test(text)) throw new QueryError(at, UNTAKEN_SUFFIX(text));
  const suffix = LUCENE_SUFFIX.exec(text);
  if (suffix) throw new QueryError(at + suffix.index + 1, UNTAKEN_SUFFIX(suffix[0].slice(1)));
  const star = text.indexOf("*");
  if (star < 0) return { kind: "text", text };
  if (text === "*") throw new QueryError(at, "a lone '*': leave the query empty to match every event, or write field:* for events that have a field");
  if (star < text.length - 1) throw new QueryError(at + star, `only a trailing '*' is a wildcard (err*); quote the word to search for a '*' ("${text}")`);
  return { kind: "text", text: text.slice(0, -1) };
}

/** Lucene's fuzzy `~`, `~2` and boost `^2` after a term's letters or digits (`timeout~2`, `error^2`). */
const LUCENE_SUFFIX = /[A-Za-z0-9][~^][0-9.]*$/;
const UNTAKEN_SUFFIX = (suffix: string) =>
  `'${suffix}': fuzzy searches (~), proximity ("a b"~3) and boosts (^2) are not taken; quote the term to search for the characters`;

const STAR_IN_EQUAL = (op: string) =>
  `'${op}' compares whole values: quote a value with a '*' (x${op}"a*"), or write x:a* for a prefix and x:* for a field that exists`;

function fieldNode(token: Extract<Token, { kind: "field" }>): Node {
  const { path, op, value, quoted, at, valueAt } = token;
  if (path.some((part) => part === "")) throw new QueryError(at, `the field '${path.join(".")}' has an empty part`);
  const name = path.join(".");
  // A row's source_id is the source the event was sent to (it replaces a sent field of that name),
  // so a search of the event's own field would answer nothing the rows show: sources are chosen by
  // the request's source_ids.
  if (name === "source_id") {
    const example = /^[0-9]{1,15}$/.test(value) ? value : "12,13";
    throw new QueryError(
      at,
      `choose sources with source_ids=${example}, not in the query (source_id is the source an event was sent to, not one of its fields)`,
    );
  }
  if (name === "_exists_" || name === "_missing_") {
    const example = /^[A-Za-z0-9_.@$-]+$/.test(value) ? value : "field";
    throw new QueryError(
      at,
      `'${name}:' is not taken: write ${name === "_exists_" ? "" : "-"}${example}:* for events ${name === "_exists_" ? "with" : "without"} the field`,
    );
  }
  if (op === "=~" || op === "!~") {
    if (!quoted && /^\/.+\/$/.test(value))
      throw new QueryError(valueAt, `write the pattern without slashes (${name}${op}"${value.slice(1, -1)}") or as ${name}:${value}`);
    const node = regexNode(path, value, token.regex?.positions ?? positionsFrom(valueAt, value));
    return op === "=~" ? node : { kind: "not", node };
  }
  if (token.regex) {
    const node = regexNode(path, value, token.regex.positions);
    return op === ":" ? node : { kind: "not", node };
  }
  const negate = (node: Node): Node => (op === "!:" || op === "!=" ? { kind: "not", node } : node);
  if (!quoted && (op === ":" || op === "!:" || op === "=" || op === "!=")) {
    const suffix = LUCENE_SUFFIX.exec(value);
    if (suffix) throw new QueryError(valueAt + suffix.index + 1, UNTAKEN_SUFFIX(suffix[0].slice(1)));
    // `level:error,warn` once searched for that very text; a list of level names means either.
    const names = value.split(/[,|]/);
    if (name === "level" && names.length > 1 && names.every((part) => levelOf(part) !== undefined)) {
      throw new QueryError(valueAt, `one value per term: write (${names.map((part) => `${name}${op}${part}`).join(" OR ")})`);
    }
  }
  if ((op === ":" || op === "!:" || op === "=" || op === "!=") && name === "level") {
    const level = levelOf(value);
    if (level !== undefined) return negate({ kind: "level", level });
  }
  if (!quoted) {
    const star = value.indexOf("*");
    if (op === ":" || op === "!:") {
      if (value.startsWith("~")) throw new QueryError(valueAt, `':~' is not taken: write ${name}=~"${value.slice(1).replace(/^"|"$/g, "")}" for a pattern`);
      if (value.startsWith("[") || value.startsWith("{")) {
        throw new QueryError(
          valueAt,
          `ranges such as ${name}:[1 TO 5] are not taken: write ${name}>=1 ${name}<=5 (quote the value to search for the characters)`,
        );
      }
      if (value === "*") return negate({ kind: "exists", path });
      if (star >= 0 && star < value.length - 1)
        throw new QueryError(valueAt + star, `only a trailing '*' is a wildcard (${name}:err*); quote the value to search for a '*'`);
      if (star === value.length - 1) return negate({ kind: "prefix", path, value: value.slice(0, -1) });
    } else if (star >= 0 && (op === "=" || op === "!=")) {
      throw new QueryError(valueAt + star, STAR_IN_EQUAL(op));
    }
  }
  const numeric = NUMBER.test(value) ? Number(value) : undefined;
  if ((op === ">" || op === ">=" || op === "<" || op === "<=") && numeric === undefined) {
    throw new QueryError(valueAt, `'${op}' needs a number such as 500 or -1.5 (got '${value}')`);
  }
  return { kind: "field", path, op, value, number: numeric };
}

/** A regex node, its pattern checked here so that the compilers never meet one they cannot take. */
function regexNode(path: string[] | undefined, pattern: string, positions: number[]): Node {
  try {
    parseRegex(pattern);
  } catch (error) {
    if (!(error instanceof RegexSyntaxError)) throw error;
    const at = positions[Math.min(error.index, positions.length - 1)] ?? 1;
    throw new QueryError(at, `regex: ${error.problem}`);
  }
  return { kind: "regex", path, pattern };
}

/** The query positions of a value's characters when it was written as it is (unquoted). */
function positionsFrom(valueAt: number, value: string): number[] {
  return Array.from({ length: value.length + 1 }, (_, k) => valueAt + k);
}
