// Hostile request shapes (docs/api.md, "Limits"): small bodies that cost much once decoded.
// Shared by hostile-load.test.ts and measure-shapes.ts (the before/after table in the report).
// Each shape is built once (some take a second of compression) and sent as is.
import { Packr } from "msgpackr";
import * as zlib from "node:zlib";
import { compressSync } from "snappy";

export interface Shape {
  name: string;
  contentType: string;
  encoding?: "gzip" | "snappy";
  body: Uint8Array;
  /** Statuses the contract allows for it (after the fix). */
  expect: number[];
  /** Events it stores when accepted (202): set on every shape that may get one. */
  events?: number;
}

const MIB = 1024 * 1024;
const gzip = (data: Uint8Array | string) => zlib.gzipSync(data, { level: 9 });

/** Repeats `unit` `count` times into one buffer without building a JS string of it. */
function repeat(head: Uint8Array, unit: Uint8Array, count: number, tail: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(head.length + unit.length * count + tail.length);
  out.set(head, 0);
  let at = head.length;
  if (unit.length === 1) {
    out.fill(unit[0]!, at, at + count);
    at += count;
  } else {
    for (let i = 0; i < count; i++, at += unit.length) out.set(unit, at);
  }
  out.set(tail, at);
  return out;
}

const b = (text: string) => Buffer.from(text);

/** A MessagePack BigInt (msgpackr ext 0x42): big-endian two's complement, `bytes` long. */
function msgpackBigInt(bytes: number): Buffer {
  const payload = Buffer.alloc(bytes, 0x11);
  const head = Buffer.alloc(6);
  head[0] = 0xc9; // ext 32
  head.writeUInt32BE(bytes, 1);
  head[5] = 0x42;
  return Buffer.concat([head, payload]);
}

/** `mapsInArray` empty maps: an array32 header that says how many, then one 0x80 each. */
function msgpackEmptyMaps(count: number): Buffer {
  const head = Buffer.alloc(5);
  head[0] = 0xdd;
  head.writeUInt32BE(count, 1);
  return repeat(head, Buffer.from([0x80]), count, Buffer.alloc(0));
}

export function buildShapes(options: { maxDecompressedBytes: number; events?: number }): Shape[] {
  const events = options.events ?? 20_000_000;
  const limit = options.maxDecompressedBytes;
  const shapes: Shape[] = [];

  shapes.push({
    name: `MessagePack array32 of ${events} empty maps (gzip)`,
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(msgpackEmptyMaps(events)),
    expect: [413],
  });
  // One event holding them: no array header to read, so the walk's value count decides.
  const inner = Math.min(events, limit - 16);
  const heldMaps = Buffer.concat([Buffer.from([0x81, 0xa1, 0x61]), msgpackEmptyMaps(inner)]);
  shapes.push({
    name: `MessagePack one event holding ${inner} empty maps (gzip)`,
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(heldMaps),
    expect: [413],
  });
  const jsonInner = Math.floor((limit - 16) / 3);
  shapes.push({
    name: `JSON one event holding ${jsonInner} empty objects (gzip)`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b('{"a":[{}'), b(",{}"), jsonInner - 1, b("]}"))),
    expect: [413],
  });
  const jsonCount = Math.min(events, Math.floor((limit - 2) / 3));
  shapes.push({
    name: `JSON [{},{},…] × ${jsonCount} (gzip)`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b("[{}"), b(",{}"), jsonCount - 1, b("]"))),
    expect: [413],
  });
  const ndCount = Math.min(events, Math.floor(limit / 3));
  shapes.push({
    name: `NDJSON {}\\n × ${ndCount} (gzip)`,
    contentType: "application/x-ndjson",
    encoding: "gzip",
    body: gzip(repeat(b(""), b("{}\n"), ndCount, b(""))),
    expect: [413],
  });
  shapes.push({
    name: `NDJSON of ${limit - 8} blank lines and one {} (gzip)`,
    contentType: "application/x-ndjson",
    encoding: "gzip",
    body: gzip(repeat(b("{}"), b("\n"), limit - 8, b(""))),
    expect: [202, 413],
    events: 1,
  });

  // Values back to back (Fluent Bit, Fluentd, json_stream): no array header says how many.
  const backToBack = Math.min(events, limit - 8);
  shapes.push({
    name: `MessagePack ${backToBack} empty maps back to back, no array header (gzip)`,
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(Buffer.alloc(backToBack, 0x80)),
    expect: [413],
  });
  const entry = Buffer.from([0x92, 0x92, 0xd7, 0x00, 0x6b, 0x01, 0x8f, 0xb1, 0, 0, 0, 0, 0x80, 0x80]); // [[EventTime, {}], {}]
  const entries = Math.min(events, Math.floor((limit - 8) / entry.length));
  shapes.push({
    name: `Fluent Bit entries [[EventTime, {}], {}] × ${entries} back to back (gzip)`,
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(repeat(b(""), entry, entries, b(""))),
    expect: [413],
  });
  const objects = Math.min(events, Math.floor((limit - 8) / 2));
  shapes.push({
    name: `JSON {}{}{}… × ${objects} back to back (json_stream, gzip)`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b(""), b("{}"), objects, b(""))),
    expect: [413],
  });
  shapes.push({
    name: `snappy block of ${backToBack} empty maps back to back`,
    contentType: "application/msgpack",
    encoding: "snappy",
    body: compressSync(Buffer.alloc(backToBack, 0x80)),
    expect: [413],
  });
  shapes.push({
    name: "snappy block inflating one byte over the limit",
    contentType: "application/json",
    encoding: "snappy",
    body: compressSync(repeat(b("{}"), b(" "), limit - 1, b(""))),
    expect: [413],
  });

  // Many record definitions: every event a new key set, so every event defines a record.
  const records = new Packr({ useRecords: true, maxSharedStructures: 0 } as ConstructorParameters<typeof Packr>[0]);
  const defined = Array.from({ length: 150_000 }, (_, i) => ({ [`k${i}`]: i }));
  const fewer = new Packr({ useRecords: true, maxSharedStructures: 0 } as ConstructorParameters<typeof Packr>[0]);
  shapes.push({
    name: "MessagePack 90,000 record definitions (gzip)",
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(fewer.pack(defined.slice(0, 90_000))),
    expect: [202],
    events: 90_000,
  });
  shapes.push({
    name: "MessagePack 150,000 record definitions (gzip)",
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(records.pack(defined)),
    expect: [413],
  });

  shapes.push({
    name: "MessagePack BigInt ext of 1 MiB (2.5M digits)",
    contentType: "application/msgpack",
    body: Buffer.concat([Buffer.from([0x81, 0xa1, 0x6e]), msgpackBigInt(MIB)]),
    expect: [406],
  });
  shapes.push({
    name: "MessagePack BigInt ext of 60 KiB (147k digits)",
    contentType: "application/msgpack",
    body: Buffer.concat([Buffer.from([0x81, 0xa1, 0x6e]), msgpackBigInt(60 * 1024)]),
    expect: [202],
    events: 1,
  });
  shapes.push({
    name: "MessagePack BigInt ext of 100 KiB (a small body: refused while decoding)",
    contentType: "application/msgpack",
    body: Buffer.concat([Buffer.from([0x81, 0xa1, 0x6e]), msgpackBigInt(100 * 1024)]),
    expect: [406],
  });
  const twenty = Buffer.concat([Buffer.from([0xdc, 0, 20]), ...Array(20).fill(Buffer.concat([Buffer.from([0x81, 0xa1, 0x6e]), msgpackBigInt(32 * 1024)]))]);
  shapes.push({
    name: "MessagePack 20 BigInts of 32 KiB (640 KiB body: refused while decoding)",
    contentType: "application/msgpack",
    body: twenty,
    expect: [406],
  });
  const manyBig = 300;
  const arrayHead = Buffer.from([0xdc, manyBig >> 8, manyBig & 0xff]);
  const oneEvent = Buffer.concat([Buffer.from([0x81, 0xa1, 0x6e]), msgpackBigInt(32 * 1024)]);
  shapes.push({
    name: `MessagePack ${manyBig} BigInts of 32 KiB`,
    contentType: "application/msgpack",
    encoding: "gzip",
    body: gzip(Buffer.concat([arrayHead, ...Array(manyBig).fill(oneEvent)])),
    expect: [406],
  });

  shapes.push({ name: "JSON integer of 200,000 digits", contentType: "application/json", body: b(`{"n":${"7".repeat(200_000)}}`), expect: [202], events: 1 });
  const bigInts = Math.floor(Math.min(limit, 20 * MIB) / 100_010);
  shapes.push({
    name: `JSON ${bigInts} integers of 100,000 digits (gzip)`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(
      `[${Array(bigInts)
        .fill(`{"n":${"3".repeat(100_000)}}`)
        .join(",")}]`,
    ),
    expect: [202, 413],
    events: bigInts,
  });

  // Nesting one level under INGEST_MAX_DEPTH (64), repeated until the body is near the limit.
  const nest = `{"a":${"[".repeat(62)}1${"]".repeat(62)}}`;
  const nestCount = Math.floor((limit * 0.9) / (nest.length + 1));
  shapes.push({
    name: `JSON ${nestCount} events nested 63 deep (gzip)`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b(`[${nest}`), b(`,${nest}`), nestCount - 1, b("]"))),
    expect: [413],
  });

  shapes.push({
    name: `gzip bomb inflating to exactly the limit (${limit} bytes: {} and spaces)`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b("{}"), b(" "), limit - 2, b(""))),
    expect: [202],
    events: 1,
  });
  shapes.push({
    name: "gzip bomb one byte over the limit",
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b("{}"), b(" "), limit - 1, b(""))),
    expect: [413],
  });
  const stringBytes = limit - MIB;
  shapes.push({
    name: `gzip body inflating to one string of ${stringBytes} bytes`,
    contentType: "application/json",
    encoding: "gzip",
    body: gzip(repeat(b('{"s":"'), b("a"), stringBytes - 8, b('"}'))),
    expect: [413],
  });
  return shapes;
}
