// Rows cross to a seal thread packed (store/seal-pool.ts): every field comes back as it was, each line decoded on its own.
import { expect, test } from "bun:test";
import type { MovedRow } from "../../src/store/blocks";
import { compactRows, decodeRows, packRows, readRow, readRowOf, unpackRows } from "../../src/store/seal-pool";

test("packed rows unpack to the same rows: empty fields, a null level, non-ASCII and astral characters, separators in the text", () => {
  const rows: MovedRow[] = [
    { id: "1", source_id: "7", dt: "2026-11-27T10:00:00.000000Z", line: '{"a":1}', shape: "a", level: null },
    { id: "2", source_id: "7", dt: "2026-11-27T10:00:00.000001Z", line: '{"m":"é 😀 \\u001e,"}', shape: "m", level: "warn" },
    { id: "3", source_id: "8", dt: "2026-11-27T10:00:00.000002Z", line: "[1,2]", shape: "", level: "😀\u001e" },
    { id: "9007199254740991", source_id: "8", dt: "2026-11-27T10:00:00.000003Z", line: '"x"', shape: "", level: null },
  ];
  const chunk = packRows(rows.map(readRowOf), 1000);
  expect(chunk.maxEvents).toBe(1000);
  expect(chunk.rows).toBe(rows.length);
  expect(unpackRows(chunk)).toEqual(rows);
  expect(unpackRows(packRows([], 1000))).toEqual([]);
});

test("rows read as bytes: one view of the DataRow message when postgres.js's fields lie in it in order, else copied; compacted rows own their bytes", () => {
  // A DataRow message as PostgreSQL sends it: type, length, field count, then each field's length and bytes (-1: null).
  const values = ["12", "7", "2026-11-27T10:00:00.000000Z", '{"m":"é"}', "m", null, "t"].map((v) => (v === null ? null : Buffer.from(v)));
  const message = Buffer.alloc(7 + values.reduce((sum, v) => sum + 4 + (v?.length ?? 0), 0));
  let at = 7;
  const fields: (Buffer | null)[] = [];
  for (const value of values) {
    at = message.writeInt32BE(value ? value.length : -1, at);
    if (!value) {
      fields.push(null);
      continue;
    }
    value.copy(message, at);
    fields.push(message.subarray(at, (at += value.length)));
  }
  const row = readRow(fields);
  expect([row.source_id, row.dt, row.size]).toEqual(["7", "2026-11-27T10:00:00.000000Z", 10]);
  expect(row.wire.buffer).toBe(message.buffer);
  const moved = { id: "12", source_id: "7", dt: "2026-11-27T10:00:00.000000Z", line: '{"m":"é"}', shape: "m", level: null };
  // Fields that are not laid out as in a message are copied.
  const apart = readRow(values.map((v) => (v === null ? null : Buffer.from(v))));
  expect(apart.wire.buffer).not.toBe(message.buffer);
  expect(decodeRows([apart])).toEqual([moved]);
  const [compact] = compactRows([row]);
  message.fill(0);
  expect(decodeRows([compact!])).toEqual([moved]);
});
