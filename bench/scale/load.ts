// bench/scale.ts's load: the NDJSON file's request bodies POSTed to logpond by concurrent
// senders, as a shipper sends them (a 503 or 429 resent after Retry-After, never a network error),
// as fast as logpond takes them or, with a rate, each body sent when its events are due.
import { fmt, progress } from "../lib";
import { type Body, type Plan, requestBodies } from "./corpus";
import type { Source } from "./service";

export interface LoadSettings {
  senders: number;
  /** Events per request at most. */
  batch: number;
  /** Events per second to send at (a body goes when the events before it are due); unset: as fast as acknowledged. */
  rate?: number;
  /** Send only every `of`-th body from the `index`-th (0-based): one of `of` sender processes (bench/scale/send.ts). */
  part?: { index: number; of: number };
}

export interface Load {
  seconds: number;
  /** Events acknowledged (this part's, with `part`). */
  events: number;
  requests: number;
  retries: number;
}

/** POSTs every body; a 503 (or 429) is resent, same body, after Retry-After, as a client does. */
export async function load(ingestUrl: string, sources: Source[], file: string, p: Plan, settings: LoadSettings): Promise<Load> {
  const part = settings.part ?? { index: 0, of: 1 };
  const bodies = partOf(requestBodies(file, settings.batch, p), part);
  let total = 0;
  let acked = 0;
  let requests = 0;
  let retries = 0;
  /** Events handed to senders so far: the next body is due when these are, at `settings.rate`. */
  let scheduled = 0;
  const started = performance.now();
  const ticker = setInterval(
    () =>
      progress(
        `load${part.of > 1 ? ` ${part.index + 1}/${part.of}` : ""}: ${fmt(acked)} ${part.of > 1 ? "" : `of ${fmt(p.n)} `}events acknowledged, ${fmt(acked / ((performance.now() - started) / 1000))} events/s, ${retries} retries`,
      ),
    10_000,
  );
  const sender = async () => {
    // Concurrent next() calls on one async generator are queued: each body goes to one sender.
    for (let next = await bodies.next(); !next.done; next = await bodies.next()) {
      const { source, events, body } = next.value;
      if (settings.rate) {
        const due = started + (scheduled / settings.rate) * 1000;
        scheduled += events;
        await Bun.sleep(Math.max(0, due - performance.now()));
      }
      const headers = { authorization: `Bearer ${sources[source]!.token}`, "content-type": "application/json" };
      for (;;) {
        // A network error is not retried: the request may have been accepted, and a resend
        // would store its events twice (the count check would then fail the run).
        const response = await fetch(`${ingestUrl}/`, { method: "POST", headers, body, signal: AbortSignal.timeout(120_000) });
        const text = await response.text();
        requests++;
        if (response.status === 202) break;
        if (response.status !== 503 && response.status !== 429) throw new Error(`ingest: ${response.status} ${text.slice(0, 300)}`);
        retries++;
        await Bun.sleep(1000 * Number(response.headers.get("retry-after") ?? 1));
      }
      acked += events;
    }
  };
  /** The bodies of this part, counted as they are handed out (the whole file's count is known only at its end). */
  async function* partOf(all: AsyncGenerator<Body>, { index, of }: { index: number; of: number }): AsyncGenerator<Body> {
    let k = 0;
    for await (const body of all) {
      if (k++ % of !== index) continue;
      total += body.events;
      yield body;
    }
  }
  try {
    await Promise.all(Array.from({ length: settings.senders }, sender));
  } finally {
    clearInterval(ticker);
  }
  if (acked !== total || (part.of === 1 && total !== p.n)) throw new Error(`acknowledged ${acked} events, sent ${total} of the plan's ${p.n}`);
  return { seconds: (performance.now() - started) / 1000, events: acked, requests, retries };
}
