// One instance per port (CONTRACT §9): both listeners bind without SO_REUSEPORT, and the ports
// are tried before the database starts, so a second logpond on ports in use exits at once with a
// clear message instead of taking half of the first one's connections.
import { createServer } from "node:net";

/** Bun.serve options for a listener that must be the only one on its port. */
export const EXCLUSIVE = { reusePort: false } as const;

export class PortInUseError extends Error {}

/** Throws PortInUseError naming every listener whose port is taken on its host (port 0 is always free). */
export async function assertPortsFree(listeners: Record<string, { host: string; port: number }>): Promise<void> {
  const taken: { name: string; host: string; port: number }[] = [];
  for (const [name, { host, port }] of Object.entries(listeners)) {
    if (port !== 0 && !(await isFree(host, port))) taken.push({ name, host, port });
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
}

function isFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}
