// For decode.ts: decides whether a JSON text needs the exact-number parse (a reviver,
// 3–4× slower than JSON.parse). Invariant: never "no" for a text with a number a double can't
// carry (an integer beyond 2^53, an overflow, an underflow to 0); string contents never count.
// Pure; no I/O.

/**
 * PostgreSQL's numeric holds at most 131072 digits before the decimal point: an integer with more
 * is kept as the string of its digits (decode.ts for JSON, encode.ts for MessagePack's BigInt).
 */
export const MAX_NUMERIC_DIGITS = 131_072;

/** Runs that may belong to a number a double can't carry (two regexes: twice as fast as one with "|"). */
const LONG_DIGIT_RUN = /\d{16}/;
const LONG_EXPONENT = /[eE][+-]?\d{3}/;
/** One JSON string literal, escapes included (unrolled: no alternation per character). */
const STRING_LITERAL = /"[^"\\]*(?:\\.[^"\\]*)*"/g;

/** Whether the text has a 16-digit run or a 3-digit exponent anywhere, strings included. */
export function hasCandidate(text: string): boolean {
  return LONG_DIGIT_RUN.test(text) || LONG_EXPONENT.test(text);
}

/**
 * Whether some number token of `text` may not survive as a double. Most texts have no candidate
 * run at all (two native regex tests). Texts that do are tested again with their string literals
 * cut out: ids like "req-0001e240", "node1234e100", hex trace ids or 20-digit order ids sent every
 * body of ordinary logs down the slow parse (a quarter of the speed). Cutting strings
 * never removes a number token, so no number is missed; a string the pattern cannot cut (invalid
 * escape, unterminated) stays in and can only add candidates, and JSON.parse refuses such text.
 */
export function needsExactNumbers(text: string): boolean {
  if (!hasCandidate(text)) return false;
  const outside = text.replace(STRING_LITERAL, "");
  return LONG_DIGIT_RUN.test(outside) || LONG_EXPONENT.test(outside);
}

/**
 * Whether a value from a plain JSON.parse holds a number whose text may have meant something else:
 * an integer beyond 2^53 (maybe rounded), ±Infinity (overflow), or 0 (1e-400 underflows to 0).
 * Walks with its own stack: JSON.parse takes nesting deeper than the call stack would.
 * A walk of a parsed 100-event body costs a tenth of cutting the strings out of its text.
 */
export function holdsDoubtfulNumber(root: unknown): boolean {
  const stack: object[] = [];
  if (typeof root === "object" && root !== null) stack.push(root);
  else return typeof root === "number" && doubtful(root);
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v: unknown = node[i];
        if (typeof v === "number") {
          if (doubtful(v)) return true;
        } else if (typeof v === "object" && v !== null) stack.push(v);
      }
    } else {
      for (const key in node) {
        const v: unknown = (node as Record<string, unknown>)[key];
        if (typeof v === "number") {
          if (doubtful(v)) return true;
        } else if (typeof v === "object" && v !== null) stack.push(v);
      }
    }
  }
  return false;
}

function doubtful(n: number): boolean {
  return n === 0 || (!Number.isSafeInteger(n) && (Number.isInteger(n) || !Number.isFinite(n)));
}
