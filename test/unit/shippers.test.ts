// The codec's side of the shippers' formats (no HTTP): Fluent Bit's entries and EventTime, values
// back to back in JSON and MessagePack, the event-time fallback to `timestamp` and `date`, the byte
// walk's count of values back to back against what the decoder builds, a missing Content-Type
// told from the body, and the snappy block's bounds.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { Packr } from "msgpackr";
import { compressSync } from "snappy";
import { walkBody, type CostLimits } from "../../src/codec/bounds";
import { decodeBody } from "../../src/codec/decode";
import { encodeEvents } from "../../src/codec/encode";
import { EventTime } from "../../src/codec/fluent";
import { splitJsonValues } from "../../src/codec/sequence";
import { fieldsOf, tuplesOf } from "../../src/codec/tuples";
import { eventMicros, microsText } from "../../src/codec/time";
import { parseContentType, sniffFormat } from "../../src/ingest/content-type";
import { snappyLength, unsnappy } from "../../src/ingest/snappy";
import { AppError } from "../../src/errors";
import { eventTime, hex, map, str, T0 } from "../fixtures/shippers/fixture";
import { literalSnappy } from "../fixtures/shippers/vector";
import { unbounded } from "../../src/codec/reception";

const RECEIVED = eventMicros("2000-01-01T00:00:00Z")!;
const limits = { maxEventBytes: 1 << 20, maxDepth: 64 };
const SNAPPY_MAX = 100 << 20; // INGEST_MAX_DECOMPRESSED_BYTES's default
const generous: CostLimits = { maxEvents: 1_000_000, maxDecompressedBytes: 1 << 30, maxDepth: 64, maxEventBytes: 1 << 20 };

/** Decoded and encoded as ingestion does: each stored event and its time. */
function stored(body: Buffer, format: "json" | "ndjson" | "msgpack"): { raw: unknown; dt: string }[] | string {
  const decoded = decodeBody(body, format);
  if (decoded instanceof AppError) return `${decoded.reason}: ${decoded.message}`;
  const encoded = encodeEvents(decoded, format, 1, unbounded(RECEIVED), limits);
  if (encoded instanceof AppError) return `${encoded.reason}: ${encoded.message}`;
  return tuplesOf(encoded.rows)
    .map(fieldsOf)
    .map((f) => ({ raw: JSON.parse(f.raw), dt: microsText(f.dt) }));
}
const RECEPTION = microsText(RECEIVED);

test("EventTime renders RFC 3339 with nine fraction digits; nanoseconds past a second carry", () => {
  expect(new EventTime(T0, 123456789).text()).toBe("2026-11-21T12:33:53.123456789Z");
  expect(new EventTime(T0, 0).text()).toBe("2026-11-21T12:33:53.000000000Z");
  expect(new EventTime(T0, 1_500_000_000).text()).toBe("2026-11-21T12:33:54.500000000Z");
});

test("one Fluent Bit entry alone (v2 and legacy) is one event; the record's own dt wins over the entry's time", () => {
  const v2 = Buffer.concat([hex("92 92"), eventTime(T0, 7000), hex("80"), map(["log", str("one")])]);
  expect(stored(v2, "msgpack")).toEqual([{ raw: { log: "one", dt: "2026-11-21T12:33:53.000007000Z" }, dt: "2026-11-21T12:33:53.000007Z" }]);
  const own = Buffer.concat([hex("92"), eventTime(T0, 0), map(["log", str("own")], ["dt", str("2020-01-01T00:00:00Z")])]);
  expect(stored(own, "msgpack")).toEqual([{ raw: { log: "own", dt: "2020-01-01T00:00:00Z" }, dt: "2020-01-01T00:00:00.000000Z" }]);
  // Integer and float seconds, as older senders write the time.
  const numbers = Buffer.concat([new Packr().pack([T0, { log: "int" }]), new Packr().pack([T0 + 0.25, { log: "float" }])]);
  expect(stored(numbers, "msgpack")).toEqual([
    { raw: { log: "int", dt: T0 }, dt: "2026-11-21T12:33:53.000000Z" },
    { raw: { log: "float", dt: T0 + 0.25 }, dt: "2026-11-21T12:33:53.250000Z" },
  ]);
});

test("an array of entries, and a record holding __proto__ (decoded as a Map), become events too", () => {
  const array = Buffer.concat([hex("92"), hex("92"), eventTime(T0, 0), map(["log", str("a")]), hex("92"), eventTime(T0 + 1, 0), map(["log", str("b")])]);
  expect(stored(array, "msgpack")).toEqual([
    { raw: { log: "a", dt: "2026-11-21T12:33:53.000000000Z" }, dt: "2026-11-21T12:33:53.000000Z" },
    { raw: { log: "b", dt: "2026-11-21T12:33:54.000000000Z" }, dt: "2026-11-21T12:33:54.000000Z" },
  ]);
  const proto = Buffer.concat([hex("92 92"), eventTime(T0, 0), map(["k", str("v")]), map(["__proto__", str("data")])]);
  const result = stored(proto, "msgpack") as { raw: Record<string, unknown> }[];
  expect(result).toHaveLength(1);
  const raw = result[0]!.raw;
  expect(Object.getOwnPropertyDescriptor(raw, "__proto__")?.value).toBe("data"); // plain data, not a prototype
  expect({ dt: raw.dt, internal: raw.__internal__, keys: Object.keys(raw).sort() }).toEqual({
    dt: "2026-11-21T12:33:53.000000000Z",
    internal: { log_metadata: { k: "v" } },
    keys: ["__internal__", "__proto__", "dt"],
  });
});

test("an EventTime inside a record is stored as its RFC 3339 text, and read as a dt", () => {
  const body = map(["seen", eventTime(T0, 5)], ["dt", eventTime(T0 + 1, 0)]);
  expect(stored(body, "msgpack")).toEqual([
    { raw: { seen: "2026-11-21T12:33:53.000000005Z", dt: "2026-11-21T12:33:54.000000000Z" }, dt: "2026-11-21T12:33:54.000000Z" },
  ]);
  // msgpackr's own undefined (fixext 1 of type 0) is still null.
  expect(stored(hex("81 a1 75 d4 00 00"), "msgpack")).toEqual([{ raw: { u: null }, dt: RECEPTION }]);
});

test("event time: dt, else the first of timestamp and date that reads as a time, else reception; the fields stay", () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ dt: "2026-01-01T00:00:00Z", timestamp: "2025-01-01T00:00:00Z", date: 1 }, "2026-01-01T00:00:00.000000Z"],
    [{ timestamp: "2025-01-01T00:00:00.5Z", date: 1795264433 }, "2025-01-01T00:00:00.500000Z"],
    [{ timestamp: "yesterday", date: 1795264433.5 }, "2026-11-21T12:33:53.500000Z"],
    [{ date: "2026-11-21 12:33:53.123456" }, "2026-11-21T12:33:53.123456Z"],
    [{ dt: "not a time", timestamp: "2025-01-01T00:00:00Z" }, RECEPTION], // dt present: its rule, no fallback
    [{ timestamp: null, date: {} }, RECEPTION],
  ];
  for (const [event, dt] of cases) {
    expect(stored(Buffer.from(JSON.stringify(event)), "json")).toEqual([{ raw: event, dt }]);
    expect(stored(Buffer.from(new Packr().pack(event)), "msgpack")).toEqual([{ raw: event, dt }]);
  }
});

test("JSON values back to back: split by brackets and quotes, never inside a string", () => {
  expect(splitJsonValues('{"a":"}{"}{"b":"\\"}"} [1,{"c":[]}] "s" 12 true')).toEqual(['{"a":"}{"}', '{"b":"\\"}"}', '[1,{"c":[]}]', '"s"', "12", "true"]);
  expect(splitJsonValues('  {"one":1}\n')).toBeUndefined();
  expect(splitJsonValues('{"cut":')).toBeUndefined();
  expect(splitJsonValues('{"a":1}{"cut":')).toEqual(['{"a":1}', '{"cut":']);
  expect(splitJsonValues('{"a":1},{"b":2}')).toEqual(['{"a":1}', ",", '{"b":2}']);
  expect(stored(Buffer.from('{"a":1},{"b":2}'), "json")).toMatch(/^body_undecodable: .*value 1 of 3/);
  expect(stored(Buffer.from('{"a":1} [{"b":2}]'), "json")).toMatch(/^not_an_event: event 1 /);
  // Exact numbers survive the sequence path too.
  expect(stored(Buffer.from('{"n":12345678901234567890}{"n":1}'), "json")).toEqual([
    { raw: { n: 12345678901234567890 }, dt: RECEPTION },
    { raw: { n: 1 }, dt: RECEPTION },
  ]);
});

test("MessagePack values back to back: a cut or garbage after the first value is refused, naming the value", () => {
  const two = Buffer.concat([map(["a", str("1")]), map(["b", str("2")])]);
  expect(stored(two, "msgpack")).toEqual([
    { raw: { a: "1" }, dt: RECEPTION },
    { raw: { b: "2" }, dt: RECEPTION },
  ]);
  expect(stored(two.subarray(0, two.length - 1), "msgpack")).toMatch(/^body_undecodable: .*value 1 \(at byte 5\)/);
  expect(stored(Buffer.concat([two, hex("d4 13 00")]), "msgpack")).toMatch(/^body_undecodable: .*value 2 .*Unknown extension/);
  expect(stored(Buffer.concat([two, hex("05")]), "msgpack")).toMatch(/^not_an_event: event 2 /);
});

const json = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, fc.string(), fc.integer(), fc.boolean(), fc.constant(null), tie("array"), tie("object")),
  array: fc.array(tie("value"), { maxLength: 4 }),
  object: fc.dictionary(fc.string({ maxLength: 6 }), tie("value"), { maxKeys: 4 }),
})) as unknown as { object: fc.Arbitrary<Record<string, unknown>> };

test("the byte walk counts values back to back as the decoder builds them (JSON, MessagePack, Fluent Bit entries)", () => {
  const packr = new Packr({ useRecords: false });
  fc.assert(
    fc.property(fc.array(json.object, { minLength: 2, maxLength: 12 }), fc.constantFrom("", "\n", " \r\n"), fc.boolean(), (events, gap, entries) => {
      const text = Buffer.from(events.map((e) => JSON.stringify(e)).join(gap));
      expect(walkBody(text, "json", generous)).toBe(events.length);
      expect((decodeBody(text, "json") as unknown[]).length).toBe(events.length);
      const values = entries
        ? events.map((e, i) => Buffer.concat([hex("92 92"), eventTime(T0 + i, 0), hex("80"), packr.pack(e)]))
        : events.map((e) => packr.pack(e));
      const body = Buffer.concat(values);
      expect(walkBody(body, "msgpack", generous)).toBe(events.length);
      expect((decodeBody(body, "msgpack") as unknown[]).length).toBe(events.length);
    }),
    { numRuns: 300 },
  );
});

test("the walk refuses values back to back past INGEST_MAX_EVENTS_PER_REQUEST before any is built", () => {
  const small: CostLimits = { maxEvents: 1000, maxDecompressedBytes: 1 << 30, maxDepth: 64, maxEventBytes: 1 << 20 };
  const reason = (body: Buffer, format: "json" | "msgpack") => {
    const walked = walkBody(body, format, small);
    return walked instanceof AppError ? `${walked.reason} ${walked.message}` : walked;
  };
  expect(reason(Buffer.alloc(1001, 0x80), "msgpack")).toMatch(/^too_many_events .*more than 1000/);
  expect(reason(Buffer.alloc(1000, 0x80), "msgpack")).toBe(1000);
  expect(reason(Buffer.from("{}".repeat(1001)), "json")).toMatch(/^too_many_events/);
  expect(reason(Buffer.from("1 ".repeat(1001)), "json")).toMatch(/^too_many_events/);
  expect(reason(Buffer.from('"x"'.repeat(1001)), "json")).toMatch(/^too_many_events/);
  const entry = Buffer.concat([hex("92 92"), eventTime(T0, 0), hex("80 80")]);
  expect(reason(Buffer.concat(Array(1001).fill(entry)), "msgpack")).toMatch(/^too_many_events/);
});

test("a missing Content-Type is told from the body's first byte, or refused naming what to send", () => {
  expect(parseContentType(null)).toBeUndefined();
  expect(parseContentType("  ")).toBeUndefined();
  expect(parseContentType("text/plain")).toBeInstanceOf(AppError);
  expect(sniffFormat(Buffer.from('{"a":1}'))).toBe("json");
  expect(sniffFormat(Buffer.from(' \n[{"a":1}]'))).toBe("json");
  expect(sniffFormat(Buffer.from('\uFEFF{"a":1}'))).toBe("json");
  for (const first of [0x80, 0x8f, 0x90, 0x9f, 0xdc, 0xdd, 0xde, 0xdf]) expect(sniffFormat(Buffer.from([first, 0]))).toBe("msgpack");
  for (const body of ["", "hello", "42", '"s"', "<xml/>"]) {
    const refused = sniffFormat(Buffer.from(body));
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).reason).toBe("unsupported_content_type");
    expect((refused as AppError).message).toMatch(/missing.*application\/json/);
  }
});

test("snappy: the stated length is read before decoding; every cut, a framed stream and a lying length are refused", () => {
  const data = Buffer.from(JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ message: `event ${i}`, level: "info" }))));
  for (const body of [compressSync(data), literalSnappy(data)]) {
    expect(snappyLength(body)).toBe(data.length);
    expect(Buffer.from(unsnappy(body, SNAPPY_MAX) as Buffer).equals(data)).toBe(true);
    for (let cut = 0; cut < body.length; cut++) {
      const out = unsnappy(body.subarray(0, cut), SNAPPY_MAX);
      expect({ cut, out: out instanceof AppError && out.reason }).toEqual({ cut, out: "body_undecodable" });
    }
  }
  expect(snappyLength(hex("ff ff ff ff 0f"))).toBe(0xffffffff);
  expect(snappyLength(hex("ff ff ff ff 7f"))).toMatch(/over 32 bits/);
  expect(snappyLength(hex("ff 06 00 00 73 4e 61 50 70 59"))).toMatch(/framing format/);
  expect(unsnappy(hex("05 10 61 62"), SNAPPY_MAX)).toBeInstanceOf(AppError); // says 5 bytes, holds a literal of 5 with 2 present
  // The 9-byte body that held snappyjs 0.7.0's loop for over a minute: a literal of 2^31 bytes.
  expect(unsnappy(hex("10 fc 00 00 00 80 01 02 03"), SNAPPY_MAX)).toBeInstanceOf(AppError);
});
