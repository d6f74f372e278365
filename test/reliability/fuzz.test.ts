// Seeded property tests (fast-check) over decode + normalise, ending in a real PostgreSQL:
//   1. random JSON events (lone surrogates, NUL, `__proto__` keys, number texts a double can't hold)
//   2. random MessagePack events (every value type msgpackr writes: binary, timestamps, 64-bit
//      integers, NaN/±Infinity, Maps with integer keys, undefined; plain maps and records)
//   3. random bytes as JSON, NDJSON and MessagePack
//   4. random mutations (flips, cuts, insertions) of valid bodies
// Nothing may escape as an exception; every accepted event must COPY into PostgreSQL without an
// error and, for 1 and 2, read back as docs/api.md ("What is stored") specifies. FUZZ_RUNS (default 10,000, split
// over the four) and FUZZ_SEED replay a run; the seed is printed first, so even a hang can be replayed.
import { afterAll, expect, test } from "bun:test";
import fc from "fast-check";
import { Packr } from "msgpackr";
import postgres from "postgres";
import { decodeBody } from "../../src/codec/decode";
import type { Format } from "../../src/codec/format";
import { encodeEvents } from "../../src/codec/encode";
import { MAX_NUMERIC_DIGITS } from "../../src/codec/numbers";
import { AppError } from "../../src/errors";
import { openFlushConnection } from "../../src/store/copy";
import { toText, tupleCount, tuplesOf } from "../../src/codec/tuples";
import { eventMicros, microsOfMillis, microsText } from "../../src/codec/time";
import { unbounded } from "../../src/codec/reception";

const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
console.log(`fuzz: seed ${SEED}, ${RUNS} cases; replay with FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}`);

const LIMITS = { maxEventBytes: 1 << 20, maxDepth: 64 };
const BASE_SOURCE = 1_500_000_000;
const url = process.env.LOGPOND_TEST_DATABASE_URL!;
const sql = postgres(url, { max: 1, onnotice: () => {} });
afterAll(async () => {
  await sql`delete from log_hot where source_id >= ${BASE_SOURCE}`;
  await sql`delete from log_chunks where source_id >= ${BASE_SOURCE}`;
  await sql`delete from log_blocks where source_id >= ${BASE_SOURCE}`;
  await sql.end({ timeout: 5 });
});

interface Accepted {
  label: string;
  sourceId: number;
  rows: Uint8Array;
  count: number;
  /** What PostgreSQL must give back, event by event (ordered by their "#" field); undefined: don't check. */
  expected?: unknown[];
}
const accepted: Accepted[] = [];
let caseNo = 0;

/** Decode + encode one body; throws only for a property violation. */
function feed(label: string, body: Uint8Array, format: Format, expected?: unknown[]): void {
  const sourceId = BASE_SOURCE + caseNo++;
  const decoded = decodeBody(Buffer.from(body), format);
  if (decoded instanceof AppError) {
    if (expected) throw new Error(`a valid ${label} body was refused: ${decoded.message}`);
    return;
  }
  const encoded = encodeEvents(decoded, format, sourceId, unbounded(microsOfMillis(Date.now())), LIMITS);
  if (encoded instanceof AppError) {
    if (expected) throw new Error(`a valid ${label} body was refused: ${encoded.message}`);
    return;
  }
  if (tupleCount(encoded.rows) !== encoded.count) throw new Error(`${label}: ${encoded.count} events but other than that many COPY tuples`);
  if (expected && encoded.count !== expected.length) throw new Error(`${label}: ${expected.length} events sent, ${encoded.count} encoded`);
  if (encoded.count > 0) accepted.push({ label, sourceId, rows: Buffer.from(encoded.rows), count: encoded.count, expected });
}

// ---- the value model: a tree that says how it is sent and what must come back ----------------

/** A JSON number written as this exact text. */
class NumberText {
  constructor(readonly text: string) {}
}
type Tree =
  | null
  | boolean
  | number
  | string
  | bigint
  | NumberText
  | Uint8Array
  | Date
  | undefined
  | { intMap: [number, Tree][] }
  | { fields: [string, Tree][] }
  | Tree[];

const isEntries = (t: unknown): t is { fields: [string, Tree][] } => typeof t === "object" && t !== null && "fields" in t;
const isIntMap = (t: unknown): t is { intMap: [number, Tree][] } => typeof t === "object" && t !== null && "intMap" in t;

/** What jsonb must hold for a string: NUL and lone surrogates become U+FFFD. */
const cleanString = (s: string) => s.toWellFormed().replaceAll("\0", "\uFFFD");

/**
 * What PostgreSQL must hold for a sent value. `records`: inside msgpackr records a `__proto__`
 * key arrives as `__proto_` (msgpackr's own guard; docs/ingestion.md, "Normalisations").
 */
function expectedOf(tree: Tree, records = false): unknown {
  if (tree === undefined || tree === null) return null;
  if (typeof tree === "string") return cleanString(tree);
  if (typeof tree === "number") return Number.isNaN(tree) ? "NaN" : tree === Infinity ? "Infinity" : tree === -Infinity ? "-Infinity" : tree;
  if (typeof tree === "bigint" || typeof tree === "boolean") return tree;
  if (tree instanceof NumberText) return expectedNumberText(tree.text);
  if (tree instanceof Uint8Array) return Buffer.from(tree).toString("base64");
  if (tree instanceof Date) return tree.toISOString();
  if (Array.isArray(tree)) return tree.map((item) => expectedOf(item, records));
  // As a decoder builds it (a repeated key keeps its first place and its last value; integer-like
  // keys come first), then with keys cleaned: two keys cleaned alike keep the later one, as jsonb does.
  const decoded: Record<string, unknown> = {};
  const pairs: [string, Tree][] = isIntMap(tree) ? tree.intMap.map(([k, v]) => [String(k), v]) : tree.fields;
  for (const [key, value] of pairs) define(decoded, records && !isIntMap(tree) && key === "__proto__" ? "__proto_" : key, expectedOf(value, records));
  const object: Record<string, unknown> = {};
  for (const key of Object.keys(decoded)) define(object, cleanString(key), decoded[key]);
  return object;
}

function define(object: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(object, key, { value, enumerable: true, configurable: true, writable: true });
}

/** docs/api.md ("What is stored"): integers exact; numbers a double can't hold at all → their text as a string. */
function expectedNumberText(text: string): unknown {
  if (/^-?\d+$/.test(text)) return text.length <= MAX_NUMERIC_DIGITS ? BigInt(text) : text;
  const value = Number(text);
  if (!Number.isFinite(value) || (value === 0 && /[1-9]/.test(text.split(/[eE]/)[0]!))) return text;
  return value;
}

function jsonText(tree: Tree): string {
  if (tree instanceof NumberText) return tree.text;
  if (typeof tree === "bigint") return tree.toString();
  if (Array.isArray(tree)) return `[${tree.map(jsonText).join(",")}]`;
  if (isEntries(tree)) return `{${tree.fields.map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`).join(",")}}`;
  return JSON.stringify(tree);
}

function msgpackValue(tree: Tree): unknown {
  if (Array.isArray(tree)) return tree.map(msgpackValue);
  if (isIntMap(tree)) return new Map(tree.intMap.map(([k, v]) => [k, msgpackValue(v)]));
  if (isEntries(tree)) {
    const object: Record<string, unknown> = {};
    for (const [key, value] of tree.fields) define(object, key, msgpackValue(value));
    return object;
  }
  return tree;
}

// ---- generators -----------------------------------------------------------------------------

const anyUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
const jsonString = fc.oneof(fc.string(), fc.string({ unit: anyUnit, maxLength: 12 }), fc.constantFrom("\0", "\ud800", "\udc00x", "a\\u0000", "\\", '"'));
const wellFormedString = fc.oneof(fc.string(), fc.string({ unit: "binary", maxLength: 12 }), fc.constantFrom("\0", "\\", "\\u0000", "\t\n\r"));
const keyOf = (strings: fc.Arbitrary<string>, proto: boolean) =>
  fc.oneof(strings, fc.constantFrom("dt", "message", "constructor", "toString", "", ...(proto ? ["__proto__"] : [])));
const numberText = fc.oneof(
  fc.tuple(fc.constantFrom("", "-"), fc.integer({ min: 1, max: 9 }), fc.stringMatching(/^\d{0,30}$/)).map(([s, d, rest]) => new NumberText(`${s}${d}${rest}`)),
  fc
    .tuple(
      fc.constantFrom("", "-"),
      fc.stringMatching(/^[1-9]\d{0,3}(\.\d{1,5})?$/),
      fc.constantFrom("e", "E"),
      fc.constantFrom("", "+", "-"),
      fc.integer({ min: 0, max: 1200 }),
    )
    .map(([s, m, e, sign, x]) => new NumberText(`${s}${m}${e}${sign}${x}`)),
  fc.constantFrom(new NumberText("0e999"), new NumberText("-0"), new NumberText("0.0e-500"), new NumberText("1e131072"), new NumberText("1e-16384")),
);
const dtValue = fc.oneof(
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  fc.double({ noNaN: true, noDefaultInfinity: true }), // JSON can't carry the others (MessagePack leaves can)
  fc.integer(),
  fc.constantFrom("2026-11-22 10:00:00+01", "1e300", "-62135596800", "99999999999999999999", "now"),
);

function events(leaf: fc.Arbitrary<Tree>, key: fc.Arbitrary<string>, withIntMaps: boolean) {
  const { tree } = fc.letrec<{ tree: Tree }>((tie) => ({
    tree: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      leaf,
      fc.array(tie("tree"), { maxLength: 4 }),
      fc.array(fc.tuple(key, tie("tree")), { maxLength: 5 }).map((fields) => ({ fields })),
      ...(withIntMaps
        ? [fc.array(fc.tuple(fc.integer({ min: -5, max: 1_000_000 }), tie("tree")), { maxLength: 4 }).map((pairs) => ({ intMap: uniqueKeys(pairs) }))]
        : []),
    ),
  }));
  const event = fc.tuple(fc.array(fc.tuple(key, tree), { maxLength: 6 }), fc.option(dtValue, { freq: 3 })).map(([entries, dt]) => {
    const kept = entries.filter(([k]) => k !== "#" && k !== "dt");
    return dt === null ? kept : [...kept, ["dt", dt] as [string, Tree]];
  });
  return fc.array(event, { minLength: 1, maxLength: 5 }).map((list) => list.map((fields, i) => ({ fields: [["#", i] as [string, Tree], ...fields] })));
}

function uniqueKeys(map: [number, Tree][]): [number, Tree][] {
  return [...new Map(map).entries()];
}

const jsonLeaf: fc.Arbitrary<Tree> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
  numberText,
  jsonString,
);
const msgpackLeaf: fc.Arbitrary<Tree> = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.boolean(),
  fc.double(),
  fc.integer(),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
  wellFormedString,
  fc.uint8Array({ maxLength: 24 }),
  fc.date({ noInvalidDate: true }),
);

const jsonEvents = events(jsonLeaf, keyOf(jsonString, true), false);
const msgpackEvents = (records: boolean) => events(msgpackLeaf, keyOf(wellFormedString, !records), true);
const plainPackr = new Packr({ useRecords: false, structuredClone: false });
const recordPackr = new Packr({ useRecords: true, structuredClone: false });

/** Per-test time limit: generous per case, so FUZZ_RUNS=200000 has room too. */
const TIME_LIMIT_MS = Math.max(30_000, RUNS * 3);
const share = (part: number) => ({
  seed: SEED + part,
  numRuns: Math.max(1, Math.round(RUNS * [0.3, 0.3, 0.2, 0.2][part]!)),
  endOnFailure: true,
  includeErrorInReport: true,
});

test(
  "JSON and NDJSON events decode, normalise and encode as specified",
  () => {
    fc.assert(
      fc.property(jsonEvents, fc.boolean(), (list, ndjson) => {
        const expected = list.map((event) => expectedOf(event));
        const text = ndjson ? list.map(jsonText).join("\n") : jsonText(list);
        feed(ndjson ? "NDJSON" : "JSON", Buffer.from(text), ndjson ? "ndjson" : "json", expected);
      }),
      share(0),
    );
  },
  TIME_LIMIT_MS,
);

test(
  "MessagePack events (plain maps and records) decode, normalise and encode as specified",
  () => {
    fc.assert(
      fc.property(
        fc.boolean().chain((records) => fc.tuple(fc.constant(records), msgpackEvents(records))),
        ([records, list]) => {
          const packed = (records ? recordPackr : plainPackr).pack(list.map(msgpackValue));
          feed(
            records ? "msgpackr records" : "MessagePack",
            packed,
            "msgpack",
            list.map((event) => expectedOf(event, records)),
          );
        },
      ),
      share(1),
    );
  },
  TIME_LIMIT_MS,
);

test(
  "random bytes never escape as an exception",
  () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.constantFrom<Format>("json", "ndjson", "msgpack"), (bytes, format) => {
        feed(`random ${format}`, bytes, format);
      }),
      share(2),
    );
  },
  TIME_LIMIT_MS,
);

test(
  "mutated valid bodies never escape as an exception",
  () => {
    const body = fc.oneof(
      jsonEvents.map((list) => ({ format: "json" as Format, bytes: Buffer.from(jsonText(list)) })),
      msgpackEvents(false).map((list) => ({ format: "msgpack" as Format, bytes: plainPackr.pack(list.map(msgpackValue)) })),
      msgpackEvents(true).map((list) => ({ format: "msgpack" as Format, bytes: recordPackr.pack(list.map(msgpackValue)) })),
    );
    const mutation = fc.tuple(fc.constantFrom("flip", "cut", "insert", "drop"), fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 0, max: 255 }));
    fc.assert(
      fc.property(body, fc.array(mutation, { minLength: 1, maxLength: 4 }), ({ format, bytes }, mutations) => {
        let out = Buffer.from(bytes);
        for (const [kind, where, byte] of mutations) {
          const at = Math.min(out.length, Math.floor(where * out.length));
          if (kind === "flip" && at < out.length) out[at] = byte;
          else if (kind === "cut") out = out.subarray(0, at);
          else if (kind === "insert") out = Buffer.concat([out.subarray(0, at), Buffer.from([byte]), out.subarray(at)]);
          else out = Buffer.concat([out.subarray(0, at), out.subarray(at + 1)]);
        }
        feed(`mutated ${format}`, out, format);
      }),
      share(3),
    );
  },
  TIME_LIMIT_MS,
);

// Both hot tiers: as jsonb rows (PostgreSQL's COPY checks each event) and as chunks (PostgreSQL
// stores bytes, and each event's text becomes jsonb only when log_events reads it: what the encoder
// accepts must never fail there, or a read of its time range would).
test.each(["rows", "chunks"] as const)(
  "every accepted event is stored by COPY without an error and reads back as specified (HOT_TIER=%s)",
  async (hotTier) => {
    expect(accepted.length).toBeGreaterThan(RUNS / 2);
    await sql`delete from log_hot where source_id >= ${BASE_SOURCE}`;
    await sql`delete from log_chunks where source_id >= ${BASE_SOURCE}`;
    const connection = openFlushConnection(url, 60_000, hotTier);
    try {
      // Batches of cases; a refused batch is halved until the case PostgreSQL refuses is named.
      const write = async (cases: Accepted[]): Promise<void> => {
        try {
          await connection.write(
            crypto.randomUUID(),
            cases.map((c) => c.rows),
          );
        } catch (error) {
          if (cases.length === 1)
            throw new Error(
              `PostgreSQL refused case ${cases[0]!.label} (seed ${SEED}): ${(error as Error).message}\n${tuplesOf(cases[0]!.rows).map(toText).join("").slice(0, 2000)}`,
            );
          const middle = cases.length >>> 1;
          await write(cases.slice(0, middle));
          await write(cases.slice(middle));
        }
      };
      for (let i = 0; i < accepted.length; i += 500) await write(accepted.slice(i, i + 500));
    } finally {
      await connection.close();
    }

    // dt as text: postgres.js reads a timestamptz through Date's parser, which refuses years 1–99.
    const rows = await sql<{ source_id: string; text: string; dt: string }[]>`
    select source_id, raw::text as text, to_char(dt at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as dt from log_events where source_id >= ${BASE_SOURCE}`;
    const bySource = new Map<number, unknown[]>();
    for (const row of rows) {
      expect(microsText(eventMicros(row.dt)!)).toBe(row.dt); // a time in range, in the form the API shows
      const list = bySource.get(Number(row.source_id)) ?? [];
      list.push(JSON.parse(row.text, (_key, value, context?: { source?: string }) => (typeof value === "number" ? new NumberText(context!.source!) : value)));
      bySource.set(Number(row.source_id), list);
    }
    let checked = 0;
    for (const c of accepted) {
      const stored = bySource.get(c.sourceId) ?? [];
      if (stored.length !== c.count) throw new Error(`case ${c.label}: ${c.count} events encoded, ${stored.length} stored (seed ${SEED})`);
      if (!c.expected) continue;
      const order = (event: any) => Number((event["#"] as NumberText).text);
      stored.sort((a, b) => order(a) - order(b));
      for (let i = 0; i < stored.length; i++) {
        const problem = difference(stored[i], c.expected[i], "");
        if (problem)
          throw new Error(
            `case ${c.label} event ${i}: ${problem} (seed ${SEED})\nstored:   ${rows.find((r) => Number(r.source_id) === c.sourceId)?.text.slice(0, 500)}`,
          );
        checked++;
      }
    }
    console.log(
      `fuzz (${hotTier}): ${caseNo} cases, ${accepted.length} bodies accepted, ${rows.length} events stored, ${checked} compared with the specification`,
    );
  },
  TIME_LIMIT_MS * 2,
);

/** Where a stored value (numbers as their text) differs from the expected one; "" when equal. */
function difference(stored: unknown, expected: unknown, at: string): string {
  if (stored instanceof NumberText) {
    if (typeof expected === "bigint") return BigInt(stored.text) === expected ? "" : `${at}: ${stored.text} ≠ ${expected}`;
    if (typeof expected === "number") return Number(stored.text) === expected ? "" : `${at}: ${stored.text} ≠ ${expected}`;
    return `${at}: number ${stored.text} where ${JSON.stringify(expected)} was expected`;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(stored) || stored.length !== expected.length)
      return `${at}: ${JSON.stringify(stored)?.slice(0, 80)} is not an array of ${expected.length}`;
    for (let i = 0; i < expected.length; i++) {
      const problem = difference(stored[i], expected[i], `${at}[${i}]`);
      if (problem) return problem;
    }
    return "";
  }
  if (typeof expected === "object" && expected !== null) {
    if (typeof stored !== "object" || stored === null || Array.isArray(stored)) return `${at}: not an object`;
    const keys = Object.keys(expected).sort();
    const storedKeys = Object.keys(stored).sort();
    if (JSON.stringify(keys) !== JSON.stringify(storedKeys)) return `${at}: keys ${JSON.stringify(storedKeys)} ≠ ${JSON.stringify(keys)}`;
    for (const key of keys) {
      const problem = difference((stored as Record<string, unknown>)[key], (expected as Record<string, unknown>)[key], `${at}.${key}`);
      if (problem) return problem;
    }
    return "";
  }
  return stored === expected ? "" : `${at}: ${JSON.stringify(stored)} ≠ ${JSON.stringify(expected)}`;
}
