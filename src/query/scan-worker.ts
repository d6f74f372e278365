// A scan thread's side (query/scan-pool.ts; calls and answers through rpc.ts): each call counts a
// batch of blocks (query/scan.ts) and answers with the counts. No state, no I/O.
import { serve } from "../rpc";
import { countBlocks, type CountRequest, type Counts } from "./scan";

serve<CountRequest, Counts, string>(countBlocks, { wire: (error) => (error instanceof Error ? error.message : String(error)) });
