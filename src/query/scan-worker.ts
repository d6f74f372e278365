// A scan thread's side (query/scan-pool.ts; calls and answers through rpc.ts): each call counts a
// batch of blocks for a histogram, finds a page's events in it or tallies an aggregation's fields (query/scan.ts) and answers with
// them. No state, no I/O.
import { serve } from "../rpc";
import { countBlocks, matchBlocks, tallyBlocks } from "./scan";
import type { ScanCall } from "./scan-pool";

serve<ScanCall, unknown, string>(
  (call) => (call.kind === "count" ? countBlocks(call.request) : call.kind === "match" ? matchBlocks(call.request) : tallyBlocks(call.request)),
  {
    wire: (error) => (error instanceof Error ? error.message : String(error)),
  },
);
