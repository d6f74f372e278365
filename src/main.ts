// Wiring only: configuration → a running logpond → banner; SIGTERM/SIGINT drain and exit 0, or
// exit 1 when PostgreSQL could not take everything in time (the log says how many were spilled).
import { ConfigError, loadConfig } from "./config";
import { startLogpond } from "./server";

let config;
try {
  config = loadConfig();
} catch (error) {
  console.error(error instanceof ConfigError ? `logpond: ${error.message}` : error);
  process.exit(2);
}

// LOG_LEVEL=silent drops the log lines; the banner (tools read the URLs from it) and the reasons
// for a failed start are printed whatever the level.
const log = config.logLevel === "silent" ? () => {} : (line: string) => console.log(`${new Date().toISOString()} ${line}`);

const started = performance.now();
let logpond;
try {
  logpond = await startLogpond(config, log);
} catch (error) {
  console.error(`logpond: could not start: ${(error as Error).message}`);
  process.exit(1);
}

// Signals before the banner: a supervisor may send SIGTERM as soon as it reads the banner.
let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping (draining ${logpond.ring.heldEvents} buffered events)`);
    const drained = await logpond.stop();
    const { events, file } = logpond.spilled;
    if (drained) log("stopped; nothing left behind");
    else if (events > 0) log(`stopped; ${events} events spilled to ${file}, to be written at the next start`);
    else log("stopped; some buffered events were not written");
    process.exit(drained ? 0 : 1);
  });
}

console.log(
  [
    `logpond is running (started in ${Math.round(performance.now() - started)} ms)`,
    `  management API  ${logpond.apiUrl}/api/v1/sources`,
    `  live tail page  ${logpond.apiUrl}/`,
    `  ingestion       ${logpond.ingestUrl}/`,
    // The token in clear only the once it is made: banners end up in log collectors.
    `  API token       ${logpond.apiToken.generated ? `${logpond.apiToken.token}  (generated now; kept in ${logpond.apiToken.origin})` : `in ${logpond.apiToken.origin}`}`,
    `  database        ${logpond.store.description}`,
    `  psql            ${logpond.store.psql}`,
    `  acknowledgement ${config.ingestAck}; flush every ${config.flushIntervalMs} ms or ${config.flushMaxEvents} events`,
  ].join("\n"),
);
