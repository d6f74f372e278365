// The conservation check: a generator sends numbered events and records which numbers were
// acknowledged (202); the verifier reads what PostgreSQL holds for the source and counts
// lost = acknowledged − stored and duplicates = stored more than once. Numbers are never reused,
// so a request that failed or got no answer is simply not counted as acknowledged.
import type postgres from "postgres";

export interface GeneratorOptions {
  ingestUrl: string;
  token: string;
  workers: number;
  /** Events per request. */
  batch: number;
  /** Pause between one worker's requests. */
  pauseMs: number;
  /** The first number (default 0): a second generator after a restart goes on from the first's `next`. */
  first?: number;
  /** More fields for event `seq` (a `dt`, words to search for); `seq` and `message` are the generator's. */
  fields?: (seq: number) => Record<string, unknown>;
}

export class Generator {
  /** The next number to send. */
  next: number;
  private running = false;
  private workers: Promise<void>[] = [];
  /** Acknowledged numbers, as [first, count] ranges (one per 202). */
  readonly acked: [number, number][] = [];
  readonly statuses = new Map<string, number>();
  /** Every answer: when it came (Date.now()) and its status. */
  readonly answers: [number, string][] = [];

  constructor(private readonly options: GeneratorOptions) {
    this.next = options.first ?? 0;
  }

  start(): void {
    this.running = true;
    this.workers = Array.from({ length: this.options.workers }, () => this.work());
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.workers);
  }

  get ackedEvents(): number {
    return this.acked.reduce((sum, [, n]) => sum + n, 0);
  }

  private async work(): Promise<void> {
    const { batch, ingestUrl, token, pauseMs } = this.options;
    while (this.running) {
      const first = this.next;
      this.next += batch;
      const fields = this.options.fields;
      const events = Array.from({ length: batch }, (_, i) => ({ ...fields?.(first + i), seq: first + i, message: `conservation event ${first + i}` }));
      let status: string;
      try {
        const response = await fetch(`${ingestUrl}/`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(events),
          signal: AbortSignal.timeout(30_000),
        });
        await response.arrayBuffer();
        status = String(response.status);
        if (response.status === 202) this.acked.push([first, batch]);
      } catch {
        status = "no answer";
        await Bun.sleep(20);
      }
      this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
      this.answers.push([Date.now(), status]);
      if (pauseMs > 0) await Bun.sleep(pauseMs);
    }
  }
}

export interface Verdict {
  acked: number;
  stored: number;
  lost: number;
  duplicates: number;
  /** Stored although never acknowledged (a request whose answer was lost): allowed. */
  storedUnacked: number;
}

export async function verify(sql: postgres.Sql, sourceId: number, acked: readonly [number, number][]): Promise<Verdict> {
  const rows = await sql<{ seq: number; n: number }[]>`
    select (raw->>'seq')::int as seq, count(*)::int as n from log_events where source_id = ${sourceId} group by 1`;
  const stored = new Map<number, number>();
  let duplicates = 0;
  let total = 0;
  for (const { seq, n } of rows) {
    stored.set(seq, n);
    duplicates += n - 1;
    total += n;
  }
  let ackedCount = 0;
  let lost = 0;
  const ackedSet = new Set<number>();
  for (const [first, count] of acked) {
    for (let seq = first; seq < first + count; seq++) {
      ackedCount++;
      ackedSet.add(seq);
      if (!stored.has(seq)) lost++;
    }
  }
  let storedUnacked = 0;
  for (const seq of stored.keys()) if (!ackedSet.has(seq)) storedUnacked++;
  return { acked: ackedCount, stored: total, lost, duplicates, storedUnacked };
}
