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

/** POSTs every body of the file (or of its part); a 503 (or 429) is resent, same body, after Retry-After, as a client does. */
export async function load(ingestUrl: string, sources: Source[], file: string, p: Plan, settings: LoadSettings): Promise<Load> {
  const part = settings.part ?? { index: 0, of: 1 };
  const done = await post(
    ingestUrl,
    sources,
    partOf(requestBodies(file, settings.batch, p), part),
    settings,
    part.of > 1 ? `${part.index + 1}/${part.of}` : "",
  );
  if (part.of === 1 && done.events !== p.n) throw new Error(`acknowledged ${done.events} events of the plan's ${p.n}`);
  return done;
}

/** A sender process's part of the file, in memory: read before its load is timed (bench/scale/send.ts). */
export async function bodiesOf(file: string, p: Plan, batch: number, part: { index: number; of: number }): Promise<Body[]> {
  const bodies: Body[] = [];
  for await (const body of partOf(requestBodies(file, batch, p), part)) bodies.push(body);
  return bodies;
}

/** Every `of`-th body from the `index`-th. */
async function* partOf(all: AsyncGenerator<Body>, { index, of }: { index: number; of: number }): AsyncGenerator<Body> {
  let k = 0;
  for await (const body of all) if (k++ % of === index) yield body;
}

/** POSTs `bodies` from `settings.senders` concurrent senders; every one must be acknowledged. */
export async function post(
  ingestUrl: string,
  sources: Source[],
  bodies: AsyncIterator<Body> | Iterator<Body>,
  settings: Pick<LoadSettings, "senders" | "rate">,
  label = "",
): Promise<Load> {
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
        `load${label ? ` ${label}` : ""}: ${fmt(acked)} events acknowledged, ${fmt(acked / ((performance.now() - started) / 1000))} events/s, ${retries} retries`,
      ),
    10_000,
  );
  const sender = async () => {
    // Concurrent next() calls on one async generator are queued: each body goes to one sender.
    for (let next = await bodies.next(); !next.done; next = await bodies.next()) {
      const { source, events, body } = next.value;
      total += events;
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
  try {
    await Promise.all(Array.from({ length: settings.senders }, sender));
  } finally {
    clearInterval(ticker);
  }
  if (acked !== total) throw new Error(`acknowledged ${acked} events, sent ${total}`);
  return { seconds: (performance.now() - started) / 1000, events: acked, requests, retries };
}
