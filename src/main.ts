// Wiring only: configuration → a running logpond → banner; SIGTERM/SIGINT drain and exit 0, or
// exit 1 when PostgreSQL could not take everything in time (the log says how many were spilled).
// Errors nothing handled are caught process-wide (uncaught.ts): counted, and a rejection served on,
// an exception stopped on as SIGTERM does (exit 1). The same entry runs one logpond, the
// supervisor of INGEST_WORKERS ingest workers, a worker (started by its supervisor, which it tells
// when it listens instead of printing a banner) and a ROLE=ingest node.
import { availableParallelism } from "node:os";
import { forwardedText } from "./cluster/gather";
import { reportToSupervisor } from "./cluster/worker";
import { ConfigError, ingestWorkers, loadConfig } from "./config";
import { describeError } from "./errors";
import { type IngestNode, type Logpond, startIngestNode, startLogpond } from "./server";
import { guardProcess } from "./uncaught";

let config;
try {
  config = loadConfig();
} catch (error) {
  console.error(error instanceof ConfigError ? `logpond: ${error.message}` : error);
  process.exit(2);
}

// LOG_LEVEL=silent drops the log lines; the banner (tools read the URLs from it) and the reasons
// for a failed start are printed whatever the level.
const worker = config.workerIndex === undefined ? "" : ` [ingest worker ${config.workerIndex}]`;
const log = config.logLevel === "silent" ? () => {} : (line: string) => console.log(`${new Date().toISOString()}${worker} ${line}`);

// A signal while starting the embedded PostgreSQL is kept and acted on once started: killed halfway,
// the start would leave it running without its logpond. Elsewhere (DATABASE_URL, an ingest node
// waiting for its schema) nothing of this process's outlives it: it exits at once, as a second
// signal does.
let signalledWhileStarting: string | undefined;
const keepSignal = (signal: string) => {
  if (signalledWhileStarting !== undefined || config.databaseUrl !== undefined) process.exit(signal === "SIGINT" ? 130 : 143);
  signalledWhileStarting = signal;
};
for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, keepSignal);

const started = performance.now();
const starting: Promise<IngestNode & Partial<Logpond>> =
  config.role === "ingest" ? startIngestNode(config, log) : startLogpond(config, log, ingestWorkers(config, availableParallelism(), process.platform));
const logpond = await starting.catch((error: Error) => {
  console.error(`logpond${worker}: could not start: ${error.message}`);
  return process.exit(1);
});

// Stops as SIGTERM does: ingestion refused, the buffer drained or spilled. Exits 0 when nothing
// was left behind, else 1; after an uncaught exception always 1 (see uncaught.ts).
let stopping = false;
async function shutdown(why: string, failed: boolean): Promise<void> {
  if (stopping) return;
  stopping = true;
  log(`${why}: stopping (draining ${logpond.ring.heldEvents} buffered events)`);
  let drained = false;
  try {
    drained = await logpond.stop();
  } catch (error) {
    console.error(`logpond: the stop failed: ${describeError(error)}`);
  }
  const { events, file } = logpond.spilled;
  if (drained) log("stopped; nothing left behind");
  else if (events > 0) log(`stopped; ${events} events spilled to ${file}, to be written at the next start`);
  else if (logpond.workers?.leftBehind) log("stopped; ingest workers left events behind (each worker's line above says how many it spilled)");
  else log("stopped; some buffered events were not written");
  process.exit(drained && !failed ? 0 : 1);
}

// Before the signals and the banner: from here on no error ends the process unannounced.
guardProcess({
  counted: (kind) => logpond.uncaughtErrors.inc(kind),
  stop: (why) => void shutdown(why, true),
});

// Signals before the banner: a supervisor may send SIGTERM as soon as it reads the banner.
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.off(signal, keepSignal);
  process.on(signal, () => void shutdown(signal, false));
}
if (signalledWhileStarting) void shutdown(`${signalledWhileStarting} while starting`, false);

const { apiUrl, apiToken, workers } = logpond;
if (config.workerIndex !== undefined)
  reportToSupervisor(
    logpond.ingestUrl,
    logpond.ingested,
    () => forwardedText(logpond.metrics.render()),
    () => logpond.flusher.flush(),
    (why) => void shutdown(why, false),
    logpond.staging,
  );
else
  console.log(
    [
      `logpond ${apiUrl ? "is" : "ingest node is"} running (started in ${Math.round(performance.now() - started)} ms)`,
      ...(apiUrl ? [`  management API  ${apiUrl}/api/v1/sources`, `  live tail page  ${apiUrl}/`] : []),
      `  ingestion       ${logpond.ingestUrl}/${workers ? `  (${workers.pids().size} ingest workers)` : ""}`,
      // The token in clear only the once it is made: banners end up in log collectors.
      ...(apiToken
        ? [`  API token       ${apiToken.generated ? `${apiToken.token}  (generated now; kept in ${apiToken.origin})` : `in ${apiToken.origin}`}`]
        : []),
      `  database        ${logpond.store.description}`,
      `  psql            ${logpond.store.psql}`,
      `  acknowledgement ${config.ingestAck}; flush every ${config.flushIntervalMs} ms or ${config.flushMaxEvents} events`,
    ].join("\n"),
  );
