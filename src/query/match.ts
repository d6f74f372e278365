// Query tree → a predicate over a parsed event, for the live stream (rows that never leave memory).
// It must say exactly what query/sql.ts says in PostgreSQL, so it reproduces jsonb's text output
// (key order, spacing, numeric notation) and ILIKE's folding, which in the embedded database's C
// ctype lowers ASCII letters only. Checked against PostgreSQL on random events (test/integration/query-language.test.ts).
import { asciiLower } from "../codec/grams";
import { compileRegex } from "./automaton";
import { levelOf } from "./levels";
import type { Node } from "./parse";
import { parseRegex } from "./regex";
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
    case "prefix": {
      const { path } = node;
      const needle = asciiLower(node.value);
      return (event) => {
        const text = fieldText(lookup(event, path));
        return text !== undefined && asciiLower(text).startsWith(needle);
      };
    }
    case "exists": {
      const { path } = node;
      return (event) => fieldText(lookup(event, path)) !== undefined;
    }
    case "level": {
      const { level } = node;
      return (event) => {
        const text = fieldText(lookup(event, LEVEL_PATH));
        return text !== undefined && levelOf(text) === level;
      };
    }
    case "regex": {
      // Compiled once per query, never per event.
      const test = compileRegex(parseRegex(node.pattern));
      const { path } = node;
      if (path === undefined) return (event) => test(jsonbText(event));
      return (event) => {
        const text = fieldText(lookup(event, path));
        return text !== undefined && test(text);
      };
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
          // A query number a double holds exactly compares as a double; one it rounds (more than
          // 15 significant digits), or a stored number JSON.parse would have rounded (an exact
          // number, below), compares digit by digit as numeric does.
          const exact = number !== undefined && compareDecimal(numericText(number), value) === 0;
          const equal = (event: Record<string, unknown>) => {
            const found = lookup(event, path);
            if (typeof found === "number") return number !== undefined && (exact ? found === number : compareDecimal(numericText(found), value) === 0);
            if (isExactNumber(found)) return number !== undefined && compareDecimal(found.rawJSON, value) === 0;
            if (typeof found === "string") return found === value;
            if (typeof found === "boolean") return String(found) === value;
            return false;
          };
          return op === "=" ? equal : (event) => !equal(event);
        }
        default: {
          const limit = number!;
          const test = COMPARE[op];
          const exact = compareDecimal(numericText(limit), value) === 0;
          return (event) => {
            const found = lookup(event, path);
            if (typeof found === "number") return exact ? test(found, limit) : test(compareDecimal(numericText(found), value), 0);
            return isExactNumber(found) && test(compareDecimal(found.rawJSON, value), 0);
          };
        }
      }
    }
  }
}

const LEVEL_PATH = ["level"];

/** What `raw #>> path` gives for a found value: a string's own text, any other value's JSON text; undefined for missing or null. */
function fieldText(found: unknown): string | undefined {
  if (found === undefined || found === null) return undefined;
  return typeof found === "string" ? found : jsonbText(found);
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
    } else if (typeof current === "object" && current !== null && !isExactNumber(current) && Object.hasOwn(current, key)) {
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
  if (isExactNumber(value)) return value.rawJSON;
  if (Array.isArray(value)) return `[${value.map(jsonbText).join(", ")}]`;
  const keys = Object.keys(value).sort(jsonbKeyOrder);
  return `{${keys.map((key) => `${JSON.stringify(key)}: ${jsonbText((value as Record<string, unknown>)[key])}`).join(", ")}}`;
}

const ASCII_ONLY = /^[\x00-\x7f]*$/;

/**
 * jsonb keeps object keys shortest first, then by their UTF-8 bytes. Two ASCII keys compare as
 * strings do (one byte per character, in code order) without encoding them: the live stream prints
 * every event this way for a word or a /pattern/, and the encoding was most of its cost.
 */
function jsonbKeyOrder(a: string, b: string): number {
  if (ASCII_ONLY.test(a) && ASCII_ONLY.test(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  const left = Buffer.from(a),
    right = Buffer.from(b);
  return left.length - right.length || Buffer.compare(left, right);
}

/**
 * numeric's output for the literal JSON.stringify wrote: plain decimal, as many fraction digits as
 * the literal had after its exponent is applied (1e+21 → 1000000000000000000000, 1.5e-7 → 0.00000015).
 */
export function numericText(n: number): string {
  return plainDecimal(String(n));
}

/** A JSON number literal as numeric prints it: plain decimal, the exponent applied, -0 as 0. */
export function plainDecimal(literal: string): string {
  const e = literal.search(/[eE]/);
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

/**
 * A stored number that a double would round (an integer past 2^53, more than 15 significant
 * digits), kept as its text: JSON.parse with exactNumbers gives these in its place, and
 * JSON.stringify writes the text back as it was (JSON.rawJSON).
 */
export interface ExactNumber {
  readonly rawJSON: string;
}

const RawJSON = JSON as unknown as { rawJSON(text: string): ExactNumber; isRawJSON(value: unknown): boolean };

export function isExactNumber(value: unknown): value is ExactNumber {
  return typeof value === "object" && value !== null && RawJSON.isRawJSON(value);
}

/** A run of 16 digits: only a text with one can hold a number that a double rounds. */
const LONG_NUMBER = /[0-9]{16}/;

/** JSON.parse of a stored event, its numbers exact: those a double would round are ExactNumbers. */
export function parseExact(text: string): unknown {
  if (!LONG_NUMBER.test(text)) return JSON.parse(text);
  return JSON.parse(text, (_key, value, context?: { source?: string }) => {
    if (typeof value !== "number" || context?.source === undefined) return value;
    const exact = plainDecimal(context.source);
    return compareDecimal(numericText(value), exact) === 0 ? value : RawJSON.rawJSON(exact);
  });
}

/** Two plain decimals (-?digits(.digits)?, as numeric prints them and the query language takes them) compared exactly: <0, 0, >0. */
export function compareDecimal(a: string, b: string): number {
  const x = decimal(a),
    y = decimal(b);
  if (x.negative !== y.negative) return x.negative ? -1 : 1;
  const magnitude = x.int.length - y.int.length || (x.int < y.int ? -1 : x.int > y.int ? 1 : 0) || (x.frac < y.frac ? -1 : x.frac > y.frac ? 1 : 0);
  return x.negative ? -magnitude : magnitude;
}

function decimal(text: string): { negative: boolean; int: string; frac: string } {
  let negative = text.startsWith("-");
  const body = negative ? text.slice(1) : text;
  const point = body.indexOf(".");
  const int = (point < 0 ? body : body.slice(0, point)).replace(/^0+/, "");
  const frac = point < 0 ? "" : body.slice(point + 1).replace(/0+$/, "");
  if (int === "" && frac === "") negative = false; // -0 is 0
  return { negative, int, frac };
}
