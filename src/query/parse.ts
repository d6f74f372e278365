// The live-tail query language (CONTRACT §7) → a syntax tree. A small recursive-descent parser;
// the tree is all that leaves this file, so no text of a query can reach SQL except as a bound
// parameter (query/sql.ts). Errors are values with a 1-based character position.
//
//   query  := or?                      or   := and (OR and)*
//   and    := unary ((AND)? unary)*    unary := NOT unary | primary
//   primary:= "(" or ")" | field op value | word | "phrase"
//   op     := ":" | "!:" | "=" | "!=" | ">" | ">=" | "<" | "<="

export type Op = ":" | "!:" | "=" | "!=" | ">" | ">=" | "<" | "<=";

export type Node =
  | { kind: "text"; text: string }
  | { kind: "field"; path: string[]; op: Op; value: string; number: number | undefined }
  | { kind: "not"; node: Node }
  | { kind: "and" | "or"; nodes: Node[] };

export class QueryError extends Error {
  constructor(
    readonly position: number,
    problem: string,
  ) {
    super(`query: ${problem} at position ${position}`);
    this.name = "QueryError";
  }
}

/** A number a comparison accepts: plain decimal, no exponent (so SQL numeric and JS agree). */
export const NUMBER = /^-?[0-9]{1,30}(\.[0-9]{1,30})?$/;
const FIELD_CHAR = /[A-Za-z0-9_.@$-]/;
const WORD_END = /[\s()"]/;
const OPS: readonly Op[] = [">=", "<=", "!=", "!:", ":", "=", ">", "<"];
export const MAX_QUERY_LENGTH = 4096;
const MAX_DEPTH = 64;

type Token =
  | { kind: "(" | ")"; at: number }
  | { kind: "word"; text: string; at: number }
  | { kind: "phrase"; text: string; at: number }
  | { kind: "field"; path: string[]; op: Op; value: string; at: number; valueAt: number };

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
    if (isKeyword(peek(), "NOT")) {
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
      case "phrase":
        return { kind: "text", text: token.text };
      case "field":
        return fieldNode(token);
      case "word":
        if (["AND", "OR", "NOT"].includes(token.text.toUpperCase())) {
          throw new QueryError(token.at, `'${token.text}' needs a term before and after it (quote it to search for the word)`);
        }
        return { kind: "text", text: token.text };
    }
  };

  const tree = or();
  const rest = peek();
  if (rest !== undefined) throw new QueryError(rest.at, rest.kind === ")" ? "unexpected ')'" : "unexpected term");
  return tree;
}

function fieldNode(token: Extract<Token, { kind: "field" }>): Node {
  const { path, op, value } = token;
  if (path.some((part) => part === "")) throw new QueryError(token.at, `the field '${path.join(".")}' has an empty part`);
  const numeric = NUMBER.test(value) ? Number(value) : undefined;
  if ((op === ">" || op === ">=" || op === "<" || op === "<=") && numeric === undefined) {
    throw new QueryError(token.valueAt, `'${op}' needs a number such as 500 or -1.5 (got '${value}')`);
  }
  return { kind: "field", path, op, value, number: numeric };
}

function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === "(" || c === ")") {
      tokens.push({ kind: c, at: i + 1 });
      i++;
    } else if (c === '"') {
      const [text, next] = quoted(input, i);
      tokens.push({ kind: "phrase", text, at: i + 1 });
      i = next;
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
      const op = i > start ? OPS.find((candidate) => input.startsWith(candidate, opAt)) : undefined;
      if (op !== undefined) i = opAt;
      if (op === undefined) {
        while (i < input.length && !WORD_END.test(input[i]!)) i++;
        if (i === start) throw new QueryError(start + 1, `unexpected '${input[start]}'`);
        tokens.push({ kind: "word", text: input.slice(start, i), at: start + 1 });
        continue;
      }
      const path = input.slice(start, fieldEnd).split(".");
      i += op.length;
      while (i < input.length && input[i] === " ") i++;
      const valueAt = i + 1;
      let value: string;
      if (input[i] === '"') {
        [value, i] = quoted(input, i);
      } else {
        const valueStart = i;
        while (i < input.length && !/[\s()]/.test(input[i]!)) i++;
        value = input.slice(valueStart, i);
        if (value === "") throw new QueryError(valueAt, `a value is missing after '${input.slice(start, valueStart)}'`);
        if (value.includes('"')) throw new QueryError(valueAt + value.indexOf('"'), "a quote inside a value (quote the whole value)");
      }
      tokens.push({ kind: "field", path, op, value, at: start + 1, valueAt });
    }
  }
  return tokens;
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
