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
  expect(chunk.lengths.length).toBe(rows.length * 6);
  expect(unpackRows(chunk)).toEqual(rows);
  expect(unpackRows(packRows([], 1000))).toEqual([]);
});

test("rows read as bytes: the source and dt as text, the line's size in bytes; compacted rows keep their bytes in a buffer of their own", () => {
  const socket = new TextEncoder().encode('12 7 2026-11-27T10:00:00.000000Z {"m":"é"} m');
  const view = (from: number, to: number) => socket.subarray(from, to);
  const row = readRow([view(0, 2), view(3, 4), view(5, 32), view(33, 43), view(44, 45), null, new TextEncoder().encode("t")]);
  expect(row.source_id).toBe("7");
  expect(row.dt).toBe("2026-11-27T10:00:00.000000Z");
  expect(row.size).toBe(10);
  expect(row.fields).toHaveLength(6);
  const [compact] = compactRows([row]);
  socket.fill(0);
  expect(decodeRows([compact!])).toEqual([{ id: "12", source_id: "7", dt: "2026-11-27T10:00:00.000000Z", line: '{"m":"é"}', shape: "m", level: null }]);
});
