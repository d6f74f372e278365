// A Server-Sent Events reader for tests: collects events and comments from a fetch Response in
// the background, and waits on a condition with a deadline (never on a timer alone).

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
  at: number;
}

export class SseReader {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  /** The last `id:` seen, with or without data (what EventSource sends back as Last-Event-ID). */
  position: string | undefined;
  ended = false;
  private readonly reader: { read(): Promise<{ value?: string; done: boolean }>; cancel(): Promise<void> };
  private waiters: (() => void)[] = [];

  constructor(response: Response) {
    if (!response.body) throw new Error("no body");
    this.reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    void this.run();
  }

  /** Row events only, parsed. */
  rows(): any[] {
    return this.events.filter((e) => e.event === "message").map((e) => JSON.parse(e.data));
  }

  dropped(): number {
    return this.events.filter((e) => e.event === "dropped").reduce((sum, e) => sum + (JSON.parse(e.data).count ?? 0), 0);
  }

  lastId(): string | undefined {
    for (let i = this.events.length - 1; i >= 0; i--) if (this.events[i]!.id) return this.events[i]!.id;
    return undefined;
  }

  async until(condition: () => boolean, timeoutMs = 20_000, what = "condition"): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (this.ended) throw new Error(`stream ended before ${what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async close(): Promise<void> {
    await this.reader.cancel().catch(() => {});
  }

  private async run(): Promise<void> {
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await this.reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          this.parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
        for (const wake of this.waiters.splice(0)) wake();
      }
    } catch {}
    this.ended = true;
    for (const wake of this.waiters.splice(0)) wake();
  }

  private parse(block: string): void {
    let id: string | undefined;
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        this.comments.push(line.slice(1).trim());
        continue;
      }
      const colon = line.indexOf(":");
      const field = line.slice(0, colon);
      const value = line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (id !== undefined) this.position = id;
    if (data.length > 0) this.events.push({ id, event, data: data.join("\n"), at: performance.now() });
  }
}
