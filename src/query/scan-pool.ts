// The scan threads: a histogram with a query opens and counts its sealed v4 blocks here
// (query/scan.ts), on as many threads as the machine has cores, never on the HTTP thread. A call
// is one batch of blocks and goes to the thread with the fewest calls waiting; a thread that fails
// fails only its own calls, and the next call starts a new one (rpc.ts). Holds no data between calls.
import { availableParallelism } from "node:os";
import { ThreadClient } from "../rpc";
import type { CountRequest, Counts } from "./scan";

export class ScanPool {
  private readonly threads: ThreadClient<CountRequest, Counts, string>[] = [];

  constructor(readonly size: number = availableParallelism()) {}

  count(request: CountRequest): Promise<Counts> {
    while (this.threads.length < this.size) {
      this.threads.push(
        new ThreadClient<CountRequest, Counts, string>({
          url: new URL("./scan-worker.ts", import.meta.url).href,
          name: "scan thread",
          answered: (message) => new Error(`a scan thread failed: ${message}`),
          lost: (reason) => new Error(reason),
          unsent: (reason) => new Error(reason),
        }),
      );
    }
    const thread = this.threads.reduce((a, b) => (b.waiting < a.waiting ? b : a));
    return thread.call(request);
  }

  close(): void {
    for (const thread of this.threads.splice(0)) thread.close("the scan threads were closed");
  }
}
