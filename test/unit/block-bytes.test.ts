// What a sealed block stores, byte for byte: the payload's text (codec/pgp.ts openPayload), its
// length (the deflate level and the frame), the histogram arrays, the field summary and the
// filters, for blocks built from a few thousand of bench/corpus.ts's events (plus the jsonb cases
// and the summary's edge cases) through jsonbText, BlockBuilder and buildBlocks. The expected
// digests in test/fixtures/block-bytes.json were written by the build as it was before its CPU cost
// was cut (store/blocks.ts, codec/pgp.ts, store/summary.ts, codec/jsonb-text.ts): a faster build
// must store the same bytes. Only the payload's random OpenPGP prefix differs between builds.
// WRITE_BLOCK_FIXTURE=1 rewrites the fixture (only for a deliberate change of the stored format).
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { realisticEvent, rng } from "../../bench/corpus";
import { jsonbText } from "../../src/codec/jsonb-text";
import { openPayload } from "../../src/codec/pgp";
import { type Block, BlockBuilder, buildBlocks, type Filter, type MovedRow } from "../../src/store/blocks";
import { JSONB_CASES } from "../fixtures/jsonb-text-cases";

const FIXTURE = new URL("../fixtures/block-bytes.json", import.meta.url);
const sha = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex").slice(0, 32);

/** Objects whose summaries take the careful paths (store/summary.ts): zero fractions, nines, big and negative integers, odd keys, depth, arrays, escapes. */
const SUMMARY_EDGES = [
  `{"n":200.0,"m":200,"level":"INFO"}`,
  `{"n":200,"m":"200"}`,
  `{"n":0.99999999999999999999,"m":1}`,
  `{"n":-0,"m":-0.0,"k":-7,"big":12345678901,"neg":-1000000000}`,
  `{"10":"a","2":"b","x":"c","__proto__":"d","a.b":1,"é":2,"0":true,"4294967295":1,"01":2}`,
  `{"a":{"b":{"c":{"d":{"e":1}}}},"f":{"g":null,"h":false}}`,
  `{"s":"${"s".repeat(70)}","t":"${"t".repeat(64)}"}`,
  `{"arr":[1,2],"obj":{"x":1},"level":"Warn"}`,
  `{"obj":[1],"arr":{"x":2}}`,
  `{"e":"a\\"b\\\\c\\nd","u":"\\u00e9t\\u00e9","w":"\\ud83d\\ude00"}`,
  `{"num":1e3,"frac":1.50e1,"tiny":1e-2,"exp":12E-1}`,
  `{${Array.from({ length: 150 }, (_, k) => `"k${k}":${k % 3}`).join(",")}}`,
  ...Array.from({ length: 30 }, (_, k) => `{"v":${k},"w":"value ${k % 5}","level":"${["DEBUG", "info", "Error"][k % 3]}"}`),
];

/** Rows of three sources over two UTC days (a few out of order), and a fourth that also holds arrays and scalars (no summary). */
function rows(): MovedRow[] {
  const r = rng(0x5eed);
  const start = Date.parse("2026-11-27T22:30:00Z");
  const texts: { source: string; json: string }[] = [];
  for (let i = 0; i < 3000; i++) texts.push({ source: String(i % 3), json: JSON.stringify(realisticEvent(r, start + i * 2400, i)) });
  for (const [k, json] of SUMMARY_EDGES.entries()) texts.splice(37 * k + 5, 0, { source: String(k % 2), json });
  for (const [k, { json }] of JSONB_CASES.entries()) texts.push({ source: "9", json }, { source: "9", json: SUMMARY_EDGES[k % SUMMARY_EDGES.length]! });
  return texts.map(({ source, json }, k) => {
    const { line, shape, level } = jsonbText(json);
    // Mostly in time order; every 11th event is 50 s late, so blocks and minutes interleave.
    const ms = start + k * 2400 - (k % 11 === 0 ? 50_000 : 0) + (k % 7);
    const dt = `${new Date(ms).toISOString().slice(0, 23)}${String(k % 1000).padStart(3, "0")}Z`;
    return { id: String(1_000_000 + k * 3), source_id: source, dt, line, shape, level };
  });
}

function digest(items: (Block | Filter)[]): string[] {
  return items.map((item) => {
    if (item.kind === "filter") return `filter ${item.id} ${item.sourceId} ${item.minDt} ${item.maxDt} ${item.blocks} ${item.bits} ${sha(item.slices)}`;
    const text = openPayload(item.payload);
    const hist = JSON.stringify([item.histMinutes, item.histLevels, item.histCounts]);
    return [
      `block ${item.sourceId} ${item.minDt} ${item.maxDt} ${item.minId} ${item.maxId} ${item.n} ${item.filterId} ${item.filterSlot}`,
      `text ${sha(text)} ${text.length} payload ${item.payload.length} hist ${sha(hist)} fields ${item.fields === null ? "null" : sha(item.fields)}`,
    ].join(" | ");
  });
}

function built(): { memory: string[]; readBack: string[] } {
  const all = rows();
  const builders = new Map<string, BlockBuilder>();
  const memory: (Block | Filter)[] = [];
  for (const row of all) {
    const key = `${row.source_id} ${row.dt.slice(0, 10)}`;
    let builder = builders.get(key);
    if (!builder) builders.set(key, (builder = new BlockBuilder(150)));
    memory.push(...builder.add(row));
  }
  for (const builder of builders.values()) memory.push(...builder.close());
  return { memory: digest(memory), readBack: digest(buildBlocks(all, 250)) };
}

test("blocks built from corpus events store the same text, histograms, summaries and filters as the fixture", () => {
  const now = built();
  if (process.env.WRITE_BLOCK_FIXTURE === "1") writeFileSync(FIXTURE, `${JSON.stringify(now, null, 1)}\n`);
  const expected = JSON.parse(readFileSync(FIXTURE, "utf8")) as Record<string, string[]>;
  expect(now.memory.length).toBeGreaterThan(20);
  expect(now.memory.some((line) => line.endsWith("fields null"))).toBe(true);
  expect(now.memory.filter((line) => line.startsWith("filter")).length).toBeGreaterThan(3);
  expect(now.memory).toEqual(expected.memory!);
  expect(now.readBack).toEqual(expected.readBack!);
});
