// Rows cross to a seal thread packed (store/seal-pool.ts): every field comes back as it was.
import { expect, test } from "bun:test";
import type { MovedRow } from "../../src/store/blocks";
import { packRows, unpackRows } from "../../src/store/seal-pool";

test("packed rows unpack to the same rows: empty fields, a null level, non-ASCII and astral characters, separators in the text", () => {
  const rows: MovedRow[] = [
    { id: "1", source_id: "7", dt: "2026-11-27T10:00:00.000000Z", line: '{"a":1}', shape: "a", level: null },
    { id: "2", source_id: "7", dt: "2026-11-27T10:00:00.000001Z", line: '{"m":"é 😀 \\u001e,"}', shape: "m", level: "warn" },
    { id: "3", source_id: "8", dt: "2026-11-27T10:00:00.000002Z", line: "[1,2]", shape: "", level: "😀\u001e" },
    { id: "9007199254740991", source_id: "8", dt: "2026-11-27T10:00:00.000003Z", line: '"x"', shape: "", level: null },
  ];
  const chunk = packRows(rows, 1000);
  expect(chunk.maxEvents).toBe(1000);
  expect(chunk.lengths.length).toBe(rows.length * 6);
  expect(unpackRows(chunk)).toEqual(rows);
  expect(unpackRows(packRows([], 1000))).toEqual([]);
});
