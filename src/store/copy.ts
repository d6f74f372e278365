// One flush stream's connection to PostgreSQL, and the only code that writes log events.
// A batch is one transaction: BEGIN; its id into flush_batches; COPY log_chunks FROM STDIN (binary
// format, a few rows per source: store/chunks.ts), or with HOT_TIER=rows COPY log_hot (a row per
// event: codec/tuples.ts, ids already set); the order its events' keys were sent in, when any is
// not jsonb's (store/key-orders.ts); one statement that takes the next commit
// seq (the counter row's lock is held until COMMIT, so seq follows commit order across streams
// and processes), records seq and the id range in flush_batches and NOTIFYs logpond_batches; COMMIT. Every operation has a deadline; past it the connection is destroyed (never
// reused, so no session is left "idle in transaction") and a new one is opened for the next try.
// Failures come back as a WriteError whose kind tells the flusher what to do:
//   data    — PostgreSQL refused the rows themselves (SQLSTATE 22, 23, 54): split, never retry as is;
//   failed  — nothing was committed (refused, unreachable, deadline before COMMIT): retry;
//   unknown — COMMIT was sent but its answer is lost: ask `committed(id)` before retrying.
//
// postgres.js (3.4.x) and a refused COPY (docs/durability.md, "When PostgreSQL misbehaves"): the
// COPY query resolves at CopyInResponse, and when the server refuses the data after the last
// write the stream's "finish" never fires and the error goes to the query's `reject`, which is a
// no-op on a settled promise. So the COPY's `reject` is watched here (`refusalOf`); that delivers
// the real error at once.
import { once } from "node:events";
import postgres from "postgres";
import { COPY_HEADER, COPY_TRAILER, fieldsOf, fromText, setIds, tupleCount } from "../codec/tuples";
import { microsText } from "../codec/time";
import { deadline, reconnectSeconds } from "../timers";
import { chunkTuples } from "./chunks";
import { insertKeyOrders, keyOrdersOf } from "./key-orders";

export type WriteFailure = "data" | "failed" | "unknown";
export type HotTier = "rows" | "chunks";

export class WriteError extends Error {
  constructor(
    readonly kind: WriteFailure,
    message: string,
    readonly sqlstate = "",
  ) {
    super(message);
    this.name = "WriteError";
  }
}

/**
 * Batches committed before $1 hours ago, except those of a hot generation not sealed yet (the
 * tables log_hot_g<first id>, store/sealer.ts): every id below the oldest one's first id is sealed,
 * or in the DEFAULT partition (read back whole).
 */
const FORGET_BATCHES = `delete from flush_batches where committed_at < now() - make_interval(hours => $1::int)
  and (first_id is null or first_id < (select coalesce(min(substring(c.relname from '^log_hot_g([0-9]+)$')::bigint), 9223372036854775807)
    from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'log_hot'::regclass))`;

/** What a committed transaction left in flush_batches: seq is null for a dead letter's. */
export interface Commit {
  seq: number | null;
}

export interface IdRange {
  firstId: number;
  lastId: number;
}

export const BATCHES_CHANNEL = "logpond_batches";

export interface FlushConnection {
  /** Reserves `count` consecutive event ids (one autocommit round trip); returns the first. */
  reserveIds(count: number): Promise<number>;
  /**
   * Stores the rows (tuples whose ids are set and lie in `ids`) in one transaction tagged with
   * batchId; returns its commit (an earlier try's, if that one committed). Without `ids` the
   * tuples get a fresh block of ids here. A string is read as COPY text lines, `source_id \t dt
   * \t raw \n`, with `id \t` before each when `ids` is given (tools, tests).
   */
  write(batchId: string, rows: readonly (Uint8Array | string)[], ids?: IdRange): Promise<Commit>;
  /** The commit of the transaction tagged with batchId, or false when it did not commit. */
  committed(batchId: string): Promise<Commit | false>;
  /** Stores one refused tuple in dead_letters, tagged with batchId. */
  deadLetter(batchId: string, tuple: Uint8Array, refusal: WriteError): Promise<void>;
  /** Drops batch ids old enough that no retry can still ask about them. */
  forgetBatches(olderThanHours: number): Promise<void>;
  close(): Promise<void>;
}

/** Rows are joined into writes of about this size: fewer CopyData messages, bounded extra memory. */
const WRITE_BYTES = 1 << 20;
/** A part this big is a write of its own: joining it to others would copy it once more. */
const WRITE_ALONE_BYTES = 64 * 1024;
/** SQLSTATE classes that mean "these rows", not "this database": data exception, integrity, limits. */
const DATA_ERROR = /^(22|23|54)/;

type Sql = postgres.Sql;

/**
 * `hotTier`: where a batch's events go until their seal — a jsonb row each in log_hot ("rows"), or
 * a few log_chunks rows per source ("chunks": store/chunks.ts, HOT_TIER in docs/storage.md).
 * Rows given as COPY text (tools, tests) always go to log_hot.
 */
export function openFlushConnection(url: string, deadlineMs: number, hotTier: HotTier = "rows"): FlushConnection {
  const connect = () => postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: "logpond-flush" }, backoff: reconnectSeconds });
  let sql = connect();

  /**
   * Runs one transaction under the deadline; on a timeout the connection is destroyed. With `ids`,
   * the batch stored log_events rows: it takes a commit seq and notifies, right before COMMIT.
   */
  async function transaction(batchId: string, body: (sql: Sql) => Promise<void>, ids?: IdRange): Promise<Commit> {
    const current = sql;
    const progress = { commitSent: false };
    const work = (async (): Promise<Commit> => {
      try {
        await current`begin`;
        const claimed = await current`insert into flush_batches (id) values (${batchId}) on conflict do nothing`;
        if (claimed.count === 0) {
          // Committed by an earlier try whose answer was lost: done, and not twice.
          const [earlier] = await current<{ seq: string | null }[]>`select seq from flush_batches where id = ${batchId}`;
          await current`rollback`;
          return { seq: earlier?.seq == null ? null : Number(earlier.seq) };
        }
        await body(current);
        let seq: number | null = null;
        if (ids) {
          // Last statement before COMMIT: the counter row stays locked until the commit, so the
          // order of seq is the order of commits (measured cost: docs/storage.md).
          const [taken] = await current<{ seq: string }[]>`
            with next as (
              update logpond_counters set value = value + 1 where name = 'commit_seq' returning value
            ), stamped as (
              update flush_batches set seq = next.value, first_id = ${ids.firstId}, last_id = ${ids.lastId}
              from next where flush_batches.id = ${batchId} returning next.value as seq
            )
            select seq, pg_notify(${BATCHES_CHANNEL}, seq::text) from stamped`;
          seq = Number(taken!.seq);
        }
        progress.commitSent = true;
        const result = await current`commit`;
        if (result.command !== "COMMIT") throw new Error(`the transaction ended in ${result.command}`);
        return { seq };
      } catch (error) {
        if (!progress.commitSent) await current`rollback`.catch(() => {});
        throw error;
      }
    })();
    work.catch(() => {});
    try {
      return await withDeadline(work, deadlineMs);
    } catch (error) {
      if (error instanceof DeadlineError) replace(current);
      throw classify(error, progress.commitSent);
    }
  }

  function replace(stale: Sql): void {
    if (sql === stale) sql = connect();
    void stale.end({ timeout: 0 }).catch(() => {});
  }

  async function reserveIds(count: number): Promise<number> {
    const current = sql;
    const work = current<{ first: string }[]>`
      update logpond_counters set value = value + ${count} where name = 'event_id' returning value - ${count} as first`.execute();
    work.catch(() => {});
    try {
      const [row] = await withDeadline(work, deadlineMs);
      if (!row) throw new Error("logpond_counters has no 'event_id' row (migration 0002 not applied?)");
      return Number(row.first);
    } catch (error) {
      if (error instanceof DeadlineError) replace(current);
      // Refusing to hand out ids is never the rows' fault: retried like a failed write.
      const failure = classify(error, false);
      throw failure.kind === "data" ? new WriteError("failed", failure.message, failure.sqlstate) : failure;
    }
  }

  return {
    reserveIds,

    async write(batchId, rows, ids) {
      const tuples = rows.map((part) => (typeof part === "string" ? fromText(part, ids !== undefined) : part));
      if (ids === undefined) {
        const counts = tuples.map(tupleCount);
        const firstId = await reserveIds(
          Math.max(
            1,
            counts.reduce((sum, n) => sum + n, 0),
          ),
        );
        let next = firstId;
        tuples.forEach((part, i) => setIds(part, counts[i]!, (next += counts[i]!) - counts[i]!));
        ids = { firstId, lastId: Math.max(firstId, next - 1) };
      }
      const orders = keyOrdersOf(tuples);
      const chunks = hotTier === "chunks" && !rows.some((part) => typeof part === "string") ? chunkTuples(tuples) : undefined;
      return transaction(
        batchId,
        async (current) => {
          if (chunks)
            await copy(
              current,
              chunks,
              current`copy log_chunks (first_id, last_id, source_id, min_dt, max_dt, n, payload, hist_minutes, hist_levels, hist_counts) from stdin (format binary)`,
            );
          else await copy(current, tuples, current`copy log_hot (id, source_id, dt, raw) from stdin (format binary)`);
          if (orders) await insertKeyOrders(current, orders);
        },
        ids,
      );
    },

    async committed(batchId) {
      // A probe insert rather than a select: if the try whose answer was lost is still running
      // (a paused server resumed), the insert waits for it to commit or abort; a select would not.
      const current = sql;
      const probe = (async (): Promise<Commit | false> => {
        await current`begin`;
        try {
          const claimed = await current`insert into flush_batches (id) values (${batchId}) on conflict do nothing`;
          if (claimed.count !== 0) return false;
          const [earlier] = await current<{ seq: string | null }[]>`select seq from flush_batches where id = ${batchId}`;
          return { seq: earlier?.seq == null ? null : Number(earlier.seq) };
        } finally {
          await current`rollback`;
        }
      })();
      probe.catch(() => {});
      try {
        return await withDeadline(probe, deadlineMs);
      } catch (error) {
        if (error instanceof DeadlineError) replace(current);
        throw classify(error, false);
      }
    },

    async deadLetter(batchId, tuple, refusal) {
      const { sourceId, dt, raw } = fieldsOf(tuple);
      await transaction(batchId, async (current) => {
        await current`
          insert into dead_letters (source_id, dt, raw, sqlstate, error)
          values (${sourceId}, ${microsText(dt)}, ${raw}, ${refusal.sqlstate}, ${refusal.message})`;
      });
    },

    async forgetBatches(olderThanHours) {
      // A batch of a hot generation not sealed yet is kept whatever its age: the memory path's seal
      // reads back exactly the batches flush_batches holds for the generation that its staged
      // blocks do not cover (store/sealer.ts publishStaged), so a forgotten one would be lost.
      await withDeadline(sql.unsafe(FORGET_BATCHES, [olderThanHours]).execute(), deadlineMs);
    },

    async close() {
      await sql.end({ timeout: 5 });
    },
  };
}

async function copy(sql: Sql, rows: readonly Uint8Array[], query: postgres.PendingQuery<postgres.Row[]>): Promise<void> {
  const refused = refusalOf(query);
  const stream = await query.writable();
  const broken = Promise.race([once(stream, "error").then(([error]) => Promise.reject(error as Error)), refused]);
  broken.catch(() => {});
  stream.write(COPY_HEADER);
  // postgres.js copies each write into a CopyData message of its own: parts of WRITE_ALONE_BYTES
  // or more go as they are; smaller ones are joined first (fewer messages).
  let pending: Uint8Array[] = [];
  let size = 0;
  const send = async (bytes: Uint8Array) => {
    if (!stream.write(bytes)) await Promise.race([once(stream, "drain"), broken]);
  };
  for (const part of rows) {
    if (part.length >= WRITE_ALONE_BYTES) {
      if (pending.length > 0) await send(joined(pending, size));
      pending = [];
      size = 0;
      await send(part);
      continue;
    }
    pending.push(part);
    size += part.length;
    if (size >= WRITE_BYTES) {
      await send(joined(pending, size));
      pending = [];
      size = 0;
    }
  }
  if (pending.length > 0) stream.write(joined(pending, size));
  stream.write(COPY_TRAILER);
  const finished = once(stream, "finish");
  stream.end();
  // "finish" comes with the COPY's CommandComplete; a refusal arrives through `refused`.
  await Promise.race([finished, broken]);
}

/** One write's bytes: Buffer.concat of one part would still copy it (264 of 12,766 samples, json-100 profile). */
function joined(parts: Uint8Array[], size: number): Uint8Array {
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
}

/** The error PostgreSQL sends for a COPY after postgres.js has already resolved it (see the header). */
function refusalOf(query: postgres.PendingQuery<postgres.Row[]>): Promise<never> {
  const internal = query as unknown as { reject: (error: unknown) => void };
  const original = internal.reject;
  const refused = new Promise<never>((_, reject) => {
    internal.reject = (error: unknown) => {
      reject(error);
      original(error);
    };
  });
  refused.catch(() => {});
  return refused;
}

function classify(error: unknown, commitSent: boolean): WriteError {
  if (error instanceof WriteError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const sqlstate = error instanceof postgres.PostgresError ? error.code : "";
  // An error answer to the statements themselves (COMMIT included) is a definite outcome; a lost
  // connection or a deadline after COMMIT was sent is not.
  const answered = sqlstate !== "" && !sqlstate.startsWith("57") && !sqlstate.startsWith("08");
  // A partition attached while this COPY routed rows to the default one: not the rows' fault, and
  // a retry routes them to the new partition (store/partitions.ts).
  if (sqlstate === "23514" && message.includes("partition constraint")) return new WriteError("failed", message, sqlstate);
  if (answered && DATA_ERROR.test(sqlstate)) return new WriteError("data", message, sqlstate);
  if (commitSent && !answered) return new WriteError("unknown", message, sqlstate);
  return new WriteError("failed", message, sqlstate);
}

class DeadlineError extends Error {
  constructor(ms: number) {
    super(`no answer from PostgreSQL within ${ms} ms (FLUSH_TIMEOUT_MS); the connection was dropped`);
  }
}

function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return deadline(work, ms, () => new DeadlineError(ms));
}
