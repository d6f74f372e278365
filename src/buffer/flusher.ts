// When and how the ring is drained: every FLUSH_INTERVAL_MS, or as soon as FLUSH_MAX_EVENTS are
// waiting, on FLUSH_STREAMS parallel streams (one connection each; store/copy.ts writes). In
// durable mode a free stream writes whatever is waiting at once: requests that arrive while both
// streams are busy share the next commit (group commit). Each stream carries one batch at a time
// through this machine (schedule and release here, the states between in batch.ts):
//
//   schedule
//      │
//      ▼
//   reserve ids ──── failed ──────────────────► backoff ◄──────── failed ────────┐
//      │  ▲                                      │  │  │                         │
//      │  └───────────── no ids yet ─────────────┘  │  └── answer lost ──────► probe
//      ▼                                            │                            │
//   write ◄────────────── retry ────────────────────┘                            │
//      │  ▲ ▲                                                                    │
//      │  │ └─────────────────────────── not committed ──────────────────────────┤
//      │  └──── parts left ────┐                                                 │
//      ├── committed ───────► committed ◄───────────────── committed already ─────┘
//      ├── failed, answer lost ──► backoff      │
//      ├── data ──► refused ──► write: its halves in turn; one event alone, its dead letter
//      │               └──────► a refused dead letter: lost (logged, counted)
//      ▼                                        ▼
//   release ◄──── nothing left to write ────────┘
//      │          (every request gave up; no part left)
//      └──► schedule
//
//   schedule  a free stream takes up to FLUSH_MAX_EVENTS from the ring
//   reserve   one block of ids for the batch, set in its tuples in place (once; not on the accept
//             path); a batch whose every request gave up goes straight to release
//   write     one transaction tagged with its batch id: the batch, a part of it, or a dead letter
//   backoff   capped exponential with jitter; the batch's events stay counted in the ring; once
//             tries have failed for INGEST_REFUSE_AFTER_FLUSH_FAILING_MS (failingMs), ingestion
//             answers 503; a restart of the embedded PostgreSQL ends the wait (retryNow)
//   probe     the last try's COMMIT answer was lost: ask whether its batch id committed (exactly once)
//   refused   PostgreSQL refused the rows themselves: split until the refused events are alone;
//             those go to dead_letters, the rest is stored. Never retried as is
//   release   ring space freed, durable requests answered, waiting flushes woken, more taken
//   halted    a drain missed its deadline: no try starts any more; handOver() gives what is held
// Durable mode: a request that gave up waiting has its chunk dropped on the way into reserve or
// write (the batch is known unstored there), and its events are never written after that.
// Never drops a chunk it was given otherwise; never holds more than one batch per stream.
import type { Config } from "../config";
import type { Registry } from "../metrics";
import { type Periodic, periodic, rethrow } from "../periodic";
import { type Service, timeLeft } from "../service";
import { openFlushStreams } from "../store/flush-thread";
import { realClock, within, type Clock } from "../timers";
import { BatchWriter, eventsOf, flushSeries, type FlushSeries, heldOf, newJob, type CommittedBatch, type HeldBatch, type Job, type Stream } from "./batch";
import type { Ring } from "./ring";

export type { Batch, CommittedBatch, HeldBatch, Stream } from "./batch";

export interface FlusherOptions {
  intervalMs: number;
  maxEvents: number;
  /** Durable mode: a stream that is free writes at once (group commit), the interval is a backstop. */
  eager: boolean;
  /** Where its series are declared (batch.ts's flushSeries). */
  metrics: Registry;
  log: (line: string) => void;
  /** Backoffs and the drain's deadline run on it; a test drives its own. */
  clock?: Clock;
  /** The backoff's jitter. */
  random?: () => number;
}

/** Batch ids are kept a day: far longer than any retry can be waiting to ask about one. */
const FORGET_BATCHES_AFTER_HOURS = 24;
const FORGET_EVERY_MS = 10 * 60_000;

interface Waiter {
  seq: number;
  resolve: () => void;
}

/**
 * The service's flusher: FLUSH_STREAMS streams on the flush thread, started; its gauges registered.
 * As a service it closes the streams' connections (1 s at most; the drain is the buffer's, spill.ts)
 * and tells /ready when flushes have failed for longer than INGEST_REFUSE_AFTER_FLUSH_FAILING_MS.
 */
export function startFlusher(
  config: Config,
  { url, ring, metrics, log }: { url: string; ring: Ring; metrics: Registry; log: (line: string) => void },
): Flusher & Service & { storageDown(): boolean } {
  const streams = openFlushStreams(url, config.flushTimeoutMs, config.flushStreams, config.hotTier);
  const flusher = new Flusher(ring, streams, {
    intervalMs: config.flushIntervalMs,
    maxEvents: config.flushMaxEvents,
    eager: config.ingestAck === "durable",
    metrics,
    log,
  });
  metrics.gauge("logpond_flush_streams_busy", "COPY streams writing now.", () => flusher.streamsBusy);
  metrics.gauge("logpond_flush_failing_seconds", "How long flushes have been failing (0 while they succeed).", () => flusher.failingMs() / 1000);
  flusher.start();
  // Past this much failing, nothing more is acknowledged from memory (503) until a flush succeeds.
  const storageDown = () => flusher.failingMs() > config.ingestRefuseAfterFlushFailingMs;
  return Object.assign(flusher, {
    name: "flush connections",
    // At most a second, never past the stop's deadline (service.ts).
    stop: (deadline: number) => flusher.close(Math.min(1_000, timeLeft(deadline))),
    storageDown,
    ready: async () =>
      storageDown() ? `Storage is failing: no flush has succeeded for ${(flusher.failingMs() / 1000).toFixed(1)} s; ingestion answers 503` : undefined,
  });
}

export class Flusher {
  /** The interval's turns (tick), from start() to drain(). */
  private ticker: Periodic<void> | undefined;
  private readonly idle: Stream[];
  /** First sequence number of each batch being written, to know what is committed. */
  private readonly inFlight = new Set<number>();
  private waiters: Waiter[] = [];
  private stopping = false;
  private halted = false;
  private readonly clock: Clock;
  private lastForget: number;
  private readonly listeners = new Set<(batch: CommittedBatch) => void>();
  /** Each stream's job from schedule to release (or halt). */
  private readonly holding = new Map<Stream, Job>();
  /** Each job's run, until it ends (released or halted). */
  private readonly running = new Set<Promise<void>>();
  private readonly writer: BatchWriter;
  /** Its /metrics series. */
  readonly series: FlushSeries;

  constructor(
    private readonly ring: Ring,
    private readonly streams: readonly Stream[],
    private readonly options: FlusherOptions,
  ) {
    this.idle = [...streams];
    this.clock = options.clock ?? realClock;
    this.lastForget = this.clock.now();
    this.series = flushSeries(options.metrics);
    this.writer = new BatchWriter({
      ring,
      metrics: this.series,
      log: options.log,
      clock: this.clock,
      random: options.random ?? Math.random,
      halted: () => this.halted,
      publish: (batch) => this.publish(batch),
    });
  }

  start(): void {
    this.ticker ??= periodic({
      intervalMs: this.options.intervalMs,
      fixedRate: true, // a turn every interval from the start, as the flush interval promises
      run: async () => this.tick(),
      failed: rethrow,
      clock: this.clock,
    });
  }

  /** What the interval does: whatever is waiting goes out; the ring lets go of slabs it does not need. */
  tick(): void {
    this.schedule("interval");
    this.ring.shed(this.clock.now());
  }

  /** Called after every push: a full batch's worth goes out at once (in durable mode, anything). */
  pushed(): void {
    if (this.ring.pendingEvents >= this.options.maxEvents) this.schedule("size");
    else if (this.options.eager && this.idle.length > 0) this.schedule("commit");
  }

  /** Resolves once every chunk pushed before the call is committed (or dead-lettered, or dropped). */
  flush(): Promise<void> {
    const seq = this.ring.lastSeq;
    if (this.committedBelow() > seq) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.waiters.push({ seq, resolve }));
    this.schedule("manual");
    return done;
  }

  /**
   * Resolves once every batch being written at the call has ended (committed, refused, released or
   * halted), never rejects. The sealer waits for it before it first seals a generation: a batch
   * that took its ids in that generation writes there, and once the seal holds the generation's
   * lock it would wait out the whole seal (docs/memory.md: a batch timed out three times behind the
   * seal of 3.4 M events).
   */
  settled(): Promise<void> {
    return Promise.allSettled([...this.running]).then(() => {});
  }

  /** Shutdown: no more timer; write everything; false if the deadline came first. */
  async drain(deadlineMs: number): Promise<boolean> {
    this.stopping = true;
    this.ticker?.halt();
    this.ticker = undefined;
    const drained = await within(this.flush(), deadlineMs, this.clock);
    if (!drained) this.halted = true; // no try starts from now on; what is held is handed over
    return drained;
  }

  /** Called after each commit that stored log_events rows (never for dead letters); returns unsubscribe. */
  subscribe(listener: (batch: CommittedBatch) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * After a drain that missed its deadline: everything not known stored, handed over once (the
   * flusher starts no try of it from now on). A batch being written keeps its batch id (and its ids
   * once it has them), so a try that commits after all is skipped at replay; so does each part of a
   * batch being split to isolate a refusal; chunks never taken get a fresh batch id.
   */
  handOver(): HeldBatch[] {
    this.halted = true;
    const held = [...this.holding.values()].flatMap(heldOf);
    this.holding.clear();
    while (this.ring.pendingEvents > 0) {
      const chunks = this.ring.take(this.options.maxEvents);
      if (chunks.length === 0) break;
      held.push({ batchId: crypto.randomUUID(), events: chunks.reduce((sum, c) => sum + c.events, 0), rows: chunks.map((c) => c.rows) });
    }
    return held;
  }

  /** After drain() (and handOver(), if it missed): the streams' connections closed, each within `ms`. */
  async close(ms: number): Promise<void> {
    await within(Promise.allSettled(this.streams.map((stream) => stream.close?.())), ms, this.clock);
  }

  /**
   * How long flushes have been failing: since the start of the earliest try that failed after the
   * last commit; 0 while they work. Ingestion refuses past INGEST_REFUSE_AFTER_FLUSH_FAILING_MS.
   */
  failingMs(): number {
    const since = this.writer.failingSince;
    return since === undefined ? 0 : Math.max(0, this.clock.now() - since);
  }

  /** Storage is back (the embedded PostgreSQL was started again): every batch waiting out a backoff tries now. */
  retryNow(): void {
    this.writer.wake();
  }

  get streamsBusy(): number {
    return this.streams.length - this.idle.length;
  }

  /** schedule: each free stream takes a batch while any is waiting. */
  private schedule(reason: string): void {
    if (this.halted) return; // handOver takes what is waiting
    while (this.idle.length > 0 && this.ring.pendingEvents > 0) {
      const chunks = this.ring.take(this.options.maxEvents);
      if (chunks.length === 0) break;
      const job = newJob(this.idle.pop()!, chunks, reason, this.clock.now());
      this.inFlight.add(job.firstSeq);
      this.holding.set(job.stream, job);
      const run = this.run(job);
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
  }

  private async run(job: Job): Promise<void> {
    if (await this.writer.run(job)) await this.release(job);
    // else halted: the job stays held, for handOver
  }

  /** release: the batch's ring space is free, its durable requests are answered; more is taken. */
  private async release(job: Job): Promise<void> {
    const { batch, stream } = job;
    this.holding.delete(stream);
    // Nothing held any more (durable requests that gave up): no try is left to fail or succeed,
    // and the next batch's first try tells anew.
    if (this.holding.size === 0) this.writer.failingSince = undefined;
    if (batch.chunks.length > 0) {
      this.series.flushes.inc(job.reason);
      this.series.events.inc(eventsOf(batch));
      this.series.duration.observe((this.clock.now() - job.started) / 1000);
    }
    this.ring.release(batch.chunks);
    for (const chunk of batch.chunks) chunk.settle?.();
    this.inFlight.delete(job.firstSeq);
    this.wakeWaiters();
    await this.forgetOldBatches(stream);
    this.idle.push(stream);
    // More waiting than one batch, a flush or a drain in progress, durable requests waiting: keep going.
    if (this.ring.pendingEvents >= this.options.maxEvents || this.waiters.length > 0 || this.stopping || this.options.eager) this.schedule(job.reason);
  }

  private publish(batch: CommittedBatch): void {
    for (const listener of this.listeners) {
      try {
        listener(batch);
      } catch (error) {
        this.options.log(`flush: a commit listener failed: ${(error as Error).message}`);
      }
    }
  }

  private async forgetOldBatches(stream: Stream): Promise<void> {
    if (this.halted || this.writer.uncertain > 0 || this.clock.now() - this.lastForget < FORGET_EVERY_MS) return;
    this.lastForget = this.clock.now();
    await stream.forgetBatches(FORGET_BATCHES_AFTER_HOURS).catch(() => {});
  }

  private committedBelow(): number {
    let lowest = this.ring.oldestPendingSeq;
    for (const seq of this.inFlight) if (seq < lowest) lowest = seq;
    return lowest;
  }

  private wakeWaiters(): void {
    // Halted: what handOver took from the ring is neither written nor in flight any more; a flush
    // waiting on it must not hear "done".
    if (this.halted) return;
    const below = this.committedBelow();
    if (!this.waiters.some((w) => w.seq < below)) return;
    const still: Waiter[] = [];
    for (const waiter of this.waiters) waiter.seq < below ? waiter.resolve() : still.push(waiter);
    this.waiters = still;
  }
}
