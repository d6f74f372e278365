// An ingest worker's side of its supervisor (cluster/supervisor.ts): it says when it listens, and
// on which port; it reports its counters and its ingestion series every second; it stops, as SIGTERM does, when its
// supervisor is gone (the IPC channel closes, or its parent changes), so no worker runs orphaned.
import { periodic, rethrow } from "../periodic";

/** What a worker sends its supervisor. */
export type WorkerMessage =
  | { type: "ready"; port: number }
  | { type: "counters"; requests: number; events: number; families: string }
  | { type: "flushed"; id: number };

/** What a supervisor asks of a worker: write what its buffer holds now (before a deletion sweep). */
export type SupervisorMessage = { type: "flush"; id: number };

const REPORT_EVERY_MS = 1_000;

/** `families`: the ingestion series of this process's scrape, as text (cluster/gather.ts). */
export function reportToSupervisor(
  ingestUrl: string,
  ingested: () => { requests: number; events: number },
  families: () => string,
  flush: () => Promise<void>,
  stop: (why: string) => void,
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
  });
}
