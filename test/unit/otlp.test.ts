// The OTLP decoders against bodies made by another encoder (protobufjs, from the .proto files) and
// by OTLP/JSON's rules: the documented event shape, the same events from protobuf and JSON, exact
// times and integers, the nesting rules; and the hostile shapes of docs/api.md's "Limits": every truncated
// prefix refused, lengths past the end, deep nesting, millions of records or values bounded.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { decodeBody } from "../../src/codec/decode";
import { encodeEvents } from "../../src/codec/encode";
import { measureBody, type CostLimits } from "../../src/codec/bounds";
import { nanosText } from "../../src/codec/otlp-event";
import { eventMicros } from "../../src/codec/time";
import { prepareBody } from "../../src/ingest/prepare";
import { AppError } from "../../src/errors";
import { attr, anyValue, nanos, otlpProtobuf } from "../helpers/protos";
import { unbounded } from "../../src/codec/reception";

const AT = new Date("2026-11-24T12:00:00.123Z");
const TRACE = Buffer.from("0af7651916cd43dd8448eb211c80319c", "hex");
const SPAN = Buffer.from("b7ad6b7169203331", "hex");

/** One resource, one scope, three records: the shapes the mapping must handle (snake_case, for protobufjs). */
const REQUEST = {
  resource_logs: [
    {
      resource: {
        attributes: [attr("service.name", "checkout"), attr("service.version", "1.2.3"), attr("host.name", "web-1"), attr("telemetry.sdk.language", "nodejs")],
      },
      scope_logs: [
        {
          scope: { name: "checkout-logger", version: "0.9.0" },
          log_records: [
            {
              time_unix_nano: nanos(AT, 456_789),
              observed_time_unix_nano: nanos(new Date(AT.getTime() + 5)),
              severity_number: 17,
              severity_text: "Error",
              body: anyValue("payment failed"),
              attributes: [
                attr("http.request.method", "POST"),
                attr("http.response.status_code", 502),
                attr("order", { id: 42, items: ["a", "b"] }),
                attr("big", 1234567890123456789n),
                attr("negative", -9007199254740993n),
                attr("ratio", 0.25),
                attr("ok", false),
                attr("raw", Buffer.from([1, 2, 3])),
                attr("__proto__", "plain data"),
              ],
              trace_id: TRACE,
              span_id: SPAN,
              flags: 1,
              event_name: "payment.failed",
            },
            {
              observed_time_unix_nano: nanos(AT, 1),
              severity_number: 9,
              body: anyValue({ structured: true, n: 1 }),
              attributes: [attr("a", 1), attr("a.b", 2), attr("x.y", 3), attr("x.y.z", 4), attr("p..q", 5)],
            },
            { severity_number: 0, body: anyValue(7.5), attributes: [attr("nan", Number.NaN), attr("minus", -5), attr("min", -(2 ** 53) + 1)] },
          ],
        },
      ],
    },
  ],
};

const EXPECTED = [
  {
    dt: "2026-11-24T12:00:00.123456789Z",
    level: "Error",
    severity_number: 17,
    message: "payment failed",
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    span_id: "b7ad6b7169203331",
    flags: 1,
    event_name: "payment.failed",
    attributes: {
      http: { request: { method: "POST" }, response: { status_code: 502 } },
      order: { id: 42, items: ["a", "b"] },
      big: "<exact>",
      negative: "<exact negative>",
      ratio: 0.25,
      ok: false,
      raw: "AQID",
      ["__proto__"]: "plain data",
    },
    service: { name: "checkout", version: "1.2.3" },
    resource: { host: { name: "web-1" }, telemetry: { sdk: { language: "nodejs" } } },
    scope: { name: "checkout-logger", version: "0.9.0" },
  },
  {
    dt: "2026-11-24T12:00:00.123000001Z",
    level: "INFO",
    severity_number: 9,
    body: { structured: true, n: 1 },
    // `a` is a number, so `a.b` stays flat; `x.y` is a number, so `x.y.z` does; an empty part stays flat.
    attributes: { a: 1, "a.b": 2, x: { y: 3 }, "x.y.z": 4, "p..q": 5 },
    service: { name: "checkout", version: "1.2.3" },
    resource: { host: { name: "web-1" }, telemetry: { sdk: { language: "nodejs" } } },
    scope: { name: "checkout-logger", version: "0.9.0" },
  },
  {
    body: 7.5,
    attributes: { nan: "NaN", minus: -5, min: -(2 ** 53) + 1 },
    service: { name: "checkout", version: "1.2.3" },
    resource: { host: { name: "web-1" }, telemetry: { sdk: { language: "nodejs" } } },
    scope: { name: "checkout-logger", version: "0.9.0" },
  },
];

/** The same request as OTLP/JSON writes it: lowerCamelCase, hex ids, 64-bit integers as strings, bytes in base64. */
function jsonOf(request: typeof REQUEST): string {
  const value = (v: any): any => {
    if (v.string_value !== undefined) return { stringValue: v.string_value };
    if (v.bool_value !== undefined) return { boolValue: v.bool_value };
    if (v.int_value !== undefined) return { intValue: String(v.int_value) };
    if (v.double_value !== undefined) return { doubleValue: Number.isNaN(v.double_value) ? "NaN" : v.double_value };
    if (v.bytes_value !== undefined) return { bytesValue: Buffer.from(v.bytes_value).toString("base64") };
    if (v.array_value) return { arrayValue: { values: v.array_value.values.map(value) } };
    if (v.kvlist_value) return { kvlistValue: { values: v.kvlist_value.values.map((kv: any) => ({ key: kv.key, value: value(kv.value) })) } };
    return {};
  };
  const attributes = (list: any[] = []) => list.map((kv) => ({ key: kv.key, value: value(kv.value) }));
  return JSON.stringify({
    resourceLogs: request.resource_logs.map((rl) => ({
      resource: { attributes: attributes(rl.resource.attributes) },
      scopeLogs: rl.scope_logs.map((sl) => ({
        scope: sl.scope,
        logRecords: sl.log_records.map((r: any) => ({
          timeUnixNano: r.time_unix_nano,
          observedTimeUnixNano: r.observed_time_unix_nano,
          severityNumber: r.severity_number,
          severityText: r.severity_text,
          body: r.body && value(r.body),
          attributes: attributes(r.attributes),
          traceId: r.trace_id?.toString("hex").toUpperCase(),
          spanId: r.span_id?.toString("hex"),
          flags: r.flags,
          eventName: r.event_name,
        })),
      })),
    })),
  });
}

/** The events as JSON would store them; the exact 64-bit integer is checked in the text, then stood in for. */
function events(body: Buffer, format: "otlp-proto" | "otlp-json" | "json") {
  const text = JSON.stringify(decodeBody(body, format));
  expect(text).toContain('"big":1234567890123456789,"negative":-9007199254740993,');
  return JSON.parse(text.replace('"big":1234567890123456789,"negative":-9007199254740993,', '"big":"<exact>","negative":"<exact negative>",'));
}

test("protobuf: each LogRecord becomes one event of the documented shape", () => {
  expect(events(otlpProtobuf(REQUEST), "otlp-proto")).toEqual(EXPECTED);
});

test("OTLP/JSON gives the same events as protobuf, and so does an envelope sent to /", () => {
  const body = Buffer.from(jsonOf(REQUEST));
  expect(events(body, "otlp-json")).toEqual(EXPECTED);
  expect(events(body, "json")).toEqual(EXPECTED);
});

test("the event time is the record's nanoseconds, exact to the microsecond in the dt column", () => {
  const [first] = decodeBody(otlpProtobuf(REQUEST), "otlp-proto") as { dt: string }[];
  expect(first!.dt).toBe("2026-11-24T12:00:00.123456789Z");
  expect(eventMicros(first!.dt)).toBe(eventMicros("2026-11-24T12:00:00.123456Z")!);
});

test("nanosText is exact for any 64-bit value past 1970 (against BigInt)", () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: (1n << 64n) - 1n }), (n) => {
      const text = nanosText(Number(n & 0xffffffffn), Number(n >> 32n))!;
      const ms = n / 1_000_000n;
      expect(text).toBe(`${new Date(Number(ms)).toISOString().slice(0, 23)}${(n % 1_000_000n).toString().padStart(6, "0")}Z`);
    }),
    { numRuns: 2000 },
  );
});

const LIMITS = {
  maxEventBytes: 1 << 20,
  maxDepth: 64,
  maxDecompressedBytes: 100 << 20,
  maxEventsPerRequest: 100_000,
  bufferMaxEvents: 1_000_000,
  ringMaxBytes: 1 << 30,
};
const COST: CostLimits = { maxEvents: 100_000, maxDecompressedBytes: 100 << 20, maxDepth: 64, maxEventBytes: 1 << 20 };

function prepared(body: Buffer, format: "otlp-proto" | "otlp-json", limits = LIMITS) {
  return prepareBody(body, format, 1, unbounded(0), limits);
}

test("every truncated prefix of a protobuf body (one resource) and of its JSON is a clean 4xx", () => {
  const proto = otlpProtobuf(REQUEST);
  const json = Buffer.from(jsonOf(REQUEST));
  expect(prepared(proto, "otlp-proto")).not.toBeInstanceOf(AppError);
  for (const [body, format] of [
    [proto, "otlp-proto"],
    [json, "otlp-json"],
  ] as const) {
    for (let length = 0; length < body.length; length++) {
      const result = prepared(body.subarray(0, length), format);
      expect(result).toBeInstanceOf(AppError);
      expect((result as AppError).status).toBeLessThan(500);
    }
  }
});

test("a length past the end of its message, a bad wire type, field number 0: 406 (400 on /v1/logs), no throw", () => {
  const record = otlpProtobuf({ resource_logs: [{ scope_logs: [{ log_records: [{ body: anyValue("x") }] }] }] });
  const cases = [
    Buffer.concat([record.subarray(0, 1), Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]), record.subarray(2)]), // a huge length
    Buffer.from([0x0a, 0x05, 0x12, 0x7f, 0x00, 0x00, 0x00]), // scopeLogs says 127 bytes inside a 5-byte ResourceLogs
    Buffer.from([0x0b, 0x00]), // wire type 3 (a group)
    Buffer.from([0x00, 0x00, 0x00]), // field number 0
    Buffer.from([0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), // an 11-byte varint
  ];
  for (const body of cases) {
    const result = decodeBody(body, "otlp-proto");
    expect(result).toBeInstanceOf(AppError);
    expect((result as AppError).reason).toBe("body_undecodable");
  }
});

/**
 * A request of one LogRecord whose body (or attribute "d") is an AnyValue of `depth` nested arrays
 * around a string, written by hand in one pass: each level's length is known from the inside out.
 */
function deepRecord(depth: number, inAttribute = false): Buffer {
  const inner = Buffer.from([0x0a, 0x01, 0x78]); // AnyValue.string_value "x"
  const heads: Buffer[] = [];
  let size = inner.length;
  const wrap = (tag: number) => {
    const head = Buffer.concat([Buffer.from([tag]), varint(size)]);
    heads.push(head);
    size += head.length;
  };
  for (let i = 0; i < depth; i++) {
    wrap(0x0a); // ArrayValue.values
    wrap(0x2a); // AnyValue.array_value
  }
  if (inAttribute) {
    const key = Buffer.from([0x0a, 0x01, 0x64]); // KeyValue.key "d"
    wrap(0x12); // KeyValue.value
    heads.push(key);
    size += key.length;
    wrap(0x32); // LogRecord.attributes
  } else wrap(0x2a); // LogRecord.body
  wrap(0x12); // ScopeLogs.log_records
  wrap(0x12); // ResourceLogs.scope_logs
  wrap(0x0a); // ExportLogsServiceRequest.resource_logs
  return Buffer.concat([...heads.reverse(), inner]);
}
function varint(n: number): Buffer {
  const bytes: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 128)) bytes.push((n % 128) | 0x80);
  bytes.push(n);
  return Buffer.from(bytes);
}

test("deeply nested AnyValues: past INGEST_MAX_DEPTH the decoder stops (no recursion past it), within it the record is refused alone", () => {
  const deep = decodeBody(deepRecord(100_000), "otlp-proto");
  expect(deep).toBeInstanceOf(AppError);
  expect((deep as AppError).reason).toBe("too_deep");
  expect(decodeBody(deepRecord(63), "otlp-proto")).toHaveLength(1);
  // 63 arrays in an attribute: within the decoder's bound, but the event (event → attributes → 63 arrays) is deeper than 64.
  const partial = prepared(
    Buffer.concat([deepRecord(63, true), otlpProtobuf({ resource_logs: [{ scope_logs: [{ log_records: [{ body: anyValue("fine") }] }] }] })]),
    "otlp-proto",
  );
  expect(partial).not.toBeInstanceOf(AppError);
  expect(partial).toMatchObject({ count: 1, refused: 1 });
  expect((partial as { refusal: string }).refusal).toContain("deeper than 64");
});

test("a record over INGEST_MAX_EVENT_BYTES is left out and counted (partial success); the others are encoded", () => {
  const body = otlpProtobuf({
    resource_logs: [{ scope_logs: [{ log_records: [{ body: anyValue("small") }, { body: anyValue("x".repeat(5000)) }, { body: anyValue("small too") }] }] }],
  });
  const result = prepared(body, "otlp-proto", { ...LIMITS, maxEventBytes: 1000 });
  expect(result).toMatchObject({ count: 2, refused: 1 });
  expect((result as { refusal: string }).refusal).toContain("1 of 3 log records were refused; the first: event 1 is");
  // On `/` the same envelope is all or nothing.
  const json = Buffer.from(JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: "x".repeat(5000) } }] }] }] }));
  const slash = decodeBody(json, "json") as unknown[];
  expect(encodeEvents(slash, "json", 1, unbounded(0), { maxEventBytes: 1000, maxDepth: 64 })).toBeInstanceOf(AppError);
});

test("a million empty records (2 MB) are 413 before one is built; a million values are 413 while decoding", () => {
  const records = Buffer.alloc(2 * 1_000_000, Buffer.from([0x12, 0x00])); // ScopeLogs.log_records, empty
  const scope = Buffer.concat([Buffer.from([0x12]), varint(records.length), records]);
  const body = Buffer.concat([Buffer.from([0x0a]), varint(scope.length), scope]);
  const measured = measureBody(body, "otlp-proto", COST);
  expect(measured).toBeInstanceOf(AppError);
  expect((measured as AppError).reason).toBe("too_many_events");

  const pairs = Buffer.alloc(2 * 600_000, Buffer.from([0x32, 0x00])); // LogRecord.attributes, empty KeyValues
  const record = Buffer.concat([Buffer.from([0x12]), varint(pairs.length), pairs]);
  const wide = Buffer.concat([
    Buffer.from([0x0a]),
    varint(record.length + varint(record.length).length + 1),
    Buffer.from([0x12]),
    varint(record.length),
    record,
  ]);
  const limits = { ...COST, maxDecompressedBytes: 4 << 20 }; // 262,144 values
  expect(measureBody(wide, "otlp-proto", limits)).toBe(1);
  const decoded = decodeBody(wide, "otlp-proto", limits);
  expect(decoded).toBeInstanceOf(AppError);
  expect((decoded as AppError).reason).toBe("too_many_values");
});

test("OTLP/JSON: the wrong structure is refused naming its place; scalars of the wrong type are ignored", () => {
  const refusal = (value: unknown) => decodeBody(Buffer.from(JSON.stringify(value)), "otlp-json") as AppError;
  expect(refusal([1]).message).toContain("not an object");
  expect(refusal({ resourceLogs: {} }).message).toBe("OTLP/JSON: resourceLogs is not an array");
  expect(refusal({ resourceLogs: [{ scopeLogs: [{ logRecords: [{}, 5] }] }] }).message).toBe(
    "OTLP/JSON: resourceLogs[0].scopeLogs[0].logRecords[1]: is not an object",
  );
  expect(refusal({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ attributes: [{ value: {} }] }] }] }] }).message).toContain(
    "logRecords[0]: attributes[0] is not a KeyValue",
  );
  const lenient = decodeBody(
    Buffer.from(
      JSON.stringify({
        resourceLogs: [{ scopeLogs: [{ logRecords: [{ severityNumber: "SEVERITY_NUMBER_WARN", timeUnixNano: true, flags: "x", body: { stringValue: 5 } }] }] }],
      }),
    ),
    "otlp-json",
  );
  expect(JSON.parse(JSON.stringify(lenient))).toEqual([{ level: "WARN", severity_number: 13 }]);
});

test("a JSON object that is not an envelope still goes to / as one event", () => {
  expect(decodeBody(Buffer.from('{"resourceLogs":"not a list","message":"hi"}'), "json")).toEqual([{ resourceLogs: "not a list", message: "hi" }]);
});
