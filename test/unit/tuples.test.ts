// The binary COPY row format (codec/tuples.ts): what the encoder writes, the flusher's ids, and the
// readers (tail, dead letters, spill) see the same fields; a wrong count or a torn buffer throws.
import { expect, test } from "bun:test";
import { eventMicros } from "../../src/codec/time";
import {
  fieldsOf,
  fromText,
  routeTuples,
  idOf,
  setIds,
  sourceOf,
  toText,
  tupleCount,
  tupleHead,
  tuplesOf,
  writeTuple,
  COPY_HEADER,
  COPY_TRAILER,
  TUPLE_HEAD,
} from "../../src/codec/tuples";

function tuples(...events: { source: number; dt: string; json: string }[]): Buffer {
  const out = Buffer.alloc(events.reduce((sum, e) => sum + TUPLE_HEAD + e.json.length * 3, 0));
  let at = 0;
  for (const e of events) at += writeTuple(out, at, tupleHead(e.source), eventMicros(e.dt)!, e.json);
  return out.subarray(0, at);
}

test("fields read back as written, ids set in place from firstId", () => {
  const rows = tuples(
    { source: 1, dt: "2026-11-22T10:00:00.123456Z", json: '{"a":1}' },
    { source: 2 ** 40, dt: "0001-01-01T00:00:00.000000Z", json: '{"ünï":"😀 \\\\ \\t"}' },
    { source: 3, dt: "9999-12-31T23:59:59.999999Z", json: "{}" },
  );
  expect(tupleCount(rows)).toBe(3);
  setIds(rows, 3, 2 ** 50);
  const all = tuplesOf(rows);
  expect(all.map(idOf)).toEqual([2 ** 50, 2 ** 50 + 1, 2 ** 50 + 2]);
  expect(all.map(sourceOf)).toEqual([1, 2 ** 40, 3]);
  expect(all.map((t) => fieldsOf(t).raw)).toEqual(['{"a":1}', '{"ünï":"😀 \\\\ \\t"}', "{}"]);
  expect(all.map((t) => toText(t).split("\t")[2])).toEqual(["2026-11-22T10:00:00.123456Z", "0001-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z"]);
  // COPY text doubles backslashes; fromText undoes it and keeps the ids.
  expect(toText(all[1]!)).toBe(`${2 ** 50 + 1}\t${2 ** 40}\t0001-01-01T00:00:00.000000Z\t{"ünï":"😀 \\\\\\\\ \\\\t"}\n`);
  expect(Buffer.from(fromText(all.map(toText).join(""), true))).toEqual(Buffer.from(rows));
});

test("a count that does not match the bytes, or bytes that are not tuples, throw", () => {
  const rows = tuples({ source: 1, dt: "2026-11-22T10:00:00Z", json: "{}" }, { source: 1, dt: "2026-11-22T10:00:00Z", json: "{}" });
  expect(() => setIds(rows, 3, 1)).toThrow(/said 3 events but hold 2/);
  expect(() => setIds(rows, 1, 1)).toThrow(/hold more/);
  expect(() => tupleCount(rows.subarray(0, rows.length - 1))).toThrow(/not a logpond COPY tuple/);
  expect(() => tuplesOf(Buffer.from("1\t2026-11-22T10:00:00Z\t{}\n".repeat(3)))).toThrow(/not a logpond COPY tuple/);
  expect(() => fromText("1\t{}\n", false)).toThrow(/not a COPY text line/);
  expect(() => fromText("1\tsoon\t{}\n", false)).toThrow(/not a COPY text time/);
  expect(tupleCount(new Uint8Array(0))).toBe(0);
});

test("the COPY header and trailer are PostgreSQL's binary signature and end marker", () => {
  expect(Buffer.from(COPY_HEADER).toString("latin1", 0, 11)).toBe("PGCOPY\n\xff\r\n\0");
  expect(COPY_HEADER.length).toBe(19);
  expect([...COPY_TRAILER]).toEqual([0xff, 0xff]);
});

test("routeTuples: every (source, UTC day) goes to one way whatever batch brings it, each way's tuples in the order they came, none lost", () => {
  const events = [];
  for (let i = 0; i < 400; i++) {
    const source = 1 + (i % 7);
    const day = ["2026-11-20", "2026-11-21", "2026-11-22"][(i >> 2) % 3]!;
    const time = `${day}T${String(i % 24).padStart(2, "0")}:00:00.000001Z`;
    events.push({ source, dt: i % 5 === 0 ? `${day}T23:59:59.999999Z` : i % 11 === 0 ? `${day}T00:00:00Z` : time, json: `{"i":${i}}` });
  }
  const whole = tuples(...events);
  const ways = 3;
  const wayOf = new Map<string, number>();
  // Two batches of different cuts: the same (source, day) lands in the same way in both.
  for (const batch of [
    [whole],
    [
      whole.subarray(
        0,
        tuplesOf(whole)
          .slice(0, 150)
          .reduce((sum, t) => sum + t.byteLength, 0),
      ),
      whole.subarray(
        tuplesOf(whole)
          .slice(0, 150)
          .reduce((sum, t) => sum + t.byteLength, 0),
      ),
    ],
  ]) {
    const parts = routeTuples(batch, ways);
    expect(parts.length).toBe(ways);
    expect(parts.reduce((sum, part) => sum + part.byteLength, 0)).toBe(whole.byteLength);
    const seen: number[] = [];
    for (const [way, part] of parts.entries()) {
      let last = -1;
      for (const tuple of tuplesOf(part)) {
        const { sourceId, dt, raw } = fieldsOf(tuple);
        const key = `${sourceId} ${toText(tuple).split("\t")[2]!.slice(0, 10)}`;
        expect(wayOf.get(key) ?? way).toBe(way);
        wayOf.set(key, way);
        const i = JSON.parse(raw).i as number;
        expect(i).toBeGreaterThan(last);
        last = i;
        seen.push(i);
        expect(typeof dt).toBe("number");
      }
    }
    expect(seen.sort((a, b) => a - b)).toEqual(events.map((_, i) => i));
  }
  expect(wayOf.size).toBe(21);
  // The 21 source-days are spread, not all on one way.
  expect(new Set(wayOf.values()).size).toBe(ways);
  expect(routeTuples([whole], 1)[0]).toEqual(new Uint8Array(whole));
});
