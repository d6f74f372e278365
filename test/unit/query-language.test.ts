// The query language's forms beyond words and field operators: `-` as NOT, `*` as a prefix or
// "exists", comparisons after `:`, patterns (`/re/`, `=~`, `!~`, `field:/re/`), level names
// through the one table (query/levels.ts); and every input that once parsed into a search for its
// own characters (matching nothing) is now a 400 naming what to write instead. PostgreSQL's and
// the live matcher's agreement on all of them: test/integration/query-language.test.ts.
import { describe, expect, test } from "bun:test";
import { LEVEL_ALIASES, LEVELS, foldLevel, levelOf } from "../../src/query/levels";
import { parseQuery, QueryError } from "../../src/query/parse";

const shape = (query: string) => JSON.parse(JSON.stringify(parseQuery(query) ?? null));
const not = (node: unknown) => ({ kind: "not", node });

describe("new forms", () => {
  test.each([
    ["-debug", not({ kind: "text", text: "debug" })],
    ['-"disk full"', not({ kind: "text", text: "disk full" })],
    ["-level:info", not({ kind: "level", level: "info" })],
    ["-msg:x", not({ kind: "field", path: ["msg"], op: ":", value: "x" })],
    [
      "-(a b)",
      not({
        kind: "and",
        nodes: [
          { kind: "text", text: "a" },
          { kind: "text", text: "b" },
        ],
      }),
    ],
    ["a -b", { kind: "and", nodes: [{ kind: "text", text: "a" }, not({ kind: "text", text: "b" })] }],
    ["foo-bar", { kind: "text", text: "foo-bar" }],
    // Only the top-level source_id is the request's: a nested one is the event's own field.
    ["labels.source_id:2", { kind: "field", path: ["labels", "source_id"], op: ":", value: "2", number: 2 }],
    ["x:-1", { kind: "field", path: ["x"], op: ":", value: "-1", number: -1 }],
    ["err*", { kind: "text", text: "err" }],
    ["msg:err*", { kind: "prefix", path: ["msg"], value: "err" }],
    ["level:err*", { kind: "prefix", path: ["level"], value: "err" }],
    ["msg!:err*", not({ kind: "prefix", path: ["msg"], value: "err" })],
    ['msg:"err*"', { kind: "field", path: ["msg"], op: ":", value: "err*" }],
    ['msg="a*"', { kind: "field", path: ["msg"], op: "=", value: "a*" }],
    ["trace_id:*", { kind: "exists", path: ["trace_id"] }],
    ["http.status:*", { kind: "exists", path: ["http", "status"] }],
    ["-trace_id:*", not({ kind: "exists", path: ["trace_id"] })],
    ["trace_id!:*", not({ kind: "exists", path: ["trace_id"] })],
    ["http.status:>=500", { kind: "field", path: ["http", "status"], op: ">=", value: "500", number: 500 }],
    ["n:<-1.5", { kind: "field", path: ["n"], op: "<", value: "-1.5", number: -1.5 }],
    ["n:> 3", { kind: "field", path: ["n"], op: ">", value: "3", number: 3 }],
    ["n:<=2", { kind: "field", path: ["n"], op: "<=", value: "2", number: 2 }],
    ['n:">=2"', { kind: "field", path: ["n"], op: ":", value: ">=2" }],
    ["/timeout/", { kind: "regex", pattern: "timeout" }],
    [
      "/disk (full|gone)/ x",
      {
        kind: "and",
        nodes: [
          { kind: "regex", pattern: "disk (full|gone)" },
          { kind: "text", text: "x" },
        ],
      },
    ],
    ["/a\\/b/", { kind: "regex", pattern: "a/b" }],
    ["/a\\.b/", { kind: "regex", pattern: "a\\.b" }],
    ["(/x/)", { kind: "regex", pattern: "x" }],
    ["-/x/", not({ kind: "regex", pattern: "x" })],
    ["/api/v1", { kind: "text", text: "/api/v1" }],
    ["/api/v1/", { kind: "text", text: "/api/v1/" }],
    ["/tmp", { kind: "text", text: "/tmp" }],
    ['"/x/"', { kind: "text", text: "/x/" }],
    ["message:/timeout/", { kind: "regex", path: ["message"], pattern: "timeout" }],
    ["message!:/timeout/", not({ kind: "regex", path: ["message"], pattern: "timeout" })],
    ["path:/api/v1", { kind: "field", path: ["path"], op: ":", value: "/api/v1" }],
    ['msg=~"^time(out)?$"', { kind: "regex", path: ["msg"], pattern: "^time(out)?$" }],
    ["msg=~^err", { kind: "regex", path: ["msg"], pattern: "^err" }],
    ['msg!~"x"', not({ kind: "regex", path: ["msg"], pattern: "x" })],
    ['msg =~ "a b"', { kind: "regex", path: ["msg"], pattern: "a b" }],
    // In quotes, \" and \\ are read as in a phrase and any other backslash is kept: "\d" and "\\d" are both \d.
    ['msg=~"\\d+"', { kind: "regex", path: ["msg"], pattern: "\\d+" }],
    ['msg=~"\\\\d+"', { kind: "regex", path: ["msg"], pattern: "\\d+" }],
    ['msg=~"say \\"hi\\""', { kind: "regex", path: ["msg"], pattern: 'say "hi"' }],
    ['msg=~"a\\\\\\\\b"', { kind: "regex", path: ["msg"], pattern: "a\\\\b" }],
    ["level:error", { kind: "level", level: "error" }],
    ["level:ERR", { kind: "level", level: "error" }],
    ["level=50", { kind: "level", level: "error" }],
    ['level:"Warning"', { kind: "level", level: "warn" }],
    ["level!=info", not({ kind: "level", level: "info" })],
    ["level:crit", { kind: "level", level: "fatal" }],
    ["level:audit", { kind: "field", path: ["level"], op: ":", value: "audit" }],
    ["log.level:error", { kind: "field", path: ["log", "level"], op: ":", value: "error" }],
  ])("%p", (query, expected) => {
    expect(shape(query)).toEqual(expected);
  });
});

describe("refusals: what was not understood, and what to write", () => {
  test.each([
    ["_exists_:err", 1, "write err:* for events with the field"],
    ["_missing_:err", 1, "write -err:* for events without the field"],
    ["x:[500 TO 599]", 3, "write x>=1 x<=5"],
    ["x:{1 TO 2}", 3, "ranges"],
    ["x:~err", 3, 'write x=~"err"'],
    ["x:(a OR b)", 3, "write (x:a OR x:b)"],
    ["x=~(a|b)", 4, 'quote a pattern with parentheses or spaces (x=~"(a|b)")'],
    ["x=~/a/", 4, 'write the pattern without slashes (x=~"a") or as x:/a/'],
    ["x=err*", 6, "x:a* for a prefix and x:* for a field that exists"],
    ["x!=*", 4, "compares whole values"],
    ["x:a*b", 4, "only a trailing '*' is a wildcard"],
    ["a*b", 2, "only a trailing '*' is a wildcard"],
    ["*", 1, "a lone '*'"],
    ["x!:>=5", 4, "'!:' takes no comparison"],
    ["n:>=abc", 5, "needs a number"],
    ["- a", 1, "a '-' needs a term right after it"],
    ["a -", 3, "a '-' needs a term right after it"],
    ["(a -)", 4, "a '-' needs a term right after it"],
    ["--verbose", 1, "quote a term that starts with '-' (\"--verbose\")"],
    ["a && b", 3, "write AND"],
    ["a || b", 3, "write OR"],
    ["!error", 1, "write NOT error or -error"],
    ["//", 2, "the pattern is empty"],
    ["/a\\b/", 3, "regex: '\\b': word boundaries are not accepted"],
    ["/a\\b/", 3, "accepted: characters"],
    ["/(a/", 2, "regex: the group opened here is not closed"],
    ["/[[:digit:]]/", 3, "POSIX classes"],
    ["x:/(?=a)/", 4, "look-around"],
    ['msg=~"(a*)+"', 7, "can match nothing"],
    ['msg=~"ab\\\\1"', 10, "back-references"],
    ['msg=~"a{999}"', 8, "at most 255"],
    [`msg=~"${"a".repeat(300)}"`, 263, "at most 256 characters"],
    ['msg=~""', 7, "the pattern is empty"],
    // The sources are the request's, not a field of the events: once a search of a sent field the rows never show.
    ["source_id:2", 1, "choose sources with source_ids=2, not in the query"],
    ["error source_id=2", 7, "source_ids=2"],
    ["-source_id:2", 2, "source_ids="],
    ["(a OR source_id:*)", 7, "source_ids=12,13"],
    ["source_id:/2/", 1, "source_ids="],
    ['source_id=~"2"', 1, "source_ids="],
    ["source_id>=2", 1, "source_ids="],
    // An operator written twice or in another language's spelling once compared against a value
    // that starts with the second half (`==500` is the text "=500"): nothing, or everything for `!==`.
    ["http.status==500", 13, "'==' is not an operator: write http.status=500"],
    ["level!==info", 8, "'!==' is not an operator: write level!=info"],
    ["x:=5", 3, "':=' is not an operator: write x=5"],
    ["level::error", 7, "'::' is not an operator: write level:error"],
    ["x=:a", 3, "'=:' is not an operator: write x:a"],
    ["x=>500", 3, "'=>' is not an operator: write x>=500"],
    ["x=<500", 3, "'=<' is not an operator: write x<=500"],
    ["x!=>5", 4, "'!=>' is not an operator: write -x>=5"],
    ["x=!200", 3, "'=!' is not an operator: write x!=200"],
    ["x:!a", 3, "':!' is not an operator: write x!:a"],
    ["x!=~re", 4, "'!=~' is not an operator: write x!~\"re\""],
    ["x==", 3, "'==' is not an operator: write x=…"],
    ["x==5", 3, 'quote the value to search for its characters (x="=5")'],
    ["msg:a\u0000", 6, "a NUL character cannot be matched"],
    // Lucene's required '+', fuzzy '~', proximity '"…"~n' and boost '^n'; LogQL's selector and
    // pipes; a list of level names: each once a search for its own characters.
    ["+level:error", 1, "'+' is not an operator: every term is required already (write level:error)"],
    ["a +timeout", 3, "every term is required already (write timeout)"],
    ["timeout~2", 8, 'fuzzy searches (~), proximity ("a b"~3) and boosts (^2) are not taken'],
    ["level:error~", 12, "fuzzy searches (~)"],
    ["msg:disk^2", 9, "boosts (^2)"],
    ['"disk full"~3', 12, "proximity"],
    ['{app="api"} |= "timeout"', 1, 'a LogQL stream selector is not taken: write its labels as fields (labels.app="api")'],
    ['|= "timeout"', 1, "pipes ('|') are not taken: a query only filters events"],
    ["level=error | stats count", 13, "/api/v2/query/aggregate"],
    ["level:error,warn", 7, "one value per term: write (level:error OR level:warn)"],
    ["level=ERROR|WARN", 7, "write (level=ERROR OR level=WARN)"],
    // Single quotes and backquotes (SQL, SigNoz, LogQL) once became part of the value.
    ["level='error'", 7, 'write level="error"'],
    ["service = 'api'", 11, "single quotes and backquotes do not quote a value here"],
    ["msg:'disk full' x", 5, 'write msg:"disk full"'],
    ["msg:'disk", 5, 'write msg:"disk"; to search for the \' characters too'],
    ["msg=~'time.ut'", 6, 'write msg=~"time.ut"'],
    ["msg=~`time.ut`", 6, 'write msg=~"time.ut"'],
  ])("%p → 400 at position %p: %p", (query, position, message) => {
    let error: unknown;
    try {
      parseQuery(query);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(QueryError);
    expect((error as QueryError).message).toContain(message);
    expect((error as QueryError).position).toBe(position);
  });
});

describe("values that look like operators or quotes, taken as written", () => {
  test.each([
    ['x="=5"', { kind: "field", path: ["x"], op: "=", value: "=5", number: undefined }],
    ["image=<none>", { kind: "field", path: ["image"], op: "=", value: "<none>", number: undefined }],
    ["msg:don't", { kind: "field", path: ["msg"], op: ":", value: "don't", number: undefined }],
    [`msg:"'a'"`, { kind: "field", path: ["msg"], op: ":", value: "'a'", number: undefined }],
    ["x:/=a/", { kind: "regex", path: ["x"], pattern: "=a" }],
    ["'quoted'", { kind: "text", text: "'quoted'" }],
    ["+33", { kind: "text", text: "+33" }],
    ['"+level"', { kind: "text", text: "+level" }],
    ['msg:"a~2"', { kind: "field", path: ["msg"], op: ":", value: "a~2", number: undefined }],
    ["path:/home/~", { kind: "field", path: ["path"], op: ":", value: "/home/~", number: undefined }],
    ["msg=~ab~", { kind: "regex", path: ["msg"], pattern: "ab~" }],
    ["tags:a,b", { kind: "field", path: ["tags"], op: ":", value: "a,b", number: undefined }],
    ["level:audit,debug", { kind: "field", path: ["level"], op: ":", value: "audit,debug", number: undefined }],
    ["{json}", { kind: "text", text: "{json}" }],
  ])("%p", (query, tree) => {
    expect(shape(query)).toEqual(tree);
  });
});

describe("the table of level names", () => {
  test("every alias names one severity, and the names are themselves aliases", () => {
    const seen = new Map<string, string>();
    for (const level of LEVELS) {
      expect(LEVEL_ALIASES[level]).toContain(level);
      for (const alias of LEVEL_ALIASES[level]) {
        expect({ alias, twice: seen.get(alias) }).toEqual({ alias, twice: undefined });
        seen.set(alias, level);
        expect(alias).toBe(alias.toLowerCase());
        expect(levelOf(alias.toUpperCase())).toBe(level);
      }
    }
  });

  test.each([
    ["ERROR", "error"],
    ["err", "error"],
    ["50", "error"],
    ["Warning", "warn"],
    ["notice", "info"],
    ["CRITICAL", "fatal"],
    ["WARN3", "warn"],
    ["verbose", "trace"],
    ["audit", "audit"],
    ["AUDIT", "audit"],
    ["ÉRROR", "Érror"], // ASCII letters only, as the query language folds case
  ])("%p is counted as %p", (text, folded) => {
    expect(foldLevel(text)).toBe(folded);
  });
});
