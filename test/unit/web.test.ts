// The page's pure helpers against the query language they stand beside: the words it marks are
// the searched text terms the parser finds (not field terms, not negated ones); a facet's term
// parses back to that field and value; a term added to a query with OR keeps the query's meaning;
// the sidebar offers fields with few values and skips identifiers; a histogram by= the page reads
// from its URL is a field path as the endpoint reads one.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { LEVEL_ALIASES, levelOf } from "../../src/query/levels";
import { parseQuery, type Node } from "../../src/query/parse";
import { FIELD_PATH, FIELD_PATH_MAX_CHARS } from "../../src/query/request";
import { levelsModule } from "../../src/web/routes";

// Plain browser modules (no types): loaded by path so tsc does not look for declarations.
const RowsModule = "../../src/web/rows.js";
const FieldsModule = "../../src/web/fields.js";
const { searchedWords, levelClass } = await import(RowsModule);
const { filterTerm, isFieldPath, topFields, withTerm } = await import(FieldsModule);

/** The text terms of a tree that an even number of NOTs stand over: what a match contains. */
function searched(node: Node | undefined, negated = false, out: string[] = []): string[] {
  if (!node) return out;
  if (node.kind === "text" && !negated && node.text !== "") out.push(node.text);
  if (node.kind === "not") searched(node.node, !negated, out);
  if (node.kind === "and" || node.kind === "or") for (const child of node.nodes) searched(child, negated, out);
  return [...new Set(out)];
}

test.each([
  "timeout",
  '"payment provider" timeout',
  "level:error timeout",
  "NOT debug info",
  "NOT NOT twice",
  "(a OR b) c",
  "NOT (a b) c",
  "NOT (a NOT b) c",
  "a AND NOT (b OR (c NOT d)) e",
  "http://example.com/x foo",
  '"say \\"hi\\"" back\\slash',
  "x=1 y",
  "status >= 500 slow",
  'msg:"disk full" full',
  "and_more or_else notable",
  "level = error AND (timeout OR refused)",
  "-debug timeout",
  "-(a b) c",
  "err* -warn*",
  "/time(out|d)/ disk",
  "msg:/a b/ full",
  'msg=~"(a|b) c" d',
  "n:>= 5 six",
  "/api/v1 x",
])("marked words of %s are the parser's searched text", (query) => {
  expect(searchedWords(query)).toEqual(searched(parseQuery(query)));
});

test.each([
  ["service", "billing"],
  ["http.status", 502],
  ["ok", true],
  ["msg", "disk full"],
  ["msg", 'say "hi"'],
  ["path", "C:\\temp"],
  ["call", "f(x)"],
  ["empty", ""],
  ["op", ">=5"],
  ["glob", "a*"],
  ["tilde", "~x"],
  ["slashes", "/x/"],
  ["dash", "-1"],
  ["equals", "=5"],
  ["lt", "<5"],
  ["colon", ":a"],
  ["bang", "!x"],
  ["single", "'a'"],
  ["backquote", "`a`"],
  ["fuzzy", "a~2"],
  ["boost", "x^2"],
  ["plus", "+x"],
  ["pipe", "|x"],
  ["level", "error,warn"],
  ["selector", '{app="x"}'],
])("a click on %s = %p adds a term that parses back to it", (path, value) => {
  for (const exclude of [false, true]) {
    const node = parseQuery(filterTerm(path, value, exclude));
    expect(node).toMatchObject({ kind: "field", path: path.split("."), op: exclude ? "!=" : "=", value: String(value) });
  }
});

test("a click on a level adds a term for its severity, which finds every name of it", () => {
  const rows = ["error", "ERROR", "err", 50, "warning", "audit"].map((level, i) => ({ id: String(i), level }));
  const [level] = topFields(rows);
  expect(level).toEqual({
    path: "level",
    present: 6,
    values: [
      { value: "error", n: 4 },
      { value: "audit", n: 1 },
      { value: "warn", n: 1 },
    ],
  });
  expect(parseQuery(filterTerm("level", "error"))).toEqual({ kind: "level", level: "error" });
  expect(parseQuery(filterTerm("level", "error", true))).toEqual({ kind: "not", node: { kind: "level", level: "error" } });
  expect(parseQuery(filterTerm("level", "audit"))).toMatchObject({ kind: "field", path: ["level"], op: "=", value: "audit" });
  expect(["ERR", "crit", "30", "Warning", "whatever"].map(levelClass)).toEqual(["error", "fatal", "info", "warn", "other"]);
});

test("the page's level table is the server's, served as a module that imports nothing", async () => {
  const text = await levelsModule();
  expect(text).not.toMatch(/^\s*import\b/m);
  const served = await import(`data:text/javascript;base64,${Buffer.from(text).toString("base64")}`);
  expect(served.LEVEL_ALIASES).toEqual(LEVEL_ALIASES);
  for (const alias of Object.values(LEVEL_ALIASES).flat()) expect(served.levelOf(alias.toUpperCase())).toBe(levelOf(alias));
});

test("a term added to a query with OR applies to the whole query", () => {
  expect(parseQuery(withTerm("a OR b", "x=1"))).toEqual(parseQuery("(a OR b) AND x=1"));
  expect(withTerm("", "x=1")).toBe("x=1");
  expect(withTerm("level:error ", "x=1")).toBe("level:error x=1");
});

test("the sidebar: fields with few values, preferred ones first, identifiers and free text left out", () => {
  const rows = Array.from({ length: 40 }, (_, i) => ({
    id: String(i),
    dt: "2026-11-24T00:00:00.000000Z",
    source_id: "1",
    message: `request ${i}`,
    request_id: `r-${i}`,
    duration_ms: i * 3,
    level: i % 4 === 0 ? "error" : "info",
    service: ["a", "b"][i % 2],
    http: { status: i % 5 === 0 ? 500 : 200, path: `/p/${i}` },
    region: "eu-1",
    tags: ["x"],
  }));
  const fields = topFields(rows);
  expect(fields.map((f: { path: string }) => f.path)).toEqual(["level", "service", "http.status", "region"]);
  expect(fields[0]).toEqual({
    path: "level",
    present: 40,
    values: [
      { value: "info", n: 30 },
      { value: "error", n: 10 },
    ],
  });
  expect(fields[2].values).toEqual([
    { value: 200, n: 32 },
    { value: 500, n: 8 },
  ]);
});

test("marked words agree with the parser on random queries (seeded)", () => {
  const piece = fc.constantFrom(
    "a",
    "Bb",
    "c-1",
    "NOT",
    "not",
    "AND",
    "OR",
    "(",
    ")",
    '"x y"',
    '"q\\"t"',
    "lvl:err",
    "n>=5",
    "k=v",
    "f != g",
    "http://h",
    "-",
    "-a",
    "-(",
    "er*",
    "/r e/",
    "/p",
    "q/",
    "m:/x y/",
    'm=~"a b"',
    "m!~b",
    "n:>= 5",
    "x:*",
    "x:pre*",
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
      const query = pieces.join(" ");
      let tree: Node | undefined;
      try {
        tree = parseQuery(query);
      } catch {
        return; // only queries the API accepts are marked
      }
      expect(searchedWords(query)).toEqual(searched(tree));
    }),
    { seed: 20261124, numRuns: 2000 },
  );
});

test("a histogram by= the page takes from its URL is one the histogram endpoint takes (seeded)", () => {
  expect(["service", "http.status", "@timestamp", "k8s.pod-name", "x".repeat(FIELD_PATH_MAX_CHARS)].map(isFieldPath)).toEqual([true, true, true, true, true]);
  expect(["", "http..status", ".a", "a.", "a b", "-a", "x".repeat(FIELD_PATH_MAX_CHARS + 1), undefined].map(isFieldPath)).toEqual(Array(8).fill(false));
  const char = fc.constantFrom("a", "Z", "0", "_", "@", "$", "-", ".", " ", "é", ":", "/");
  fc.assert(
    fc.property(fc.array(char, { maxLength: 12 }), fc.boolean(), (chars, long) => {
      const path = chars.join("") + (long ? "x".repeat(FIELD_PATH_MAX_CHARS - 4) : "");
      expect(isFieldPath(path)).toBe(path.length <= FIELD_PATH_MAX_CHARS && FIELD_PATH.test(path));
    }),
    { seed: 20261128, numRuns: 3000 },
  );
});
