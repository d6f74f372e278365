// Calls to a worker thread and their answers, for the decode threads (ingest/offload.ts) and the
// flush thread (store/flush-thread.ts); `serve` is the thread's side. A call gets an id and waits in
// a map for the answer with that id; an error thrown on the thread comes back as data (the caller
// says which shape) and is raised again here. A thread that fails, stops, is closed or (past the
// backstop) stops answering is ended, and only its own waiting calls fail, as "lost" (they may have
// run); the next call starts a new thread. Knows nothing of what the calls mean.

/** Main thread → worker. */
export interface CallMessage<Request> {
  call: number;
  request: Request;
}

/** Worker → main thread: the call's value, or the error it threw, as data. */
export type ReplyMessage<Value, Wire> = { call: number; value: Value } | { call: number; error: Wire };

export interface ThreadOptions<Wire> {
  /** The worker's module, resolved by the caller: new URL("./x.ts", import.meta.url).href. */
  url: string;
  /** For messages: "the flush thread". */
  name: string;
  /** An error the thread sent back, as the caller's error. */
  answered(wire: Wire): Error;
  /** The call may or may not have run: the thread failed, stopped, was closed or never answered. */
  lost(reason: string): Error;
  /** The call never reached the thread. */
  unsent(reason: string): Error;
  /** Past this, a call still unanswered ends the thread. None: calls wait as long as the thread lives. */
  backstopMs?: number;
  /** Runs with each new thread before any call reaches it (after one died: to set it up again). */
  started?(): void;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
  worker: Worker;
  timer?: ReturnType<typeof setTimeout>;
}

export class ThreadClient<Request, Value, Wire> {
  private worker: Worker | undefined;
  private nextCall = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;

  constructor(private readonly options: ThreadOptions<Wire>) {}

  /** Calls waiting for their answer. */
  get waiting(): number {
    return this.pending.size;
  }

  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Starts the thread now (a call does so when none runs). */
  start(): void {
    if (!this.worker && !this.closed) this.spawn();
  }

  /**
   * Sends the request; resolves with the thread's value. `transfer`'s buffers are moved to the
   * thread (the caller must not use them after); when a buffer cannot be moved, the request goes
   * as a copy.
   */
  call(request: Request, transfer: ArrayBuffer[] = []): Promise<Value> {
    if (this.closed) return Promise.reject(this.options.unsent(`the ${this.options.name} is closed`));
    const worker = this.worker ?? this.spawn();
    const call = this.nextCall++;
    return new Promise<Value>((resolve, reject) => {
      const entry: Pending = { resolve: resolve as (value: unknown) => void, reject, worker };
      const { backstopMs } = this.options;
      if (backstopMs !== undefined) {
        entry.timer = setTimeout(() => this.lose(worker, `no answer from the ${this.options.name} within ${backstopMs} ms`), backstopMs);
        entry.timer.unref?.();
      }
      this.pending.set(call, entry);
      try {
        post(worker, { call, request }, transfer);
      } catch (error) {
        this.settle(call);
        reject(this.options.unsent(`could not hand the call to the ${this.options.name}: ${(error as Error).message}`));
      }
    });
  }

  /** Sends without waiting: the answer, value or error, is dropped. */
  send(request: Request): void {
    if (this.closed) return;
    const worker = this.worker ?? this.spawn();
    worker.postMessage({ call: this.nextCall++, request } satisfies CallMessage<Request>);
  }

  /** Ends the thread for good: waiting calls fail as lost, later ones as unsent. */
  close(reason: string): void {
    this.closed = true;
    if (this.worker) this.lose(this.worker, reason);
  }

  private spawn(): Worker {
    // smol: a smaller heap for the thread.
    const worker = new Worker(this.options.url, { smol: true });
    this.worker = worker;
    worker.onmessage = (message: MessageEvent<ReplyMessage<Value, Wire>>) => {
      const reply = message.data;
      const entry = this.settle(reply.call);
      if (!entry) return;
      if ("error" in reply) entry.reject(this.options.answered(reply.error));
      else entry.resolve(reply.value);
    };
    worker.onerror = (event) => this.lose(worker, `the ${this.options.name} failed (${event.message})`);
    worker.addEventListener("close", () => this.lose(worker, `the ${this.options.name} stopped`));
    worker.unref();
    this.options.started?.();
    return worker;
  }

  /** The call's entry, taken out of `pending` with its backstop stopped. */
  private settle(call: number): Pending | undefined {
    const entry = this.pending.get(call);
    if (!entry) return undefined;
    this.pending.delete(call);
    clearTimeout(entry.timer);
    return entry;
  }

  /** A thread that failed, stopped or stopped answering: ended, and its calls (only its own) fail. */
  private lose(worker: Worker, reason: string): void {
    if (this.worker === worker) this.worker = undefined;
    worker.terminate();
    for (const [call, entry] of this.pending) {
      if (entry.worker !== worker) continue;
      this.settle(call);
      entry.reject(this.options.lost(reason));
    }
  }
}

/** Moves the transfer list's buffers when it can; memory a native module owns (snappy's) goes as a copy. */
function post(worker: Worker, message: unknown, transfer: ArrayBuffer[]): void {
  if (transfer.length === 0) return worker.postMessage(message);
  try {
    worker.postMessage(message, transfer);
  } catch {
    worker.postMessage(message);
  }
}

declare const self: Worker;

export interface ServeOptions<Value, Wire> {
  /** A thrown error as data the main thread can receive. */
  wire(error: unknown): Wire;
  /** Buffers of the value to move rather than copy (the thread must not use them after). */
  transfer?(value: Value): ArrayBuffer[];
}

/** The thread's side: each call run as it comes, answered with its value or its error as data. */
export function serve<Request, Value, Wire>(handle: (request: Request) => Value | Promise<Value>, options: ServeOptions<Value, Wire>): void {
  self.onmessage = async (message: MessageEvent<CallMessage<Request>>) => {
    const { call, request } = message.data;
    let value: Value;
    try {
      value = await handle(request);
    } catch (error) {
      self.postMessage({ call, error: options.wire(error) } satisfies ReplyMessage<Value, Wire>);
      return;
    }
    self.postMessage({ call, value } satisfies ReplyMessage<Value, Wire>, options.transfer?.(value) ?? []);
  };
}
