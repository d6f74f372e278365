// What a read-back seal builds of the rows it has read, and what it carries into the next chunk
// (store/sealer.ts sealRows). Pure.
// A seal reads a hot table in its physical order, which is only roughly time order: flushes that
// write at once interleave their batches' pages, so the next chunk holds events of a source-day
// older than the newest of this one. Built chunk by chunk as they come, the blocks at each chunk's
// edge overlap, a dense day becomes one overlapping chain and merges rewrite all of it
// (store/merge-plan.ts). So a chunk's rows are built only once the next chunk has been read: of
// each (source, UTC day), those older than the least time of the next chunk's rows of that day;
// the others are carried into the next chunk. Blocks then do not overlap wherever the disorder is
// shorter than a chunk (test/integration/seal-carry.test.ts).
// - A group is built only when at least half a block of it is older than that bound: blocks at
//   least half full that overlap nothing are what merges leave alone (store/merge-plan.ts), so a
//   sparse source's events are carried until they fill one.
// - A group the next chunk has none of is carried (its later events may still come), within the
//   bound on what is carried (`maxBytes`). Past it, what is carried is built down to half the
//   bound: first the groups the next chunk had none of, whole, then the oldest events of the
//   biggest groups (a straggler, an event far older than its neighbours in the table, lowers its
//   group's bound and so makes the whole group carried: only its block then overlaps the ones
//   built so, not the group's whole day).
import type { ReadRow } from "./seal-pool";

export interface Split {
  /** Rows to build now. */
  build: ReadRow[];
  /** Their lines' bytes. */
  buildBytes: number;
  /** Rows carried into the next chunk. */
  carry: ReadRow[];
  carryBytes: number;
}

const groupOf = (row: ReadRow) => `${row.source_id} ${row.dt.slice(0, 10)}`;

/**
 * Splits `pending` (read, not yet built) by `next` (the chunk read since; its rows are not in
 * either part). `maxBytes`: the lines' bytes carried at most, as the chunks count them.
 */
export function splitCarry(pending: readonly ReadRow[], next: readonly ReadRow[], maxEvents: number, maxBytes: number): Split {
  const least = new Map<string, string>();
  for (const row of next) {
    const key = groupOf(row);
    const dt = least.get(key);
    if (dt === undefined || row.dt < dt) least.set(key, row.dt);
  }
  const groups = new Map<string, ReadRow[]>();
  for (const row of pending) {
    const key = groupOf(row);
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  const half = Math.ceil(maxEvents / 2);
  const split: Split = { build: [], buildBytes: 0, carry: [], carryBytes: 0 };
  const carried: { rows: ReadRow[]; bytes: number; seen: boolean }[] = [];
  const build = (rows: readonly ReadRow[]) => {
    for (const row of rows) {
      split.build.push(row);
      split.buildBytes += row.size;
    }
  };
  for (const [key, rows] of groups) {
    const bound = least.get(key);
    const older = bound === undefined ? [] : rows.filter((row) => row.dt < bound);
    if (older.length >= half) {
      build(older);
      if (older.length === rows.length) continue;
    }
    const kept = older.length >= half ? rows.filter((row) => row.dt >= bound!) : rows;
    carried.push({ rows: kept, bytes: kept.reduce((sum, row) => sum + row.size, 0), seen: bound !== undefined });
  }
  let bytes = carried.reduce((sum, group) => sum + group.bytes, 0);
  if (bytes > maxBytes) {
    // Down to half the bound, so that the next chunks do not each build a sliver.
    carried.sort((a, b) => (a.seen !== b.seen ? (a.seen ? 1 : -1) : b.bytes - a.bytes));
    for (const group of carried) {
      if (bytes <= maxBytes / 2) break;
      if (!group.seen) {
        build(group.rows);
        bytes -= group.bytes;
        group.rows = [];
        group.bytes = 0;
        continue;
      }
      // Its oldest events: only an event of the next chunks older than them (a straggler) overlaps their blocks.
      group.rows.sort((a, b) => (a.dt < b.dt ? -1 : a.dt > b.dt ? 1 : 0));
      let taken = 0;
      let takenBytes = 0;
      while (taken < group.rows.length && (taken < half || bytes - takenBytes > maxBytes / 2)) takenBytes += group.rows[taken++]!.size;
      build(group.rows.slice(0, taken));
      group.rows = group.rows.slice(taken);
      group.bytes -= takenBytes;
      bytes -= takenBytes;
    }
  }
  for (const group of carried) {
    for (const row of group.rows) split.carry.push(row);
    split.carryBytes += group.bytes;
  }
  return split;
}
