// Query tree → a predicate over a parsed event, for the live stream (rows that never leave memory).
// It must say exactly what query/sql.ts says in PostgreSQL, so it reproduces jsonb's text output
// (key order, spacing, numeric notation) and ILIKE's folding, which in the embedded database's C
// ctype lowers ASCII letters only. Checked against PostgreSQL on random events (test/integration/query-language.test.ts).
import type { Node } from "./parse";
import { asciiLower } from "../codec/grams";
import { jsonEscape } from "./sql";

export { asciiLower };

export type Predicate = (event: Record<string, unknown>) => boolean;

export function compileMatcher(node: Node): Predicate {
  switch (node.kind) {
    case "and": {
      const parts = node.nodes.map(compileMatcher);
      return (event) => parts.every((part) => part(event));
    }
    case "or": {
      const parts = node.nodes.map(compileMatcher);
      return (event) => parts.some((part) => part(event));
    }
    case "not": {
      const inner = compileMatcher(node.node);
      return (event) => !inner(event);
    }
    case "text": {
      const needle = asciiLower(jsonEscape(node.text));
      return (event) => asciiLower(jsonbText(event)).includes(needle);
    }
    case "field": {
      const { path, op, value, number } = node;
      switch (op) {
        case ":":
        case "!:": {
          const needle = asciiLower(value);
          const contains = (event: Record<string, unknown>) => {
            const found = lookup(event, path);
            if (found === undefined || found === null) return false;
            return asciiLower(typeof found === "string" ? found : jsonbText(found)).includes(needle);
          };
          return op === ":" ? contains : (event) => !contains(event);
        }
        case "=":
        case "!=": {
          const equal = (event: Record<string, unknown>) => {
            const found = lookup(event, path);
            if (typeof found === "number") return number !== undefined && found === number;
            if (typeof found === "string") return found === value;
            if (typeof found === "boolean") return String(found) === value;
            return false;
          };
          return op === "=" ? equal : (event) => !equal(event);
        }
        default: {
          const limit = number!;
          const test = COMPARE[op];
          return (event) => {
            const found = lookup(event, path);
            return typeof found === "number" && test(found, limit);
          };
        }
      }
    }
  }
}

const COMPARE: Record<">" | ">=" | "<" | "<=", (a: number, b: number) => boolean> = {
  ">": (a, b) => a > b,
  ">=": (a, b) => a >= b,
  "<": (a, b) => a < b,
  "<=": (a, b) => a <= b,
};

/** What `raw #> path` finds: object keys, and array positions (negative counts from the end). */
export function lookup(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const key of path) {
    if (Array.isArray(current)) {
      if (!/^-?[0-9]+$/.test(key)) return undefined;
      let index = Number(key);
      if (index < 0) index += current.length;
      current = current[index];
    } else if (typeof current === "object" && current !== null && Object.hasOwn(current, key)) {
      current = (current as Record<string, unknown>)[key];
    } else {
      return undefined;
    }
  }
  return current;
}

/** ILIKE's case folding under a C ctype: ASCII letters only. */
/** The text PostgreSQL prints for a jsonb value (`raw::text`, `#>>` of an object). */
export function jsonbText(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") return numericText(value);
  if (value === null || typeof value !== "object") return String(value);
  if (Array.isArray(value)) return `[${value.map(jsonbText).join(", ")}]`;
  const keys = Object.keys(value).sort(jsonbKeyOrder);
  return `{${keys.map((key) => `${JSON.stringify(key)}: ${jsonbText((value as Record<string, unknown>)[key])}`).join(", ")}}`;
}

/** jsonb keeps object keys shortest first, then by their UTF-8 bytes. */
function jsonbKeyOrder(a: string, b: string): number {
  const left = Buffer.from(a),
    right = Buffer.from(b);
  return left.length - right.length || Buffer.compare(left, right);
}

/**
 * numeric's output for the literal JSON.stringify wrote: plain decimal, as many fraction digits as
 * the literal had after its exponent is applied (1e+21 → 1000000000000000000000, 1.5e-7 → 0.00000015).
 */
export function numericText(n: number): string {
  const literal = String(n);
  const e = literal.indexOf("e");
  if (e < 0) return literal === "-0" ? "0" : literal;
  const negative = literal.startsWith("-");
  const mantissa = literal.slice(negative ? 1 : 0, e);
  const exponent = Number(literal.slice(e + 1));
  const point = mantissa.indexOf(".");
  const digits = mantissa.replace(".", "");
  const pointAt = (point < 0 ? mantissa.length : point) + exponent;
  let text: string;
  if (pointAt <= 0) text = `0.${"0".repeat(-pointAt)}${digits}`;
  else if (pointAt >= digits.length) text = digits + "0".repeat(pointAt - digits.length);
  else text = `${digits.slice(0, pointAt)}.${digits.slice(pointAt)}`;
  return negative ? `-${text}` : text;
}
