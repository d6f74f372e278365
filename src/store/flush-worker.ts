// The flush thread's side (see flush-thread.ts; calls and answers through rpc.ts): the flush
// streams' connections (store/copy.ts), each call run as it comes and answered with its value or
// its WriteError's kind, message and SQLSTATE. Holds no state of its own beyond the connections;
// decides nothing.
import { openFlushConnection, WriteError, type FlushConnection, type HotTier } from "./copy";
import { serve } from "../rpc";
import { THREAD_GC_EVERY_BYTES } from "../memory/costs";

export type Call =
  | { stream: number; method: "open"; url: string; deadlineMs: number; hotTier: HotTier }
  | { stream: number; method: "reserveIds"; count: number }
  | { stream: number; method: "write"; batchId: string; rows: (Uint8Array | string)[]; firstId?: number; lastId?: number }
  | { stream: number; method: "committed"; batchId: string }
  | { stream: number; method: "deadLetter"; batchId: string; tuple: Uint8Array; refusal: WriteErrorMessage }
  | { stream: number; method: "forgetBatches"; olderThanHours: number }
  | { stream: number; method: "close" };

/** A WriteError as it crosses between the threads (a structured clone keeps no class). */
export interface WriteErrorMessage {
  kind: WriteError["kind"];
  message: string;
  sqlstate: string;
}

const connections = new Map<number, FlushConnection>();

/**
 * postgres.js copies every COPY write into a message of its own: this thread's garbage is about the
 * bytes it writes, and nothing paced its collector (the main thread's pacer sees only its own heap).
 * A full collection of this small heap every THREAD_GC_EVERY_BYTES written keeps it from piling up.
 */
let written = 0;
function collectAfter(rows: (Uint8Array | string)[]): void {
  for (const part of rows) written += part.length;
  if (written < THREAD_GC_EVERY_BYTES) return;
  written = 0;
  Bun.gc(true);
}

serve<Call, unknown, WriteErrorMessage>(run, {
  wire(caught) {
    const error = caught instanceof WriteError ? caught : new WriteError("failed", (caught as Error)?.message ?? String(caught));
    return { kind: error.kind, message: error.message, sqlstate: error.sqlstate };
  },
});

async function run(request: Call): Promise<unknown> {
  if (request.method === "open") {
    connections.set(request.stream, openFlushConnection(request.url, request.deadlineMs, request.hotTier));
    return undefined;
  }
  const connection = connections.get(request.stream);
  if (!connection) throw new WriteError("failed", `flush stream ${request.stream} is not open`);
  switch (request.method) {
    case "reserveIds":
      return connection.reserveIds(request.count);
    case "write": {
      const ids = request.firstId === undefined ? undefined : { firstId: request.firstId, lastId: request.lastId! };
      const commit = await connection.write(request.batchId, request.rows, ids);
      collectAfter(request.rows);
      return commit;
    }
    case "committed":
      return connection.committed(request.batchId);
    case "deadLetter":
      return connection.deadLetter(request.batchId, request.tuple, new WriteError(request.refusal.kind, request.refusal.message, request.refusal.sqlstate));
    case "forgetBatches":
      return connection.forgetBatches(request.olderThanHours);
    case "close":
      connections.delete(request.stream);
      return connection.close();
  }
}
