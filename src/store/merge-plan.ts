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

export interface BlockInfo {
  /** The block's smallest event id: names it (each event is in one block). */
  minId: string;
  /** RFC 3339 UTC text with six fraction digits: sorts as the time does. */
  minDt: string;
  maxDt: string;
  n: number;
  filterId: string | null;
}

export interface PlanOptions {
  /** Events per block (BLOCK_EVENTS). */
  blockEvents: number;
  /** Events one run holds at most (the transaction's bound): a longer run is cut at a segment's end; a segment longer than this is left alone. */
  maxEvents: number;
  /** Blocks a run needs before it is merged (the current day's: 2 for a past day). */
  minBlocks: number;
}

export interface Plan {
  runs: BlockInfo[][];
  /** Segments left alone because they hold more than maxEvents (a long chain of overlapping blocks). */
  tooBig: number;
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
  let runEvents = 0;
  const close = () => {
    if (run.length >= Math.max(2, options.minBlocks)) plan.runs.push(run);
    run = [];
    runEvents = 0;
  };
  for (const segment of segments) {
    const events = segment.blocks.reduce((sum, block) => sum + block.n, 0);
    if (settled(segment)) {
      close();
      continue;
    }
    if (events > options.maxEvents) {
      close();
      plan.tooBig++;
      continue;
    }
    if (runEvents + events > options.maxEvents) close();
    run.push(...segment.blocks);
    runEvents += events;
  }
  close();
  return plan;
}
