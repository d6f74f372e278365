// When and how the ring is drained: every FLUSH_INTERVAL_MS, or as soon as FLUSH_MAX_EVENTS are
// waiting, on up to FLUSH_STREAMS parallel COPY streams. A batch that fails is kept by its stream
// and retried with capped exponential backoff and jitter; its events stay counted in the ring, so
// a long outage fills the ring and ingestion answers 503 instead of losing anything.
// Never drops a chunk it was given; never holds more than one batch per stream.
import type { Metrics } from "../metrics";
import type { Chunk, Ring } from "./ring";

export type WriteBatch = (rows: string[]) => Promise<void>;

export interface FlusherOptions {
  intervalMs: number;
  maxEvents: number;
  streams: number;
  metrics: Metrics;
  log: (line: string) => void;
}

const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;

interface Waiter {
  seq: number;
  resolve: () => void;
}

export class Flusher {
  private timer: ReturnType<typeof setInterval> | undefined;
  private busy = 0;
  /** First sequence number of each batch being written, to know what is committed. */
  private readonly inFlight = new Set<number>();
  private waiters: Waiter[] = [];
  private stopping = false;
  private failures = 0;

  constructor(
    private readonly ring: Ring,
    private readonly write: WriteBatch,
    private readonly options: FlusherOptions,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => this.kick("interval"), this.options.intervalMs);
  }

  /** Called after every push: a full batch's worth goes out at once. */
  pushed(): void {
    if (this.ring.pendingEvents >= this.options.maxEvents) this.kick("size");
  }

  /** Resolves once every chunk pushed before the call is committed. */
  flush(): Promise<void> {
    const seq = this.ring.lastSeq;
    if (this.committedBelow() > seq) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.waiters.push({ seq, resolve }));
    this.kick("manual");
    return done;
  }

  /** Shutdown: no more timer; write everything; false if the deadline came first. */
  async drain(deadlineMs: number): Promise<boolean> {
    this.stopping = true;
    clearInterval(this.timer);
    this.timer = undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), deadlineMs)));
    const drained = await Promise.race([this.flush().then(() => true as const), late]);
    clearTimeout(timer);
    return drained;
  }

  get streamsBusy(): number {
    return this.busy;
  }

  private kick(reason: string): void {
    while (this.busy < this.options.streams && this.ring.pendingEvents > 0) {
      const batch = this.ring.take(this.options.maxEvents);
      if (batch.length === 0) break;
      this.busy++;
      this.inFlight.add(batch[0]!.seq);
      void this.run(batch, reason);
    }
  }

  private async run(batch: Chunk[], reason: string): Promise<void> {
    const events = batch.reduce((sum, chunk) => sum + chunk.events, 0);
    const rows = batch.map((chunk) => chunk.rows);
    for (let attempt = 0; ; attempt++) {
      const started = performance.now();
      try {
        await this.write(rows);
        const seconds = (performance.now() - started) / 1000;
        this.options.metrics.flushed(reason, events, seconds);
        if (this.failures > 0) this.options.log(`flush: storage is back after ${this.failures} failed attempts`);
        this.failures = 0;
        break;
      } catch (error) {
        this.options.metrics.flushErrors++;
        if (this.failures++ === 0 || this.failures % 50 === 0) {
          this.options.log(`flush: ${events} events not written (${(error as Error).message}); retrying, ${this.ring.heldEvents} events held`);
        }
        await Bun.sleep(backoff(attempt));
      }
    }
    this.ring.release(batch);
    for (const chunk of batch) chunk.settle?.();
    this.inFlight.delete(batch[0]!.seq);
    this.busy--;
    this.wakeWaiters();
    // More waiting than one batch, a flush or a drain in progress: keep going.
    if (this.ring.pendingEvents >= this.options.maxEvents || this.waiters.length > 0 || this.stopping) this.kick(reason);
  }

  private committedBelow(): number {
    let lowest = this.ring.oldestPendingSeq;
    for (const seq of this.inFlight) if (seq < lowest) lowest = seq;
    return lowest;
  }

  private wakeWaiters(): void {
    const below = this.committedBelow();
    if (!this.waiters.some((w) => w.seq < below)) return;
    const still: Waiter[] = [];
    for (const waiter of this.waiters) (waiter.seq < below ? waiter.resolve() : still.push(waiter));
    this.waiters = still;
  }
}

function backoff(attempt: number): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
