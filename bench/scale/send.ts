// One sender process of bench/workers.ts: POSTs its part of the corpus's request bodies (every
// `of`-th from `index`, bench/scale/load.ts) so that the load is not bounded by one process's
// event loop. Reads a JSON job from argv[2], its bodies into memory, prints "ready", waits for a
// line on stdin (the go, so that every sender starts at once and reading the file is not timed),
// then prints one JSON line, its Load, when done.
//   bun bench/scale/send.ts '{"ingestUrl":…,"sources":[…],"file":…,"n":…,"order":"time","cumulative":[…],"senders":8,"batch":1000,"index":0,"of":4}'
import type { Plan } from "./corpus";
import { bodiesOf, post } from "./load";
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
const bodies = await bodiesOf(job.file, plan, job.batch, { index: job.index, of: job.of });
console.log("ready");
for await (const _ of console) break;
const done = await post(job.ingestUrl, job.sources, bodies[Symbol.iterator](), { senders: job.senders }, `${job.index + 1}/${job.of}`);
console.log(JSON.stringify(done));
