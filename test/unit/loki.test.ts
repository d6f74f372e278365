// The Loki push decoders and the snappy block decoder: lines become events with their labels and
// structured metadata; protobuf (protobufjs + snappyjs, not ours) and JSON agree; every truncated
// prefix, a declared length past the limit, and the body that hangs snappyjs are clean refusals.
import { expect, test } from "bun:test";
import { compress } from "snappyjs";
import { decodeBody } from "../../src/codec/decode";
import { parseLabels } from "../../src/codec/loki";
import { unsnappy } from "../../src/ingest/snappy";
import { prepareBody } from "../../src/ingest/prepare";
import { AppError } from "../../src/errors";
import { lokiProtobuf, nanos } from "../helpers/protos";
import { unbounded } from "../../src/codec/reception";

const AT = new Date("2026-11-24T12:00:00.000Z");
const PUSH = {
  streams: [
    {
      labels: '{job="api", level="error", note="say \\"hi\\"\\n"}',
      entries: [
        { timestamp: { seconds: AT.getTime() / 1000, nanos: 123_456_789 }, line: "first line" },
        {
          timestamp: { seconds: AT.getTime() / 1000 + 1, nanos: 0 },
          line: "second",
          structuredMetadata: [
            { name: "trace_id", value: "abc" },
            { name: "level", value: "warn" },
          ],
        },
      ],
    },
    {
      labels: "{}",
      entries: [{ timestamp: { seconds: AT.getTime() / 1000, nanos: 5 }, line: "bare", structuredMetadata: [{ name: "detected_level", value: "info" }] }],
    },
  ],
};
const EXPECTED = [
  { dt: "2026-11-24T12:00:00.123456789Z", level: "error", message: "first line", labels: { job: "api", level: "error", note: 'say "hi"\n' } },
  {
    dt: "2026-11-24T12:00:01.000000000Z",
    level: "error",
    message: "second",
    labels: { job: "api", level: "error", note: 'say "hi"\n' },
    metadata: { trace_id: "abc", level: "warn" },
  },
  { dt: "2026-11-24T12:00:00.000000005Z", level: "info", message: "bare", labels: {}, metadata: { detected_level: "info" } },
];
const JSON_PUSH = {
  streams: [
    {
      stream: { job: "api", level: "error", note: 'say "hi"\n' },
      values: [
        [nanos(AT, 123_456_789), "first line"],
        [nanos(new Date(AT.getTime() + 1000)), "second", { trace_id: "abc", level: "warn" }],
      ],
    },
    { stream: {}, values: [[nanos(AT, 5), "bare", { detected_level: "info" }]] },
  ],
};

const LIMITS = {
  maxEventBytes: 1 << 20,
  maxDepth: 64,
  maxDecompressedBytes: 100 << 20,
  maxEventsPerRequest: 100_000,
  bufferMaxEvents: 1_000_000,
  ringMaxBytes: 1 << 30,
};
const plain = (value: unknown) => JSON.parse(JSON.stringify(value));

test("protobuf (after its snappy block) and JSON: each line one event with its labels and metadata", () => {
  const proto = unsnappy(lokiProtobuf(PUSH), 1 << 20) as Buffer;
  expect(plain(decodeBody(proto, "loki-proto"))).toEqual(EXPECTED);
  expect(plain(decodeBody(Buffer.from(JSON.stringify(JSON_PUSH)), "loki-json"))).toEqual(EXPECTED);
});

test.each([
  ['{job="a",b="c"}', { job: "a", b: "c" }],
  ['  { job = "a" , }', { job: "a" }],
  ['{a="\\\\ \\t"}', { a: "\\ \t" }],
  ["{}", {}],
  ['{__proto__="x"}', { ["__proto__"]: "x" }],
])("labels %s", (text, labels) => {
  expect(plain(parseLabels(text))).toEqual(labels);
});

test.each(["", 'job="a"', "{job=a}", '{job="a"', '{job="a"} x', '{1a="b"}', '{a="b" c="d"}'])("labels %p are refused", (text) => {
  expect(typeof parseLabels(text)).toBe("string");
});

test("a bad stream or entry refuses the push naming it", () => {
  const refusal = (value: unknown) => (decodeBody(Buffer.from(JSON.stringify(value)), "loki-json") as AppError).message;
  expect(refusal({ streams: {} })).toBe("Loki push: the body is not an object with a streams array");
  expect(
    refusal({
      streams: [
        {
          stream: {},
          values: [
            ["1", "ok"],
            ["soon", "x"],
          ],
        },
      ],
    }),
  ).toContain("streams[0].values[1]: the timestamp is not nanoseconds");
  expect(refusal({ streams: [{ stream: {}, values: [["1", 5]] }] })).toContain("the line is not a string");
  expect(refusal({ streams: [{ stream: "x", values: [] }] })).toContain("streams[0].stream (its labels) is not an object");
  const badLabels = unsnappy(lokiProtobuf({ streams: [{ labels: "{job=api}", entries: [{ line: "x" }] }] }), 1 << 20) as Buffer;
  expect((decodeBody(badLabels, "loki-proto") as AppError).message).toBe('Loki push: stream 0: its label job has no ="value"');
});

test("every truncated prefix of a snappy body, of its protobuf (one stream) and of the JSON is a clean 4xx", () => {
  const snappy = lokiProtobuf({ streams: [PUSH.streams[0]] });
  const proto = unsnappy(snappy, 1 << 20) as Buffer;
  for (let length = 0; length < snappy.length; length++) expect(unsnappy(snappy.subarray(0, length), 1 << 20)).toBeInstanceOf(AppError);
  const json = Buffer.from(JSON.stringify(JSON_PUSH));
  for (const [body, format] of [
    [proto, "loki-proto"],
    [json, "loki-json"],
  ] as const) {
    expect(prepareBody(body, format, 1, unbounded(0), LIMITS)).not.toBeInstanceOf(AppError);
    for (let length = 0; length < body.length; length++) {
      const result = prepareBody(body.subarray(0, length), format, 1, unbounded(0), LIMITS);
      expect(result).toBeInstanceOf(AppError);
      expect((result as AppError).status).toBeLessThan(500);
    }
  }
});

test("snappy: a declared length past INGEST_MAX_DECOMPRESSED_BYTES is 413 before anything is allocated", () => {
  const refusal = unsnappy(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]), 100 << 20) as AppError; // says 4 GiB
  expect(refusal.reason).toBe("decompressed_too_large");
  expect(refusal.status).toBe(413);
});

test("snappy: what hangs or fools snappyjs is refused here, and real data round-trips", () => {
  // A literal whose 4-byte length wraps negative: snappyjs 0.7.0 loops forever on these 6 bytes.
  expect(unsnappy(Buffer.from([10, 0xfc, 0xfa, 0xff, 0xff, 0xff]), 100)).toBeInstanceOf(AppError);
  // Copies past the declared length: snappyjs writes nothing and goes on (1.1 s for 9 MB); refused at the first.
  const ops = Buffer.alloc(3 * 1000, Buffer.from([0xfe, 1, 0]));
  expect((unsnappy(Buffer.concat([Buffer.from([1, 0x00, 0x41]), ops]), 100) as AppError).message).toMatch(/not valid snappy data.*remaining dst: 0/);
  const nineMb = Buffer.concat([Buffer.from([1, 0x00, 0x41]), Buffer.alloc(9_000_000, Buffer.from([0xfe, 1, 0]))]);
  // Refused, not decoded past the declared length (how fast is the bench's question, not this test's).
  expect(unsnappy(nineMb, 100 << 20)).toBeInstanceOf(AppError);
  // A copy before the start, and a body shorter than its header.
  expect(unsnappy(Buffer.from([4, 0x01, 0x05]), 100)).toBeInstanceOf(AppError);
  expect(unsnappy(Buffer.from([4, 0x00, 0x41]), 100)).toBeInstanceOf(AppError);
  const text = Buffer.from("abcabcabcabc".repeat(5000) + "tail 😀");
  expect(unsnappy(Buffer.from(compress(text)), 1 << 20)).toEqual(text);
});

test("a push of a million empty entries is 413 before one is built", () => {
  const entries = Buffer.alloc(2 * 1_000_000, Buffer.from([0x12, 0x00]));
  const head = [0x0a, ...varint(entries.length)];
  const result = prepareBody(Buffer.concat([Buffer.from(head), entries]), "loki-proto", 1, unbounded(0), LIMITS);
  expect((result as AppError).reason).toBe("too_many_events");
});

function varint(n: number): number[] {
  const bytes: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 128)) bytes.push((n % 128) | 0x80);
  bytes.push(n);
  return bytes;
}

/** One JSON push of `line` under `labels` (and `metadata`), decoded; also sent as protobuf, which must agree. */
function lineEvent(line: string, labels: Record<string, string> = {}, metadata?: Record<string, string>): Record<string, unknown> {
  const json = decodeBody(
    Buffer.from(JSON.stringify({ streams: [{ stream: labels, values: [metadata ? [nanos(AT), line, metadata] : [nanos(AT), line]] }] })),
    "loki-json",
  ) as unknown[];
  const labelsText = `{${Object.entries(labels)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(",")}}`;
  const structuredMetadata = metadata && Object.entries(metadata).map(([name, value]) => ({ name, value }));
  const entry = { timestamp: { seconds: AT.getTime() / 1000 }, line, ...(structuredMetadata ? { structuredMetadata } : {}) };
  const proto = decodeBody(unsnappy(lokiProtobuf({ streams: [{ labels: labelsText, entries: [entry] }] }), 1 << 20) as Buffer, "loki-proto") as unknown[];
  expect(plain(proto)).toEqual(plain(json));
  return plain(json[0]);
}
const ENTRY_DT = "2026-11-24T12:00:00.000000000Z";

test.each([
  [
    "pino's line as pino-loki sends it: its fields, level named, the number kept, time as sent",
    '{"level":50,"time":1764000000000,"pid":7,"seq":3,"msg":"request 3 failed"}',
    { level: "error", hostname: "web-1" },
    undefined,
    {
      dt: ENTRY_DT,
      level: "error",
      level_number: 50,
      time: 1764000000000,
      pid: 7,
      seq: 3,
      msg: "request 3 failed",
      labels: { level: "error", hostname: "web-1" },
    },
  ],
  [
    "pino's trace and fatal keep pino's names (pino-loki's label says debug / critical)",
    '{"level":60,"msg":"x"}',
    { level: "critical" },
    undefined,
    { dt: ENTRY_DT, level: "fatal", level_number: 60, msg: "x", labels: { level: "critical" } },
  ],
  [
    "a level number pino does not name takes the label's",
    '{"level":35,"msg":"x"}',
    { level: "notice" },
    undefined,
    { dt: ENTRY_DT, level: "notice", level_number: 35, msg: "x", labels: { level: "notice" } },
  ],
  ["a level number nothing names stays a number", '{"level":35}', {}, undefined, { dt: ENTRY_DT, level: 35, labels: {} }],
  [
    "the line's own string level beats the label",
    '{"level":"WARN","message":"disk"}',
    { level: "info" },
    undefined,
    { dt: ENTRY_DT, level: "WARN", message: "disk", labels: { level: "info" } },
  ],
  [
    "no level in the line: the label's, as for text",
    '{"message":"disk"}',
    { detected_level: "info" },
    undefined,
    { dt: ENTRY_DT, level: "info", message: "disk", labels: { detected_level: "info" } },
  ],
  [
    "the line's own dt, when it reads as a time, is the event's",
    '{"dt":"2026-11-24T11:59:58.5Z","m":1}',
    {},
    undefined,
    { dt: "2026-11-24T11:59:58.5Z", m: 1, labels: {} },
  ],
  ["a line dt that is no time gives way to the entry's", '{"dt":"yesterday","m":1}', {}, undefined, { dt: ENTRY_DT, m: 1, labels: {} }],
  [
    "the line's own labels and metadata fields are kept beside the push's",
    '{"labels":["a"],"metadata":{"k":1},"m":1}',
    { job: "api" },
    { trace_id: "t" },
    { dt: ENTRY_DT, labels: { job: "api" }, metadata: { trace_id: "t" }, line_labels: ["a"], line_metadata: { k: 1 }, m: 1 },
  ],
  ["a metadata field stays when the entry has none", '{"metadata":{"k":1}}', {}, undefined, { dt: ENTRY_DT, metadata: { k: 1 }, labels: {} }],
  [
    "a field named as a label is the line's; the label stays in labels",
    '{"job":"worker"}',
    { job: "api" },
    undefined,
    { dt: ENTRY_DT, job: "worker", labels: { job: "api" } },
  ],
  ["blanks around the object", ' \t{"a":{"b":[1,2]}}\n', {}, undefined, { dt: ENTRY_DT, a: { b: [1, 2] }, labels: {} }],
  ["an integer past 2^53 stays exact", '{"trace":123456789012345678901}', {}, undefined, { dt: ENTRY_DT, trace: 123456789012345678901, labels: {} }],
  ["not an object: text", "[1,2]", {}, undefined, { dt: ENTRY_DT, message: "[1,2]", labels: {} }],
  ["a number: text", "42", {}, undefined, { dt: ENTRY_DT, message: "42", labels: {} }],
  ["braces that are not JSON: text", "{job} started", {}, undefined, { dt: ENTRY_DT, message: "{job} started", labels: {} }],
  ["an object deeper than INGEST_MAX_DEPTH: text, not a refused push", `${'{"a":'.repeat(65)}1${"}".repeat(65)}`, {}, undefined, undefined],
])("a JSON line: %s", (_, line, labels, metadata, expected) => {
  const event = lineEvent(line, labels, metadata);
  if (expected === undefined) expect(event).toEqual({ dt: ENTRY_DT, message: line, labels });
  else expect(event).toEqual(expected as Record<string, unknown>);
});

test("as stored: a JSON line's big integer exact, and a line as deep as INGEST_MAX_DEPTH allows is fields, not a refusal", () => {
  const stored = (line: string) => {
    const body = Buffer.from(JSON.stringify({ streams: [{ stream: {}, values: [[nanos(AT), line]] }] }));
    const prepared = prepareBody(body, "loki-json", 1, unbounded(0), LIMITS);
    expect(prepared).not.toBeInstanceOf(AppError);
    return Buffer.from((prepared as { rows: Uint8Array }).rows).toString("latin1");
  };
  expect(stored('{"trace":123456789012345678901}')).toContain('"trace":123456789012345678901');
  const deepest = `${'{"a":'.repeat(LIMITS.maxDepth)}1${"}".repeat(LIMITS.maxDepth)}`;
  expect(lineEvent(deepest).message).toBeUndefined();
  expect(stored(deepest)).not.toContain('"message"');
});
