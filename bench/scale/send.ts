// One sender process of bench/workers.ts: POSTs its part of the corpus's request bodies (every
// `of`-th from `index`, bench/scale/load.ts) so that the load is not bounded by one process's
// event loop. Reads a JSON job from argv[2]; prints one JSON line, its Load, when done.
//   bun bench/scale/send.ts '{"ingestUrl":…,"sources":[…],"file":…,"n":…,"order":"time","cumulative":[…],"senders":8,"batch":1000,"index":0,"of":4}'
import type { Plan } from "./corpus";
import { load } from "./load";
import type { Source } from "./service";

interface Job {
  ingestUrl: string;
  sources: Source[];
  file: string;
  n: number;
  order: Plan["order"];
  cumulative: number[];
  senders: number;
  batch: number;
  index: number;
  of: number;
}

const job = JSON.parse(process.argv[2]!) as Job;
// requestBodies needs the split and the order only; the needles are in the file already.
const plan: Plan = { t0: 0, n: job.n, order: job.order, cumulative: job.cumulative, needles: [], needleAt: new Map(), rareAt: new Set() };
const done = await load(job.ingestUrl, job.sources, job.file, plan, { senders: job.senders, batch: job.batch, part: { index: job.index, of: job.of } });
console.log(JSON.stringify(done));
