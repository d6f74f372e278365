// The event-time window (codec/reception.ts) as the encoder applies it (codec/encode.ts): with an
// injected reception time, each event's stored dt and the field that keeps what it carried, at
// the bounds and past them, for every way an event carries a time; the counts by reason; the
// field never overwrites one of the event's own; the same counts when a big body is encoded in
// slices (ingest/prepare.ts).
import { describe, expect, test } from "bun:test";
import { pack } from "msgpackr";
import { DEFAULTS } from "../../src/config";
import { decodeBody } from "../../src/codec/decode";
import { encodeEvents, type Encoded } from "../../src/codec/encode";
import type { Format } from "../../src/codec/format";
import { receptionOf, REDATED_FIELD, retentionGraceMs, unbounded, type EventTimeRule } from "../../src/codec/reception";
import { eventMicros, microsOfMillis, microsText, type PgMicros } from "../../src/codec/time";
import { fieldsOf, tuplesOf } from "../../src/codec/tuples";
import { AppError } from "../../src/errors";
import { prepareBody, type PrepareLimits } from "../../src/ingest/prepare";
import { BIG_BODY_BYTES } from "../../src/memory/costs";

const DAY_MS = 86_400_000;
const NOW = Date.UTC(2026, 10, 27, 14, 30, 0, 123); // the injected clock
const RULE: EventTimeRule = {
  maxFutureMs: DEFAULTS.INGEST_MAX_FUTURE_MS,
  retentionGraceMs: retentionGraceMs(DEFAULTS.RETENTION_SWEEP_INTERVAL_MS, DEFAULTS.SEAL_INTERVAL_MS),
};
const RETENTION_DAYS = 30;
const LIMITS = { maxEventBytes: 1 << 20, maxDepth: 64 };
/** The first time kept as sent, and the last, in ms (the window's bounds). */
const OLDEST_MS = NOW - RETENTION_DAYS * DAY_MS + RULE.retentionGraceMs;
const NEWEST_MS = NOW + RULE.maxFutureMs;

const reception = () => receptionOf(NOW, RETENTION_DAYS, RULE);

function encode(events: unknown[], format: Format = "json", at = reception()): Encoded {
  const encoded = encodeEvents(events, format, 1, at, LIMITS);
  if (encoded instanceof AppError) throw new Error(encoded.message);
  return encoded;
}

/** Each stored tuple's dt (ms text of PgMicros) and raw JSON. */
function stored(encoded: Encoded): { dt: string; raw: Record<string, unknown> }[] {
  return tuplesOf(encoded.rows).map((tuple) => {
    const fields = fieldsOf(tuple);
    return { dt: microsText(fields.dt), raw: JSON.parse(fields.raw) };
  });
}

const text = (ms: number) => microsText(microsOfMillis(ms));
const RECEIVED = text(NOW);

describe("the window", () => {
  test("the defaults: a day ahead; the retention less the longer of the sweep and seal intervals behind", () => {
    expect(RULE).toEqual({ maxFutureMs: 86_400_000, retentionGraceMs: 3_600_000 });
    expect(retentionGraceMs(100, 60_000)).toBe(60_000);
    const window = reception();
    expect(window.at).toBe(microsOfMillis(NOW));
    expect(window.oldest).toBe(microsOfMillis(OLDEST_MS) as number);
    expect(window.newest).toBe(microsOfMillis(NEWEST_MS) as number);
  });

  test("the retention is the source's: a longer one keeps older events as sent", () => {
    const sent = NOW - 40 * DAY_MS;
    expect(encode([{ dt: sent }], "json", receptionOf(NOW, 30, RULE)).tooOld).toBe(1);
    const kept = encode([{ dt: sent }], "json", receptionOf(NOW, 60, RULE));
    expect(kept.tooOld).toBeUndefined();
    expect(stored(kept)[0]!.dt).toBe(text(sent));
  });

  test("unbounded keeps every readable time as sent", () => {
    const encoded = encode([{ dt: 0 }, { dt: "3000-01-01T00:00:00Z" }], "json", unbounded(microsOfMillis(NOW)));
    expect(stored(encoded).map((row) => row.dt)).toEqual([text(0), "3000-01-01T00:00:00.000000Z"]);
    expect([encoded.tooOld, encoded.tooFarAhead]).toEqual([undefined, undefined]);
  });
});

// [what the event carries, the reason it is redated (undefined: kept as sent), the time it carried as logpond reads it]
const CASES: [string, Record<string, unknown>, "too_old" | "too_far_ahead" | undefined, string | undefined][] = [
  ["dt 0 (1970)", { dt: 0 }, "too_old", text(0)],
  ["dt in 3000 (a bigint of µs)", { dt: "3000-01-01T00:00:00Z" }, "too_far_ahead", "3000-01-01T00:00:00.000000Z"],
  ["dt in 1000 (a bigint of µs)", { dt: "1000-01-01T00:00:00Z" }, "too_old", "1000-01-01T00:00:00.000000Z"],
  ["dt at the oldest bound", { dt: OLDEST_MS }, undefined, text(OLDEST_MS)],
  ["dt 1 µs before the oldest bound", { dt: (OLDEST_MS * 1000 - 1).toString() }, "too_old", microsText(eventMicros(OLDEST_MS * 1000 - 1)!)],
  ["dt 1 ms before the oldest bound", { dt: OLDEST_MS - 1 }, "too_old", text(OLDEST_MS - 1)],
  ["dt at the newest bound", { dt: NEWEST_MS }, undefined, text(NEWEST_MS)],
  ["dt 1 ms past the newest bound", { dt: NEWEST_MS + 1 }, "too_far_ahead", text(NEWEST_MS + 1)],
  ["dt as seconds, a year ago", { dt: Math.floor((NOW - 365 * DAY_MS) / 1000) }, "too_old", text(Math.floor((NOW - 365 * DAY_MS) / 1000) * 1000)],
  ["dt now", { dt: NOW }, undefined, RECEIVED],
  ["timestamp 1970 (no dt)", { timestamp: "1970-01-01T00:00:00Z" }, "too_old", text(0)],
  ["date in 2999 (no dt)", { date: 32_503_593_600 }, "too_far_ahead", text(32_503_593_600_000)],
  ["no time", { message: "x" }, undefined, undefined],
  ["an unreadable dt", { dt: "yesterday" }, undefined, undefined],
];

describe.each([["json"], ["msgpack"]] as const)("encoding %s", (format) => {
  test.each(CASES)("%s", (_name, event, reason, sentText) => {
    // Through the codec's own decoder, as ingestion reads a body.
    const events = decodeBody(format === "msgpack" ? pack([event]) : Buffer.from(JSON.stringify([event])), format) as unknown[];
    const encoded = encode(events, format);
    const [row] = stored(encoded);
    if (reason === undefined) {
      expect(row!.dt).toBe(sentText ?? RECEIVED);
      expect(row!.raw[REDATED_FIELD]).toBeUndefined();
    } else {
      expect(row!.dt).toBe(RECEIVED);
      expect(row!.raw[REDATED_FIELD]).toBe(sentText!);
    }
    expect(encoded.tooOld ?? 0).toBe(reason === "too_old" ? 1 : 0);
    expect(encoded.tooFarAhead ?? 0).toBe(reason === "too_far_ahead" ? 1 : 0);
    // The fields the event carried stay as sent.
    for (const key of Object.keys(event)) expect(row!.raw[key]).toEqual(event[key]);
  });
});

test("MessagePack timestamps: a Date out of the window is redated, its text kept", () => {
  const events = decodeBody(pack([{ dt: new Date(Date.UTC(3000, 0, 1)) }, { dt: new Date(NOW - DAY_MS) }]), "msgpack") as unknown[];
  const encoded = encode(events, "msgpack");
  const rows = stored(encoded);
  expect(rows.map((row) => row.dt)).toEqual([RECEIVED, text(NOW - DAY_MS)]);
  expect(rows[0]!.raw).toEqual({ dt: "3000-01-01T00:00:00.000Z", [REDATED_FIELD]: "3000-01-01T00:00:00.000000Z" });
  expect(encoded.tooFarAhead).toBe(1);
});

test("the event's own dt_sent is never overwritten: the time goes to the first free dt_sent_N", () => {
  const rows = stored(
    encode([
      { dt: 0, [REDATED_FIELD]: "mine" },
      { dt: 0, [REDATED_FIELD]: "mine", [`${REDATED_FIELD}_2`]: 2 },
      { dt: NOW, [REDATED_FIELD]: "mine, in the window" },
    ]),
  );
  expect(rows.map((row) => row.raw)).toEqual([
    { dt: 0, [REDATED_FIELD]: "mine", [`${REDATED_FIELD}_2`]: text(0) },
    { dt: 0, [REDATED_FIELD]: "mine", [`${REDATED_FIELD}_2`]: 2, [`${REDATED_FIELD}_3`]: text(0) },
    { dt: NOW, [REDATED_FIELD]: "mine, in the window" },
  ]);
});

test("counts by reason over a request; an OTLP record left out is not counted", () => {
  const events = [{ dt: 0 }, { dt: 1 }, { dt: "3000-01-01" }, { dt: NOW }, { message: "no time" }];
  const encoded = encode(events);
  expect([encoded.count, encoded.tooOld, encoded.tooFarAhead]).toEqual([5, 2, 1]);
  // OTLP leaves a record too big out and stores the rest (partial success).
  const otlp = encodeEvents(
    [
      { dt: "1970-01-01T00:00:00.000000001Z", message: "x".repeat(2_000) },
      { dt: "1970-01-01T00:00:00.000000001Z", message: "kept" },
    ],
    "otlp-json",
    1,
    reception(),
    { maxEventBytes: 1_000, maxDepth: 64 },
  ) as Encoded;
  expect([otlp.count, otlp.refused, otlp.tooOld]).toEqual([1, 1, 1]);
});

test("a big body encoded in slices counts as encoded whole", () => {
  const PREPARE: PrepareLimits = {
    ...LIMITS,
    maxDecompressedBytes: 100 << 20,
    maxEventsPerRequest: 100_000,
    bufferMaxEvents: 1_000_000,
    ringMaxBytes: 200 << 20,
  };
  const events = Array.from({ length: 12_000 }, (_, i) => ({ dt: i % 3 === 0 ? 0 : i % 3 === 1 ? NOW - 1_000 : "3000-01-01", i, pad: "p".repeat(80) }));
  const body = Buffer.from(JSON.stringify(events));
  expect(body.length).toBeGreaterThan(BIG_BODY_BYTES);
  const prepared = prepareBody(body, "json", 1, reception(), PREPARE);
  if (prepared instanceof AppError) throw new Error(prepared.message);
  expect(prepared.own).toBe(true); // it was sliced
  expect([prepared.count, prepared.tooOld, prepared.tooFarAhead]).toEqual([12_000, 4_000, 4_000]);
  const rows = stored(prepared);
  expect(rows.filter((row) => row.dt === RECEIVED)).toHaveLength(8_000);
});

test("what is compared: PgMicros, numbers and bigints alike", () => {
  const window = reception();
  const far: PgMicros = eventMicros("9999-12-31T23:59:59.999999Z")!;
  expect(typeof far).toBe("bigint");
  expect(far > window.newest).toBe(true);
  const early: PgMicros = eventMicros("0001-01-01T00:00:00Z")!;
  expect(typeof early).toBe("bigint");
  expect(early < window.oldest).toBe(true);
});
