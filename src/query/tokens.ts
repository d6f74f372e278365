// The query language's tokens (query/parse.ts builds the tree from them): words, phrases,
// `/patterns/`, parentheses, `-` before a term, and a field with its operator and value, each with
// its 1-based position for errors. Where a value's form changes its meaning (`x:>=5`, `x:/re/`, a
// quoted pattern keeping its backslashes) it is read here; what it means is parse.ts's.

export type Op = ":" | "!:" | "=" | "!=" | ">" | ">=" | "<" | "<=";
export type TokenOp = Op | "=~" | "!~";

export type Token =
  | { kind: "(" | ")" | "-"; at: number }
  | { kind: "word"; text: string; at: number }
  | { kind: "phrase"; text: string; at: number }
  | { kind: "regex"; pattern: string; at: number; positions: number[] }
  | { kind: "field"; path: string[]; op: TokenOp; value: string; quoted: boolean; at: number; valueAt: number; regex?: { positions: number[] } };

export class QueryError extends Error {
  constructor(
    readonly position: number,
    problem: string,
  ) {
    super(`query: ${problem} at position ${position}`);
    this.name = "QueryError";
  }
}

const FIELD_CHAR = /[A-Za-z0-9_.@$-]/;
const WORD_END = /[\s()"]/;
const OPS: readonly TokenOp[] = [">=", "<=", "=~", "!~", "!=", "!:", ":", "=", ">", "<"];
const COMPARISONS = [">=", "<=", ">", "<"] as const;

export function tokenize(input: string): Token[] {
  // Ingestion stores a NUL as U+FFFD (docs/ingestion.md), so no term holding one can match; and
  // PostgreSQL refuses it in a text parameter, which made a field's value with one a 500.
  const nul = input.indexOf("\u0000");
  if (nul >= 0) throw new QueryError(nul + 1, "a NUL character cannot be matched (no stored text holds one: ingestion stores it as U+FFFD)");
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === "(" || c === ")") {
      tokens.push({ kind: c, at: i + 1 });
      i++;
    } else if (c === "-") {
      // `-term` is NOT term, as in most search boxes; a term that starts with '-' is quoted.
      const next = input[i + 1];
      if (next === undefined || /[\s)]/.test(next))
        throw new QueryError(i + 1, `a '-' needs a term right after it (-debug); quote "-" to search for the character`);
      if (next === "-") throw new QueryError(i + 1, `'--': quote a term that starts with '-' ("--verbose")`);
      tokens.push({ kind: "-", at: i + 1 });
      i++;
    } else if (c === '"') {
      const [text, next] = quoted(input, i);
      tokens.push({ kind: "phrase", text, at: i + 1 });
      i = next;
    } else if (c === "/" && regexLiteral(input, i)) {
      const { pattern, positions, end } = regexLiteral(input, i)!;
      tokens.push({ kind: "regex", pattern, positions, at: i + 1 });
      i = end;
    } else {
      const start = i;
      while (i < input.length && FIELD_CHAR.test(input[i]!)) i++;
      if (i === start && OPS.some((candidate) => input.startsWith(candidate, i))) {
        throw new QueryError(start + 1, `a field name is missing before '${OPS.find((candidate) => input.startsWith(candidate, i))}'`);
      }
      // `level = error` reads as `level=error`: spaces may stand around an operator.
      const fieldEnd = i;
      let opAt = i;
      while (opAt < input.length && input[opAt] === " ") opAt++;
      let op = i > start ? OPS.find((candidate) => input.startsWith(candidate, opAt)) : undefined;
      if (op !== undefined) i = opAt;
      if (op === undefined) {
        // A LogQL stream selector once became words searched for as text.
        const selector = input[start] === "{" ? /^\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"/.exec(input.slice(start)) : null;
        if (selector) {
          throw new QueryError(
            start + 1,
            `a LogQL stream selector is not taken: write its labels as fields (labels.${selector[1]}${selector[2]}"${selector[3]}")`,
          );
        }
        while (i < input.length && !WORD_END.test(input[i]!)) i++;
        if (i === start) throw new QueryError(start + 1, `unexpected '${input[start]}'`);
        tokens.push({ kind: "word", text: input.slice(start, i), at: start + 1 });
        continue;
      }
      const path = input.slice(start, fieldEnd).split(".");
      const name = input.slice(start, fieldEnd);
      i += op.length;
      while (i < input.length && input[i] === " ") i++;
      if (op === ":" || op === "!:") {
        // `status:>=500` is `status>=500`.
        const comparison = COMPARISONS.find((candidate) => input.startsWith(candidate, i));
        if (comparison !== undefined) {
          if (op === "!:") throw new QueryError(i + 1, `'!:' takes no comparison: write -${name}:${comparison}… or NOT ${name}${comparison}…`);
          op = comparison;
          i += comparison.length;
          while (i < input.length && input[i] === " ") i++;
        }
      }
      const valueAt = i + 1;
      let value: string;
      let regex: { positions: number[] } | undefined;
      const literal = (op === ":" || op === "!:") && input[i] === "/" ? regexLiteral(input, i) : undefined;
      if (input[i] === '"' && (op === "=~" || op === "!~")) {
        let positions: number[];
        [value, i, positions] = quotedRaw(input, i);
        regex = { positions };
      } else if (input[i] === '"') {
        [value, i] = quoted(input, i);
      } else if (input[i] === "'" || input[i] === "`") {
        throw new QueryError(valueAt, otherQuotes(input, i, name, op));
      } else if (literal) {
        value = literal.pattern;
        regex = { positions: literal.positions };
        i = literal.end;
      } else {
        const valueStart = i;
        while (i < input.length && !/[\s()]/.test(input[i]!)) i++;
        value = input.slice(valueStart, i);
        if (value === "" && input[i] === "(") {
          throw new QueryError(
            valueAt,
            op === "=~" || op === "!~"
              ? `quote a pattern with parentheses or spaces (${name}${op}"(a|b)")`
              : `a value in parentheses (${name}${op}(a OR b)) is not taken: write (${name}${op}a OR ${name}${op}b)`,
          );
        }
        if (value === "") throw new QueryError(valueAt, `a value is missing after '${input.slice(start, valueStart)}'`);
        const misread = misreadOperator(name, op, value);
        if (misread !== undefined) throw new QueryError(valueAt, misread);
        if (value.includes('"')) throw new QueryError(valueAt + value.indexOf('"'), "a quote inside a value (quote the whole value)");
      }
      const quotedValue = input[valueAt - 1] === '"';
      tokens.push({ kind: "field", path, op, value, quoted: quotedValue, at: start + 1, valueAt, ...(regex ? { regex } : {}) });
    }
  }
  return tokens;
}

/**
 * An unquoted value that starts with the rest of an operator another language spells so (`==`,
 * `=>`, `:=`, `::`, `=!`, `!==`): read as written it is a value starting with `=`, `>`, `:` or `!`,
 * which matches nothing (or, after `!=`, everything). Returns what to write instead, or undefined
 * for a value that is one. `<`/`>` count only before a number, so `image=<none>` stays a value.
 */
function misreadOperator(name: string, op: TokenOp, value: string): string | undefined {
  const first = value[0]!;
  const rest = value.slice(1);
  let instead: string | undefined;
  if (op === ":" || op === "!:" || op === "=" || op === "!=") {
    const negated = op === "!:" || op === "!=";
    if (first === "=") instead = `${name}${negated ? "!=" : "="}`;
    else if (first === ":") instead = `${name}${negated ? "!:" : ":"}`;
    else if (first === "!") instead = `${name}${op === "=" || op === "!=" ? "!=" : "!:"}`;
    else if (first === "~" && op === "!=") return `'!=~' is not an operator: write ${name}!~"${rest}"`;
    else if ((first === ">" || first === "<") && (op === "=" || op === "!=") && /^=?-?[0-9]/.test(rest)) {
      return `'${op}${first}' is not an operator: write ${negated ? "-" : ""}${name}${first}=${rest.replace(/^=/, "")}; quote the value to search for its characters (${name}${op}"${value}")`;
    }
  }
  if (instead === undefined) return undefined;
  return `'${op}${first}' is not an operator: write ${instead}${rest || "…"}; quote the value to search for its characters (${name}${op}"${value}")`;
}

/** A value in single quotes or backquotes (SQL, LogQL): those are characters here, so the value would match nothing. */
function otherQuotes(input: string, at: number, name: string, op: TokenOp): string {
  const mark = input[at]!;
  const close = input.indexOf(mark, at + 1);
  const inner = (close < 0 ? input.slice(at + 1).split(/[\s()]/)[0]! : input.slice(at + 1, close)).replace(/["\\]/g, (c) => `\\${c}`);
  return `single quotes and backquotes do not quote a value here: write ${name}${op}"${inner}"; to search for the ${mark} characters too, put them inside double quotes (${name}${op}"${mark}${inner}${mark}")`;
}

/**
 * `/pattern/` starting at `start`, when its closing slash (the first one no backslash escapes) ends
 * a term: then the pattern (`\/` read as `/`), each of its characters' query positions and the index
 * after it. Otherwise undefined, and the text is a word (`/api/v1` stays a path to search for).
 */
function regexLiteral(input: string, start: number): { pattern: string; positions: number[]; end: number } | undefined {
  let pattern = "";
  const positions: number[] = [];
  for (let j = start + 1; j < input.length; j++) {
    const c = input[j]!;
    if (c === "/") {
      const after = input[j + 1];
      if (after !== undefined && !/[\s()]/.test(after)) return undefined;
      positions.push(j + 1);
      return { pattern, positions, end: j + 1 };
    }
    if (c === "\\" && j + 1 < input.length) {
      if (input[j + 1] === "/") pattern += "/";
      else {
        pattern += c + input[j + 1];
        positions.push(j + 1);
      }
      positions.push(j + 2);
      j++;
      continue;
    }
    pattern += c;
    positions.push(j + 1);
  }
  return undefined;
}

/**
 * A quoted pattern starting at `start`: `\"` is a quote and `\\` a backslash, as in a phrase, but a
 * backslash before anything else is kept (`"\d+"` and `"\\d+"` are both the pattern \d+, as a
 * Loki or Prometheus user writes it). Returns the pattern, the index after it and each of its
 * characters' query positions.
 */
function quotedRaw(input: string, start: number): [string, number, number[]] {
  let text = "";
  const positions: number[] = [];
  for (let j = start + 1; j < input.length; j++) {
    const c = input[j]!;
    if (c === '"') {
      positions.push(j + 1);
      return [text, j + 1, positions];
    }
    if (c === "\\" && j + 1 < input.length) {
      const next = input[j + 1]!;
      if (next === '"' || next === "\\") text += next;
      else {
        text += c + next;
        positions.push(j + 1);
      }
      positions.push(j + 2);
      j++;
      continue;
    }
    text += c;
    positions.push(j + 1);
  }
  throw new QueryError(start + 1, "the quote opened here is not closed");
}

/** A "quoted phrase" starting at `start`; \" and \\ are escapes. Returns the text and the index after it. */
function quoted(input: string, start: number): [string, number] {
  let text = "";
  for (let i = start + 1; i < input.length; i++) {
    const c = input[i]!;
    if (c === '"') return [text, i + 1];
    if (c === "\\" && i + 1 < input.length) {
      text += input[++i];
      continue;
    }
    text += c;
  }
  throw new QueryError(start + 1, "the quote opened here is not closed");
}
