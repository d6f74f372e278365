// One instance per port (docs/operating.md): both listeners bind without SO_REUSEPORT, and the host and
// ports are tried before the database starts, so a second logpond on ports in use, or a HOST this
// machine cannot listen on, exits at once with a message that says which, instead of taking half
// of the first one's connections or starting PostgreSQL for nothing.
import { lookup } from "node:dns/promises";
import { createServer } from "node:net";

/** Bun.serve options for a listener that must be the only one on its port. */
export const EXCLUSIVE = { reusePort: false } as const;

/**
 * Bun.serve options for an ingest worker's listener: its supervisor checked the port is free, then
 * its workers share it (cluster/supervisor.ts); the kernel spreads new connections over them.
 */
export const SHARED = { reusePort: true } as const;

export class PortInUseError extends Error {}

/** HOST cannot be listened on at all: it does not resolve, or is no address of this machine. */
export class HostError extends Error {}

/** A listener to check: its host, the setting that host came from (for the message), its port. */
export interface PlannedListener {
  host: string;
  /** HOST, API_HOST or INGEST_HOST. */
  variable: string;
  port: number;
}

/**
 * Throws HostError when a listener's host cannot be listened on (tried on a free port, so also
 * when every port is 0), PortInUseError naming every listener whose port is taken on its host, or
 * an Error for a port refused otherwise (a privileged one).
 */
export async function assertPortsFree(listeners: Record<string, PlannedListener>): Promise<void> {
  const checked = new Set<string>();
  for (const { host, variable } of Object.values(listeners)) {
    if (checked.has(host)) continue;
    checked.add(host);
    const anyPort = await tryListen(bindable(host), 0);
    if (anyPort !== undefined) throw new HostError(await hostProblem(host, variable, anyPort));
  }
  const taken: { name: string; host: string; port: number }[] = [];
  const refused: string[] = [];
  for (const [name, { host, port }] of Object.entries(listeners)) {
    if (port === 0) continue;
    const error = await tryListen(bindable(host), port);
    if (error === undefined) continue;
    if (error.code === "EADDRINUSE") taken.push({ name, host, port });
    else refused.push(`${name} ${port} on ${host} cannot be listened on: ${error.message}`);
  }
  if (taken.length > 0) {
    const oneHost = taken.every(({ host }) => host === taken[0]!.host);
    const where = oneHost
      ? `${taken.map(({ name, port }) => `${name} ${port}`).join(" and ")} on ${taken[0]!.host}`
      : taken.map(({ name, port, host }) => `${name} ${port} on ${host}`).join(" and ");
    throw new PortInUseError(
      `${where}: already in use (another logpond, or another program, listens there). ` + "Stop it, or choose free ports with API_PORT / INGEST_PORT.",
    );
  }
  if (refused.length > 0) throw new Error(`${refused.join("; ")}. Choose other ports with API_PORT / INGEST_PORT.`);
}

/** undefined when `host:port` can be listened on (and is let go at once), else why not. */
function tryListen(host: string, port: number): Promise<(Error & { code?: string }) | undefined> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (error) => resolve(error));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** Bun.serve takes [::1]; node:net wants ::1. */
function bindable(host: string): string {
  return host.replace(/^\[(.*)\]$/, "$1");
}

async function hostProblem(host: string, variable: string, error: Error): Promise<string> {
  const fix = "Set it to an address of this machine: 127.0.0.1 (this machine only), 0.0.0.0 or :: (every interface), or a name that resolves to one.";
  const addresses = await lookup(bindable(host), { all: true }).then(
    (found) => found.map((a) => a.address),
    () => undefined,
  );
  if (addresses === undefined) return `${variable}=${JSON.stringify(host)} cannot be resolved to an address. ${fix}`;
  return `${variable}=${JSON.stringify(host)} (${addresses.join(", ")}) cannot be listened on: ${error.message}. ${fix}`;
}
