// bench/seal-build.ts's work, the same on every thread: 20,000 events' jsonb text and their blocks.
import { jsonbText } from "../src/codec/jsonb-text";
import { BlockBuilder, type MovedRow } from "../src/store/blocks";
import { realisticBatch } from "./corpus";

export const texts = realisticBatch(20_000, 0).map((event) => JSON.stringify(event));

/** µs per event of building every block; with `gc`, a full collection every 32 MiB handled (src/store/seal-worker.ts). */
export function buildFrom(gc: boolean): number {
  const started = performance.now();
  const builders = new Map<string, BlockBuilder>();
  let handled = 0;
  for (let i = 0; i < texts.length; i++) {
    const { line, shape, level } = jsonbText(texts[i]!);
    const row: MovedRow = { id: String(1000 + i), source_id: String(i % 3), dt: "2026-11-27T10:00:00.000000Z", line, shape, level };
    let builder = builders.get(row.source_id);
    if (!builder) builders.set(row.source_id, (builder = new BlockBuilder(1000)));
    builder.add(row);
    handled += texts[i]!.length * 3;
    if (gc && handled > 32 << 20) {
      handled = 0;
      Bun.gc(true);
    }
  }
  for (const builder of builders.values()) builder.close();
  return ((performance.now() - started) * 1000) / texts.length;
}
