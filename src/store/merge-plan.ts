// Which of one (source, UTC day)'s visible blocks a merge rewrites (store/merge.ts). Pure.
// A run is a set of blocks merged in one transaction into blocks cut by buildBlocks (store/blocks.ts):
// even, non-overlapping, up to BLOCK_EVENTS each. A run must be closed in two ways, or its new
// blocks would break what the day's other blocks rely on:
// - in time: its new blocks span its blocks' whole range, so every block whose range meets that
//   span is in the run (else they would overlap it);
// - in filters: a log_filters row belongs to the blocks that share it (all of one source and day);
//   its id is its first block's min_id, an event id the merge moves into a new block, whose own
//   filter may take that id. So a run takes all of a filter's blocks, and its filters go with it.
// Blocks at least half full that overlap nothing are left alone: buildBlocks never cuts smaller
// than that from more than a block's events, so a merged day is not rewritten again.
// A segment of more than maxEvents (or maxBytes: blocks overlapping in a chain, as when a load sends
// a whole day's times at once and seal threads cut blocks side by side) cannot be merged in one
// bounded transaction. It is split instead: a run of its blocks that cross a slice of the day
// (SLICES_MINUTES, the widest whose share of the segment fits half a run) is rewritten as blocks that
// each stay inside one slice. Once no block crosses a slice, the day falls apart into slice-sized
// segments, merged as any other at the next passes.

export interface BlockInfo {
  /** The block's smallest event id: names it (each event is in one block). */
  minId: string;
  /** RFC 3339 UTC text with six fraction digits: sorts as the time does. */
  minDt: string;
  maxDt: string;
  n: number;
  filterId: string | null;
  /** What it takes in the table (its payload or v3 body, compressed): bounds a run's memory beside its events. */
  bytes?: number;
}

export interface PlanOptions {
  /** Events per block (BLOCK_EVENTS). */
  blockEvents: number;
  /** Events one run holds at most (the transaction's bound): a longer run is cut at a segment's end; a longer segment is split. */
  maxEvents: number;
  /** Stored bytes one run holds at most, the same way (none: no bound). */
  maxBytes?: number;
  /** Blocks a run needs before it is merged (the current day's: 2 for a past day). */
  minBlocks: number;
}

export interface Run {
  blocks: BlockInfo[];
  /** Null: merged into even blocks; else rewritten as blocks that each stay inside one slice of the day this many minutes wide. */
  sliceMinutes: number | null;
  /** Whether any of its blocks overlap: merging them is worth it even if it makes no fewer blocks. */
  overlaps: boolean;
}

export interface Plan {
  runs: Run[];
  /** Segments left alone: one slice of the day holds more than maxEvents, or a filter's blocks do. */
  tooBig: number;
}

/** Slice widths, in minutes: each divides the one before it, so a block inside a wide slice is inside none of the narrower ones' boundaries only when it must be. */
export const SLICES_MINUTES = [1440, 720, 360, 180, 90, 45, 15, 5, 1] as const;

/** The slice of the day a time falls in ("YYYY-MM-DDTHH:MM…"). */
export function sliceOf(dt: string, minutes: number): number {
  const t = dt.indexOf("T");
  const minute = (dt.charCodeAt(t + 1) - 48) * 600 + (dt.charCodeAt(t + 2) - 48) * 60 + (dt.charCodeAt(t + 4) - 48) * 10 + (dt.charCodeAt(t + 5) - 48);
  return Math.floor(minute / minutes);
}

/**
 * The runs worth merging among one source-day's blocks. Segments are the smallest pieces the day
 * can be cut into (closed in time and in filters); a segment is settled when it has one block at
 * least half full, or several that overlap nothing and are all at least half full. Runs are the
 * unsettled segments that follow one another, cut at maxEvents.
 */
export function planMerges(blocks: readonly BlockInfo[], options: PlanOptions): Plan {
  const sorted = [...blocks].sort((a, b) => (a.minDt < b.minDt ? -1 : a.minDt > b.minDt ? 1 : a.maxDt < b.maxDt ? -1 : a.maxDt > b.maxDt ? 1 : 0));
  // The last index of each filter: a cut before it would split the filter's blocks.
  const lastOfFilter = new Map<string, number>();
  sorted.forEach((block, i) => {
    if (block.filterId !== null) lastOfFilter.set(block.filterId, i);
  });
  const segments: { blocks: BlockInfo[]; overlaps: boolean }[] = [];
  let current: BlockInfo[] = [];
  let reach = ""; // the greatest max_dt so far in the segment
  let mustReach = -1; // the segment must go on to this index (a filter's last block)
  let overlaps = false;
  sorted.forEach((block, i) => {
    if (current.length > 0 && block.minDt < reach) overlaps = true;
    current.push(block);
    if (block.maxDt > reach) reach = block.maxDt;
    if (block.filterId !== null) mustReach = Math.max(mustReach, lastOfFilter.get(block.filterId)!);
    const next = sorted[i + 1];
    // A cut here if the next block starts at or after everything so far ends (touching is not overlapping) and no filter spans it.
    if (!next || (next.minDt >= reach && mustReach <= i)) {
      segments.push({ blocks: current, overlaps });
      current = [];
      reach = "";
      overlaps = false;
    }
  });

  const half = Math.ceil(options.blockEvents / 2);
  const settled = (segment: { blocks: BlockInfo[]; overlaps: boolean }) => !segment.overlaps && segment.blocks.every((block) => block.n >= half);
  const plan: Plan = { runs: [], tooBig: 0 };
  let run: BlockInfo[] = [];
  let runShare = 0;
  let runOverlaps = false;
  const close = () => {
    if (run.length >= Math.max(2, options.minBlocks)) plan.runs.push({ blocks: run, sliceMinutes: null, overlaps: runOverlaps });
    run = [];
    runShare = 0;
    runOverlaps = false;
  };
  // A block's share of what one run may hold: by its events or its stored bytes, whichever is more.
  const weight = (blocks: readonly BlockInfo[]) =>
    blocks.reduce((sum, block) => sum + Math.max(block.n / options.maxEvents, (block.bytes ?? 0) / (options.maxBytes ?? Infinity)), 0);
  for (const segment of segments) {
    const share = weight(segment.blocks);
    if (settled(segment)) {
      close();
      continue;
    }
    if (share > 1) {
      close();
      const split = splitRuns(segment.blocks, share, weight);
      if (split.length === 0) plan.tooBig++;
      plan.runs.push(...split);
      continue;
    }
    if (runShare + share > 1) close();
    run.push(...segment.blocks);
    runShare += share;
    runOverlaps ||= segment.overlaps;
  }
  close();
  return plan;
}

/**
 * Runs that split a segment too big to merge: the blocks crossing a slice's boundary (a filter's
 * blocks together: they cross one when they are not all in one slice), in runs of at most maxEvents. None: no block crosses one
 * (one slice holds more than maxEvents: left alone).
 */
function splitRuns(blocks: readonly BlockInfo[], share: number, weight: (blocks: readonly BlockInfo[]) => number): Run[] {
  const width = SLICES_MINUTES.find((minutes) => (share * minutes) / 1440 <= 1 / 2) ?? 1;
  const units = new Map<string, BlockInfo[]>();
  for (const block of blocks) {
    const key = block.filterId ?? `block ${block.minId}`;
    const unit = units.get(key);
    if (unit) unit.push(block);
    else units.set(key, [block]);
  }
  const runs: Run[] = [];
  let run: BlockInfo[] = [];
  let runShare = 0;
  for (const unit of units.values()) {
    const slices = new Set(unit.flatMap((block) => [sliceOf(block.minDt, width), sliceOf(block.maxDt, width)]));
    if (slices.size === 1) continue; // inside one slice already
    const unitShare = weight(unit);
    if (unitShare > 1) continue;
    if (runShare + unitShare > 1) {
      runs.push({ blocks: run, sliceMinutes: width, overlaps: true });
      run = [];
      runShare = 0;
    }
    run.push(...unit);
    runShare += unitShare;
  }
  if (run.length > 0) runs.push({ blocks: run, sliceMinutes: width, overlaps: true });
  return runs;
}
