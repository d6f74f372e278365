// One instance per port (CONTRACT §9): both listeners bind without SO_REUSEPORT, and the host and
// ports are tried before the database starts, so a second logpond on ports in use, or a HOST this
// machine cannot listen on, exits at once with a message that says which, instead of taking half
// of the first one's connections or starting PostgreSQL for nothing.
import { lookup } from "node:dns/promises";
import { createServer } from "node:net";

/** Bun.serve options for a listener that must be the only one on its port. */
export const EXCLUSIVE = { reusePort: false } as const;

export class PortInUseError extends Error {}

/** HOST cannot be listened on at all: it does not resolve, or is no address of this machine. */
export class HostError extends Error {}

/**
 * Throws HostError when `host` cannot be listened on (tried on a free port, so also when every
 * port is 0), PortInUseError naming every listener whose port is taken, or an Error for a port
 * refused otherwise (a privileged one). `variable` names the setting the host came from.
 */
export async function assertPortsFree(host: string, ports: Record<string, number>, variable = "HOST"): Promise<void> {
  const bindable = host.replace(/^\[(.*)\]$/, "$1"); // Bun.serve takes [::1]; node:net wants ::1
  const anyPort = await tryListen(bindable, 0);
  if (anyPort !== undefined) throw new HostError(await hostProblem(host, bindable, variable, anyPort));
  const taken: string[] = [];
  const refused: string[] = [];
  for (const [name, port] of Object.entries(ports)) {
    if (port === 0) continue;
    const error = await tryListen(bindable, port);
    if (error === undefined) continue;
    if (error.code === "EADDRINUSE") taken.push(`${name} ${port}`);
    else refused.push(`${name} ${port} on ${host} cannot be listened on: ${error.message}`);
  }
  if (taken.length > 0) {
    throw new PortInUseError(
      `${taken.join(" and ")} on ${host}: already in use (another logpond, or another program, listens there). ` +
        "Stop it, or choose free ports with API_PORT / INGEST_PORT.",
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

async function hostProblem(host: string, bindable: string, variable: string, error: Error): Promise<string> {
  const fix = "Set it to an address of this machine: 127.0.0.1 (this machine only), 0.0.0.0 or :: (every interface), or a name that resolves to one.";
  const addresses = await lookup(bindable, { all: true }).then(
    (found) => found.map((a) => a.address),
    () => undefined,
  );
  if (addresses === undefined) return `${variable}=${JSON.stringify(host)} cannot be resolved to an address. ${fix}`;
  return `${variable}=${JSON.stringify(host)} (${addresses.join(", ")}) cannot be listened on: ${error.message}. ${fix}`;
}
