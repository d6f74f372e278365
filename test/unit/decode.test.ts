// Decoders against real fixtures: every truncated prefix of a valid body is a clean refusal, never
// an exception; and many record definitions in one body decode.
import { expect, test } from "bun:test";
import { Packr } from "msgpackr";
import { decodeBody } from "../../src/codec/decode";
import { parseContentType } from "../../src/ingest/content-type";
import { encodeEvents } from "../../src/codec/encode";
import { AppError } from "../../src/errors";
import { eventMicros, microsText } from "../../src/codec/time";
import { fieldsOf, fromText, idOf, setIds, toText, tuplesOf } from "../../src/codec/tuples";
import { unbounded } from "../../src/codec/reception";

const events = [
  { message: "hello", level: "info", nested: { n: 1, list: [1, 2.5, "x", null, true] }, dt: "2026-11-21T12:30:41Z" },
  { message: "ünïcödé 😀", big: 12345678901234567890n, bin: Buffer.from([1, 2, 3]), at: new Date(0) },
];
const limits = { maxEventBytes: 1 << 20, maxDepth: 64 };

function outcome(body: Buffer, format: "json" | "msgpack" | "ndjson") {
  const decoded = decodeBody(body, format);
  if (decoded instanceof AppError) return decoded;
  return encodeEvents(decoded, format, 1, unbounded(eventMicros("2026-01-01T00:00:00.000Z")!), limits);
}

test("every truncated prefix of a valid JSON body is refused (406 reasons)", () => {
  const body = Buffer.from(JSON.stringify([events[0], { ...events[0], message: "two" }]));
  expect(outcome(body, "json")).not.toBeInstanceOf(AppError);
  for (let length = 0; length < body.length; length++) {
    const result = outcome(body.subarray(0, length), "json");
    expect(result).toBeInstanceOf(AppError);
    if (result instanceof AppError) expect(["body_empty", "body_undecodable", "not_an_event"]).toContain(result.reason);
  }
});

test.each([
  ["plain maps", new Packr({ useRecords: false })],
  ["records", new Packr({ useRecords: true })],
])("every truncated prefix of a valid MessagePack body (%s) is refused", (_label, packr) => {
  const body = Buffer.from(packr.pack(events));
  expect(outcome(body, "msgpack")).not.toBeInstanceOf(AppError);
  for (let length = 0; length < body.length; length++) {
    const result = outcome(body.subarray(0, length), "msgpack");
    // A prefix can be a complete smaller value (e.g. an empty array header); what matters is no throw,
    // and that nothing but a whole valid body is accepted as these events.
    if (!(result instanceof AppError)) expect(result.count).toBeLessThan(events.length);
  }
});

test("a body with many record definitions decodes to the same events", () => {
  // Each object has its own key set, so each one is a new record definition.
  const many = Array.from({ length: 256 }, (_, i) => ({ [`k${i}`]: i, [`j${i}`]: i }));
  const body = Buffer.from(new Packr({ useRecords: true }).pack(many));
  const decoded = decodeBody(body, "msgpack");
  expect(decoded).toEqual(many);
});

test("Content-Type parameters are ignored; unknown types are refused", () => {
  expect(parseContentType("application/json; charset=utf-8")).toBe("json");
  expect(parseContentType("Application/MsgPack")).toBe("msgpack");
  expect(parseContentType("application/x-ndjson")).toBe("ndjson");
  expect(parseContentType("text/plain")).toBeInstanceOf(AppError);
  expect(parseContentType(null)).toBeUndefined(); // told from the body (sniffFormat)
});

test("encoded rows are binary COPY tuples: one per event, the JSON text as JSON.stringify wrote it", () => {
  const event = { a: "tab\there", b: "back\\slash", c: "nl\n", d: "ünï 😀" };
  const result = encodeEvents(
    [event, { dt: "0001-01-01T00:00:00.000001Z" }, { dt: "9999-12-31T23:59:59.999999Z" }],
    "json",
    7,
    unbounded(eventMicros("2026-01-01T00:00:00.000Z")!),
    limits,
  );
  if (result instanceof AppError) throw new Error(result.message);
  const tuples = tuplesOf(result.rows);
  expect(tuples).toHaveLength(3);
  const fields = tuples.map(fieldsOf);
  expect(fields[0]).toEqual({ id: 0, sourceId: 7, dt: 820_540_800_000_000, raw: JSON.stringify(event) });
  expect(fields.map((f) => microsText(f.dt))).toEqual(["2026-01-01T00:00:00.000000Z", "0001-01-01T00:00:00.000001Z", "9999-12-31T23:59:59.999999Z"]);
  // The layout PostgreSQL reads: 4 fields, 8-byte id, source_id and dt, then jsonb's version byte.
  const first = Buffer.from(tuples[0]!);
  expect([first.readInt16BE(0), first.readInt32BE(2), first.readInt32BE(14), first.readInt32BE(26)]).toEqual([4, 8, 8, 8]);
  expect([first.readInt32BE(38), first[42]]).toEqual([Buffer.byteLength(JSON.stringify(event)) + 1, 1]);
  setIds(result.rows, 3, 2 ** 40);
  expect(tuples.map(idOf)).toEqual([2 ** 40, 2 ** 40 + 1, 2 ** 40 + 2]);
  expect(toText(tuples[0]!)).toBe(`${2 ** 40}\t7\t2026-01-01T00:00:00.000000Z\t{"a":"tab\\\\there","b":"back\\\\\\\\slash","c":"nl\\\\n","d":"ünï 😀"}\n`);
  expect(Buffer.from(fromText(toText(tuples[0]!), true))).toEqual(Buffer.from(tuples[0]!));
});

test("msgpackr's bundled strings (extension 0x62) are refused, 406, also where they would move the read position back for ever", () => {
  // A map {"": ""}, then fixext 4 0x62 stating a size of -4: read as values back to back, msgpackr jumped back to the extension again and again.
  const looping = Buffer.concat([Buffer.from([0x81, 0xa0, 0xa0, 0xd6, 0x62, 0xff, 0xff, 0xff, 0xfc]), new Packr({ useRecords: false }).pack({ a: 1 })]);
  const bundled = Buffer.from(new Packr({ useRecords: false, bundleStrings: true } as never).pack([{ message: "a".repeat(40) }, { message: "b".repeat(40) }]));
  expect(bundled.includes(Buffer.from([0x62]))).toBe(true);
  for (const body of [looping, bundled]) {
    const result = decodeBody(body, "msgpack");
    expect(result).toBeInstanceOf(AppError);
    expect((result as AppError).reason).toBe("body_undecodable");
    expect((result as AppError).message).toContain("extension 0x62 (msgpackr's bundleStrings) is not supported");
  }
});
