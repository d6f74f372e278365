// query/scan.ts lowerAscii, four bytes at a time, against the rule it keeps: ASCII capitals
// lowered, every other byte (UTF-8's multibyte ones ≥ 0x80 included) unchanged, at every length
// and alignment.
import { expect, test } from "bun:test";
import { lowerAscii } from "../../src/query/scan";

const byByte = (text: Buffer) => Buffer.from(text.map((c) => (c >= 0x41 && c <= 0x5a ? c + 0x20 : c)));

test("every byte value, in every position of a word", () => {
  const all = Buffer.from(Array.from({ length: 256 * 4 + 3 }, (_, i) => i % 256));
  for (let shift = 0; shift < 4; shift++) {
    const text = all.subarray(shift);
    expect(lowerAscii(text)).toEqual(byByte(text));
  }
});

test("every length up to a few words, and UTF-8 text", () => {
  const text = Buffer.from('{"Message": "GET /Ärger/ÀÉ ok", "Level": "ERROR", "x": "Zz@[`{"}');
  for (let length = 0; length <= text.length; length++) {
    const part = text.subarray(0, length);
    const lowered = lowerAscii(part);
    expect(lowered.length).toBe(length);
    expect(lowered).toEqual(byByte(part));
  }
  expect(lowerAscii(text).toString("utf8")).toBe('{"message": "get /Ärger/ÀÉ ok", "level": "error", "x": "zz@[`{"}');
});

test("the input is left as it was", () => {
  const text = Buffer.from("ABC def GHI");
  lowerAscii(text);
  expect(text.toString()).toBe("ABC def GHI");
});
