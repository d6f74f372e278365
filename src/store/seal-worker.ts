// A seal thread (store/seal-pool.ts; calls and answers through rpc.ts): a chunk of hot rows in (packed),
// its blocks and filters out (store/blocks.ts: ordering, the filters, deflate and the payload's
// frame), each payload and filter in a buffer of its own, transferred. Runs buildBlocks and
// nothing else: the connection and the transaction stay with the sealer.
import { threadId } from "node:worker_threads";
import { buildBlocks, type Block, type Filter } from "./blocks";
import { unpackRows, type Built, type Chunk } from "./seal-pool";
import { serve } from "../rpc";

serve<Chunk, Built, string>((chunk) => ({ items: buildBlocks(unpackRows(chunk), chunk.maxEvents), thread: threadId }), {
  wire: (error) => (error instanceof Error ? error.message : String(error)),
  // Each payload and filter owns its buffer (codec/pgp.ts, codec/grams.ts).
  transfer: (built) => built.items.map((item: Block | Filter) => (item.kind === "block" ? item.payload : item.slices).buffer as ArrayBuffer),
});
