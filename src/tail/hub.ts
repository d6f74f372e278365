// Fans committed batches out to live-tail clients, in commit order. The order is NOTIFY's
// (`logpond_batches`, payload = the batch's seq; every instance commits with one, delivered in
// commit order): a batch this process wrote is taken from memory (Flusher.subscribe), any other is
// read back by its id range, one query per batch for all clients. `lastSeq` moves only when a
// batch has been handed to every live client, synchronously, which is what makes the switch from
// a client's catch-up (storage, seq ≤ lastSeq) to live (seq > lastSeq) gap- and duplicate-free.
// Never blocks the flusher: a subscriber callback only stores a reference.
import type { Flusher } from "../buffer/flusher";
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { type Periodic, periodic, rethrow } from "../periodic";
import { closing, type Service } from "../service";
import { describeError } from "../errors";
import { newestLoggedSeq, seqsAfter } from "../store/batch-log";
import { BATCHES_CHANNEL } from "../store/copy";
import type { Sql } from "../store/db";
import type { TailClient } from "./client";
import { blockOf, eventOf, rowsOfBatch, type CommittedRows, type TailRow } from "./rows";

const EMPTY = new Uint8Array(0);
import { readBatchRows } from "./storage";
import { within } from "../timers";

/** Batches of this process waiting for their notification; more means NOTIFY is not arriving. */
const MAX_LOCAL_WAITING = 256;
/**
 * A notification can overtake the flusher's own report of the same commit (two connections).
 * While a flush of ours is in progress, an unknown seq may be ours: wait this long for it before
 * reading it back from storage (which, without an index on id, scans log_events).
 */
const LOCAL_GRACE_MS = 200;

/** The service's hub: listening, fed by the flusher's commits, its series registered; its stop waited for 1 s at most. */
export async function startTail(
  config: Config,
  { sql, flusher, metrics, log }: { sql: Sql; flusher: Flusher; metrics: Registry; log: (line: string) => void },
): Promise<TailHub & Service> {
  const tail = new TailHub(sql, { heartbeatMs: config.tailHeartbeatMs, log, flushing: () => flusher.streamsBusy > 0 });
  await tail.start();
  flusher.subscribe((batch) => tail.committed(batch));
  metrics.gauge("logpond_tail_streams", "Live-tail streams open.", () => tail.size);
  metrics.counter(
    "logpond_tail_batches_read_back_total",
    "Committed batches the live tail read back from PostgreSQL (another instance's, or ours when its NOTIFY came first).",
    () => tail.readBack,
  );
  const service = closing("tail", () => tail.close(), 1_000);
  return Object.assign(tail, { name: service.name, stop: service.stop });
}

export class TailHub {
  lastSeq = 0;
  /** Batches read back from storage (other instances', or ours when NOTIFY won the race). */
  readBack = 0;
  private localArrived: (() => void) | undefined;
  private readonly clients = new Set<TailClient>();
  /** The read token each stream was opened with (none: the API token's). */
  private readonly tokenOf = new Map<TailClient, number>();
  /**
   * Read tokens revoked while this process ran (ids are never reused): a stream whose token was
   * checked just before its revocation and added just after is ended as it is added.
   */
  private readonly revokedTokens = new Set<number>();
  private readonly local = new Map<number, CommittedRows>();
  private readonly pending: number[] = [];
  private draining: Promise<void> | undefined;
  private heartbeat: Periodic<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private listening = false;

  constructor(
    private readonly sql: Sql,
    private readonly options: { heartbeatMs: number; log: (line: string) => void; flushing: () => boolean },
  ) {}

  async start(): Promise<void> {
    const { unlisten } = await this.sql.listen(
      BATCHES_CHANNEL,
      (payload) => this.notified(Number(payload)),
      () => {
        // (Re)connected: notifications sent while the connection was down are lost, so every
        // batch committed since the last one handed out is read from the batch log instead.
        if (this.listening) this.catchUpLog();
        this.listening = true;
      },
    );
    this.unlisten = unlisten;
    // Read after LISTEN: every later commit is notified, every earlier one is ≤ this.
    this.lastSeq = Math.max(this.lastSeq, await newestLoggedSeq(this.sql));
    this.heartbeat = periodic({
      intervalMs: this.options.heartbeatMs,
      fixedRate: true,
      run: async () => {
        for (const client of this.clients) client.heartbeat();
      },
      failed: rethrow,
    });
  }

  /** Ends every stream and stops listening. */
  async close(): Promise<void> {
    this.heartbeat?.halt();
    for (const client of [...this.clients]) client.close();
    await this.unlisten?.().catch(() => {});
    await this.draining;
  }

  get size(): number {
    return this.clients.size;
  }

  /** Called right after a catch-up read up to `upTo`: live only if nothing was handed out since. */
  goLive(client: TailClient, upTo: number): boolean {
    if (client.closed || this.lastSeq !== upTo) return false;
    client.live = true;
    return true;
  }

  /**
   * A source was deleted: its streams get `event: source_deleted` and end (their source_ids are
   * no longer valid; a reconnect with them gets 404). Rows already queued are still sent.
   */
  sourceDeleted(sourceId: number): void {
    for (const client of this.clients) {
      if (client.sourceIds.has(sourceId)) client.finish(`event: source_deleted\ndata: {"source_id":"${sourceId}"}\n\n`);
    }
  }

  add(client: TailClient, tokenId?: number): void {
    this.clients.add(client);
    if (tokenId !== undefined) this.tokenOf.set(client, tokenId);
    client.onClose = () => {
      this.clients.delete(client);
      this.tokenOf.delete(client);
    };
    if (tokenId !== undefined && this.revokedTokens.has(tokenId)) client.close();
  }

  /** A read token was revoked: its streams end at once, rows still queued unsent; a reconnect gets 401. */
  tokenRevoked(tokenId: number): void {
    this.revokedTokens.add(tokenId);
    for (const [client, id] of [...this.tokenOf]) if (id === tokenId) client.close();
  }

  /** The read tokens of the streams open now. */
  tokenIds(): number[] {
    return [...new Set(this.tokenOf.values())];
  }

  /** Flusher.subscribe: this process's batch, committed; kept until its notification arrives. */
  committed(batch: CommittedRows): void {
    if (this.clients.size === 0 || batch.seq <= this.lastSeq) return;
    // A copy: the rows lie in the ring's slabs, written again once the flusher releases them.
    this.local.set(batch.seq, { ...batch, rows: batch.rows.map((part) => new Uint8Array(part)) });
    if (this.local.size > MAX_LOCAL_WAITING) this.local.delete(this.local.keys().next().value!);
    this.localArrived?.();
  }

  private notified(seq: number): void {
    if (!Number.isSafeInteger(seq)) return;
    this.pending.push(seq);
    this.startDraining();
  }

  private catchUpLog(): void {
    this.pending.push(-1);
    this.startDraining();
  }

  /** The drain's promise is awaited only by stop(): it is handled here, so a failure is never an unhandled rejection. */
  private startDraining(): void {
    this.draining ??= this.drain()
      .catch((error) => this.options.log(`tail: delivering batches failed (${describeError(error)}); streams may have missed some, a reconnect recovers them`))
      .finally(() => (this.draining = undefined));
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0) {
      const seq = this.pending.shift()!;
      try {
        if (seq === -1) {
          for (const missed of await seqsAfter(this.sql, this.lastSeq)) await this.deliver(missed);
        } else {
          await this.deliver(seq);
        }
      } catch (error) {
        this.options.log(`tail: could not read batch ${seq} back (${(error as Error).message}); streams may have missed it, a reconnect recovers it`);
      }
    }
  }

  private async waitLocal(seq: number): Promise<void> {
    const until = performance.now() + LOCAL_GRACE_MS;
    while (!this.local.has(seq) && this.options.flushing()) {
      const left = until - performance.now();
      if (left <= 0) return;
      await within(new Promise<void>((resolve) => (this.localArrived = resolve)), left);
      this.localArrived = undefined;
    }
  }

  private async deliver(seq: number): Promise<void> {
    if (seq <= this.lastSeq) return;
    // Sources of every client, catching up ones included: one may turn live while rows are read
    // back, and from then on it counts on this batch coming live.
    const watched = new Set<number>();
    for (const client of this.clients) for (const id of client.sourceIds) watched.add(id);
    let rows: TailRow[] = [];
    if (watched.size > 0) {
      // Once a later batch of ours has been reported, this one is almost surely another instance's.
      const laterOfOurs = [...this.local.keys()].some((key) => key > seq);
      if (!this.local.has(seq) && !laterOfOurs && this.options.flushing()) await this.waitLocal(seq);
      const batch = this.local.get(seq);
      if (batch) rows = rowsOfBatch(batch, watched);
      else {
        this.readBack++;
        rows = await readBatchRows(this.sql, seq, [...watched]);
      }
    }
    // From here to lastSeq = seq nothing awaits: clients that turn live later start after seq.
    const groups = new Map<string, { rows: TailRow[]; block: Uint8Array }>();
    for (const client of this.clients) {
      if (!client.live) continue;
      client.batchStart();
      if (seq <= client.seq) {
        // Its resume point is inside or after this batch: row by row, skipping what it has.
        for (const row of rows) client.offer(row);
        continue;
      }
      let group = groups.get(client.groupKey);
      if (!group) {
        const mine = rows.filter((row) => client.sourceIds.has(row.sourceId) && (!client.matcher || client.matcher(eventOf(row))));
        group = { rows: mine, block: mine.length > 0 ? blockOf(mine) : EMPTY };
        groups.set(client.groupKey, group);
      }
      client.offerBlock(group.rows, group.block);
    }
    this.lastSeq = seq;
    for (const key of this.local.keys()) if (key <= seq) this.local.delete(key);
  }
}
