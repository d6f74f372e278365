// Part of hop 2 (decode): decides whether a JSON text needs the exact-number parse (a reviver,
// 3–4× slower than JSON.parse). Invariant: true for every text with a number token that has 16+
// digits in a run or a 3+ digit exponent (every number a double may not carry); string contents
// never count. Pure; no I/O.

/** Runs that may belong to a number a double can't carry (two regexes: twice as fast as one with "|"). */
const LONG_DIGIT_RUN = /\d{16}/;
const LONG_EXPONENT = /[eE][+-]?\d{3}/;
/** One JSON string literal, escapes included (unrolled: no alternation per character). */
const STRING_LITERAL = /"[^"\\]*(?:\\.[^"\\]*)*"/g;

/**
 * Whether some number token of `text` may not survive as a double. Most texts have no candidate
 * run at all (two native regex tests). Texts that do are tested again with their string literals
 * cut out: ids like "req-0001e240", "node1234e100", hex trace ids or 20-digit order ids sent every
 * body of ordinary logs down the slow parse (issue 10: a quarter of the speed). Cutting strings
 * never removes a number token, so no number is missed; a string the pattern cannot cut (invalid
 * escape, unterminated) stays in and can only add candidates, and JSON.parse refuses such text.
 */
export function needsExactNumbers(text: string): boolean {
  if (!LONG_DIGIT_RUN.test(text) && !LONG_EXPONENT.test(text)) return false;
  const outside = text.replace(STRING_LITERAL, "");
  return LONG_DIGIT_RUN.test(outside) || LONG_EXPONENT.test(outside);
}
