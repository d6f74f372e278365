// Writes buffered rows to log_events with COPY FROM STDIN (text format) on a connection of the
// flush pool. Rows arrive already encoded; this file only frames them into large writes.
// Why BEGIN / COPY / COMMIT on a reserved connection: postgres.js resolves a COPY query as soon as
// the copy starts, and when the server refuses the data its stream never finishes (or, worse,
// "finishes" on the next command). The COMMIT's own answer is the truth: "COMMIT" means stored,
// anything else (PostgreSQL answers "ROLLBACK" for an aborted transaction) means not stored.
// The wait for the COPY's end has a deadline; the COMMIT's answer then decides. A COMMIT that
// never answers (a hung server) is the failure-handling issue's (#4) to bound.
import { once } from "node:events";
import type { Sql } from "./db";

/** Rows are joined into writes of about this size: fewer CopyData messages, bounded extra memory. */
const WRITE_BYTES = 1 << 20;

export async function copyRows(sql: Sql, rows: readonly string[], deadlineMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)));
  try {
    await write(sql, rows, deadline);
  } finally {
    clearTimeout(timer);
  }
}

async function write(sql: Sql, rows: readonly string[], deadline: Promise<void>): Promise<void> {
  const connection = await sql.reserve();
  try {
    await connection`begin`;
    const stream = await connection`copy log_events (source_id, dt, raw) from stdin`.writable();
    const failed = once(stream, "error").then(([error]) => Promise.reject(error as Error));
    failed.catch(() => {});
    let pending: string[] = [];
    let size = 0;
    for (const part of rows) {
      pending.push(part);
      size += part.length;
      if (size >= WRITE_BYTES) {
        if (!stream.write(pending.join(""))) await Promise.race([once(stream, "drain"), failed]);
        pending = [];
        size = 0;
      }
    }
    if (pending.length > 0) stream.write(pending.join(""));
    // "finish" comes with the COPY's CommandComplete. When the server refuses the data after the
    // last write, postgres.js never says so: the deadline ends the wait and the COMMIT tells.
    const finished = once(stream, "finish");
    stream.end();
    await Promise.race([finished, failed, deadline]);
    const committed = await Promise.race([connection`commit`, failed]);
    if (committed.command !== "COMMIT") throw new Error(`COPY was refused (the transaction ended in ${committed.command})`);
  } catch (error) {
    await Promise.race([connection`rollback`.catch(() => {}), Bun.sleep(1000)]);
    throw error;
  } finally {
    connection.release();
  }
}
