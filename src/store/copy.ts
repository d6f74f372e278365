// Writes buffered rows to log_events with COPY FROM STDIN (text format) on a connection of the
// flush pool. Rows arrive already encoded; this file only frames them into large writes. Every
// COPY has a deadline: postgres.js may never settle a failed COPY, so past it we end the client's
// connection and report a failure, and the caller retries the batch.
import { once } from "node:events";
import type { Sql } from "./db";

/** Rows are joined into writes of about this size: fewer CopyData messages, bounded extra memory. */
const WRITE_BYTES = 1 << 20;

export class CopyTimeoutError extends Error {
  constructor(ms: number) {
    super(`COPY did not finish within ${ms} ms`);
    this.name = "CopyTimeoutError";
  }
}

export async function copyRows(sql: Sql, rows: readonly string[], deadlineMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, rejectTimeout) => {
    timer = setTimeout(() => rejectTimeout(new CopyTimeoutError(deadlineMs)), deadlineMs);
  });
  try {
    await Promise.race([write(sql, rows), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function write(sql: Sql, rows: readonly string[]): Promise<void> {
  const query = sql`copy log_events (source_id, dt, raw) from stdin`;
  const stream = await query.writable();
  // The query settles after the server's answer: resolved on commit, rejected with its error
  // (the stream's own "finish" never comes when the server refuses the data).
  const settled = Promise.resolve(query).then(() => undefined);
  const failed = settled.then(() => new Promise<never>(() => {}));
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
  stream.end();
  await settled;
}
