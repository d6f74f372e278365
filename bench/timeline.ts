// What the flusher commits while wrk loads one scenario, every 250 ms, then the end-to-end rate:
//   bun bench/timeline.ts [payload=logtail-gzip-msgpack-1000] [corpus=realistic] [seconds=8] [--quiet]
// Settings to try go in LP_ENV (bench/probe.ts), e.g. LP_ENV='{"FLUSH_STREAMS":"4"}'.
// How the flusher's stall under load was seen: with the flush connections on the main thread,
// nothing was committed for the first 3.5 s of 1000-event @logtail/node bodies (store/flush-thread.ts).
import type { Corpus, PayloadName } from "./payloads";
import { metricSum } from "./lib";
import { startProbe } from "./probe";

const [name = "logtail-gzip-msgpack-1000", corpus = "realistic", seconds = "8"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const quiet = process.argv.includes("--quiet");
const probe = await startProbe("logpond-timeline-", name as PayloadName, corpus as Corpus);

async function counts() {
  const text = await (await fetch(`${probe.service.apiUrl}/metrics`)).text();
  const value = (key: string) => metricSum(text, key) ?? NaN;
  return { received: value("logpond_ingest_events_received_total"), flushed: value("logpond_flush_events_total"), buffered: value("logpond_buffer_events") };
}

try {
  const started = performance.now();
  const elapsed = () => ((performance.now() - started) / 1000).toFixed(2);
  let loaded = false;
  const load = probe.load(Number(seconds)).finally(() => (loaded = true));
  let last = await counts();
  if (!quiet) console.log("seconds  accepted  committed  buffered");
  while (!loaded || last.buffered > 0) {
    await Bun.sleep(250);
    const now = await counts();
    if (!quiet) console.log(`${elapsed().padStart(7)}  ${String(now.received - last.received).padStart(8)}  ${String(now.flushed - last.flushed).padStart(9)}  ${String(now.buffered).padStart(8)}`);
    last = now;
  }
  const run = await load;
  const seconds_ = (performance.now() - started) / 1000;
  console.log(`${name} ${corpus}: ${last.received} events accepted, all committed at ${elapsed()} s: ${Math.round(last.received / seconds_)} events/s end to end; ${run.statuses["202"] ?? 0} × 202, ${run.statuses["503"] ?? 0} × 503 seen by wrk`);
} finally {
  await probe.stop();
}
