// Blocks and filters into their tables (drizzle/0005, 0007, 0010, 0011): the one place that writes
// them, for the sealer's transaction (store/sealer.ts) and the seal threads' own connections
// (store/seal-worker.ts). May touch: log_blocks, log_filters.
import { type Block, type Filter, textArray } from "./blocks";
import type { Sql } from "./db";

/**
 * INSERTs blocks into log_blocks and filters into log_filters (one statement each: a payload is up
 * to a few MB). `generation`: staged blocks of that hot generation, invisible to readers until the
 * sealer makes them visible (store/sealer.ts); null: visible at their commit.
 */
export async function writeBlocks(sql: Sql, items: readonly (Block | Filter)[], generation: number | null = null): Promise<void> {
  for (const item of items) {
    if (item.kind === "filter") {
      await sql.unsafe(
        `insert into log_filters (id, source_id, min_dt, max_dt, blocks, bits, slices)
         values ($1::bigint, $2::bigint, $3::text::timestamptz, $4::text::timestamptz, $5::int, $6::int, $7::bytea)`,
        [
          item.id,
          item.sourceId,
          item.minDt,
          item.maxDt,
          item.blocks,
          item.bits,
          Buffer.from(item.slices.buffer, item.slices.byteOffset, item.slices.byteLength),
        ] as never[],
      );
      continue;
    }
    const block = item;
    await sql.unsafe(
      `insert into log_blocks (source_id, min_dt, max_dt, min_id, max_id, n, payload, filter_id, filter_slot, hist_minutes, hist_levels, hist_counts, generation, fields)
       values ($1::bigint, $2::text::timestamptz, $3::text::timestamptz, $4::bigint, $5::bigint, $6::int, $7::bytea, $8::bigint, $9::int,
         $10::text::bigint[], $11::text::text[], $12::text::int[], $13::bigint, $14::text::jsonb)`,
      [
        block.sourceId,
        block.minDt,
        block.maxDt,
        block.minId,
        block.maxId,
        block.n,
        Buffer.from(block.payload.buffer, block.payload.byteOffset, block.payload.byteLength),
        block.filterId,
        block.filterSlot,
        `{${block.histMinutes.join(",")}}`,
        textArray(block.histLevels),
        `{${block.histCounts.join(",")}}`,
        generation,
        block.fields,
      ] as never[],
    );
  }
}
