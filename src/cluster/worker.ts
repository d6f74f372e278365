// An ingest worker's side of its supervisor (cluster/supervisor.ts): it says when it listens, and
// on which port; it reports its counters and its ingestion series every second; it flushes its
// buffer, and answers its memory path's calls (cluster/stagers.ts), when asked; it stops, as SIGTERM
// does, when its supervisor is gone (the IPC channel closes, or its parent changes), so no worker
// runs orphaned.
import { periodic, rethrow } from "../periodic";
import type { Finished } from "../store/seal-pool";
import type { Stager } from "../store/staging";

/** What a worker sends its supervisor. */
export type WorkerMessage =
  | { type: "ready"; port: number }
  | { type: "counters"; requests: number; events: number; families: string }
  | { type: "flushed"; id: number }
  | { type: "staged"; id: number; value: StageAnswer };

/**
 * What a supervisor asks of a worker: write what its buffer holds now (before a deletion sweep);
 * a call to its memory path's Staging (store/staging.ts), whose answer comes back as "staged".
 */
export type SupervisorMessage = { type: "flush"; id: number } | { type: "stage"; id: number; call: StageCall };

/** The Stager's calls, as data (the supervisor's side: cluster/stagers.ts). */
export type StageCall = { kind: "opening"; start: number } | { kind: "known"; starts: number[] } | { kind: "finish"; generation: number };
/** null: done (opening, known); the batches covered, or why the staged blocks cannot be trusted (finish). */
export type StageAnswer = Finished | string | null;

const REPORT_EVERY_MS = 1_000;

/**
 * `families`: the ingestion series of this process's scrape, as text (cluster/gather.ts);
 * `staging`: this worker's memory path (SEAL_FROM=memory), which the supervisor's sealer asks.
 */
export function reportToSupervisor(
  ingestUrl: string,
  ingested: () => { requests: number; events: number },
  families: () => string,
  flush: () => Promise<void>,
  stop: (why: string) => void,
  staging?: Stager,
): void {
  const send = (message: WorkerMessage) => {
    try {
      process.send?.(message);
    } catch {}
  };
  send({ type: "ready", port: Number(new URL(ingestUrl).port) });
  const parent = process.ppid;
  periodic({
    intervalMs: REPORT_EVERY_MS,
    fixedRate: true,
    run: async () => {
      // A supervisor killed outright may leave the channel open a moment; its PID goes at once.
      if (process.ppid !== parent) stop("the supervisor is gone");
      else send({ type: "counters", ...ingested(), families: families() });
    },
    failed: rethrow,
  });
  process.on("disconnect", () => stop("the supervisor is gone"));
  process.on("message", (message: SupervisorMessage) => {
    if (message.type === "flush") flush().then(() => send({ type: "flushed", id: message.id }));
    else if (message.type === "stage")
      answer(staging, message.call).then(
        (value) => send({ type: "staged", id: message.id, value }),
        (error: Error) => send({ type: "staged", id: message.id, value: `ingest worker: ${error.message}` }),
      );
  });
}

/** A Stager call run here. Without a memory path nothing of this process is staged: an empty answer. */
async function answer(staging: Stager | undefined, call: StageCall): Promise<StageAnswer> {
  switch (call.kind) {
    case "opening":
      await staging?.opening(call.start);
      return null;
    case "known":
      staging?.known(call.starts);
      return null;
    case "finish":
      return staging ? staging.finish(call.generation) : { seqs: [], events: 0, blocks: 0 };
  }
}
