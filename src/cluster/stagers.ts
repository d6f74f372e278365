// The memory path with ingest workers (SEAL_FROM=memory, docs/scaling.md): each worker stages the
// batches it commits (store/staging.ts, on its own seal threads), and the supervisor's sealer asks
// them all as one (stagerGroup) over IPC. A worker's staged blocks of a generation are trusted only
// when the process that answers finish() is the one that heard of the generation's opening before
// the close committed: a worker that was replaced since (its predecessor's staged blocks are
// nobody's to vouch for), or that did not answer the opening in time, makes the whole generation
// read back, its staged blocks deleted (store/sealer.ts). Missing costs a read-back, never an event.
// May touch: nothing itself (messages to the workers: cluster/supervisor.ts sends them).
import type { Stager } from "../store/staging";
import type { StageAnswer, StageCall } from "./worker";

/** How long a close waits for a worker to hear of the generation it opens (it holds the close's transaction). */
export const OPENING_TIMEOUT_MS = 2_000;
/** How long a seal waits for a worker's last blocks of a generation (behind its threads' queue). */
export const FINISH_TIMEOUT_MS = 120_000;

/** A worker slot as the stager sees it: its process now, and a call to it (undefined: no answer, or it exited). */
export interface StageTarget {
  readonly index: number;
  /** The PID of its process listening now; undefined while it is being started again. */
  pid(): number | undefined;
  ask(call: StageCall, timeoutMs: number): Promise<StageAnswer | undefined>;
}

/** The Stager of one worker slot: its process's Staging, over IPC. */
export function workerStager(target: StageTarget): Stager {
  /** Generation → the PID of the process that heard of its opening before the close committed, or why none did. */
  const heard = new Map<number, number | string>();
  return {
    async opening(start) {
      const pid = target.pid();
      if (pid === undefined) {
        heard.set(start, "was not listening when the generation opened");
        return;
      }
      const answer = await target.ask({ kind: "opening", start }, OPENING_TIMEOUT_MS);
      if (answer !== null) heard.set(start, `did not answer the generation's opening within ${OPENING_TIMEOUT_MS} ms`);
      else heard.set(start, target.pid() === pid ? pid : "was started again while the generation opened");
    },
    known(starts) {
      for (const generation of heard.keys()) if (!starts.includes(generation)) heard.delete(generation);
      if (target.pid() !== undefined) void target.ask({ kind: "known", starts: [...starts] }, OPENING_TIMEOUT_MS);
    },
    async finish(generation) {
      const pid = heard.get(generation) ?? "had not started when the generation opened";
      if (typeof pid === "string") return `ingest worker ${target.index} ${pid}`;
      if (target.pid() !== pid) return `ingest worker ${target.index} was started again since the generation opened`;
      const answer = await target.ask({ kind: "finish", generation }, FINISH_TIMEOUT_MS);
      if (answer === undefined || answer === null) return `ingest worker ${target.index} exited or did not answer for the generation`;
      return answer;
    },
  };
}
