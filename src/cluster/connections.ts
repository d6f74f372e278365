// Keep-alive connections spread over ingest processes: a shipper holds a few connections for
// hours, and the kernel hands each connection to one process sharing INGEST_PORT (SO_REUSEPORT) at
// its start, so without an end a few busy clients pin a few workers. An answer carries
// `Connection: close` once its connection served INGEST_CONNECTION_MAX_REQUESTS requests or is
// INGEST_CONNECTION_MAX_AGE_MS old; Bun then closes the socket after that answer, and the client's
// next connection may land on another process. A connection is known by its peer's address and
// port, which no other open connection has; the two are forgotten once idle past FORGET_IDLE_MS
// (longer than any keep-alive timeout), so a closed connection's entry does not stay.
import type { Config } from "../config";

/** The peer of a request, as Bun's server.requestIP gives it. */
export type Peer = { address: string; port: number } | null;

const FORGET_IDLE_MS = 5 * 60_000;

interface Connection {
  requests: number;
  since: number;
  last: number;
}

export class ConnectionSpreader {
  private readonly connections = new Map<string, Connection>();
  /** When idle entries were last forgotten: swept by the requests themselves, no timer of its own. */
  private sweptAt: number;

  constructor(
    private readonly limits: { maxRequests: number; maxAgeMs: number },
    private readonly now: () => number = performance.now.bind(performance),
  ) {
    this.sweptAt = now();
  }

  /** Counts a request on its connection: true when its answer should close the connection. */
  request(peer: Peer): boolean {
    if (peer === null) return false;
    const key = `${peer.address}|${peer.port}`;
    const now = this.now();
    if (now - this.sweptAt >= FORGET_IDLE_MS) this.forgetIdle(now);
    let connection = this.connections.get(key);
    if (connection === undefined) {
      connection = { requests: 0, since: now, last: now };
      this.connections.set(key, connection);
    }
    connection.requests++;
    connection.last = now;
    const { maxRequests, maxAgeMs } = this.limits;
    if ((maxRequests > 0 && connection.requests >= maxRequests) || (maxAgeMs > 0 && now - connection.since >= maxAgeMs)) {
      this.connections.delete(key);
      return true;
    }
    return false;
  }

  /** Connections known now (for a test). */
  get size(): number {
    return this.connections.size;
  }

  private forgetIdle(now: number): void {
    this.sweptAt = now;
    const before = now - FORGET_IDLE_MS;
    for (const [key, connection] of this.connections) if (connection.last < before) this.connections.delete(key);
  }
}

/** The spreader of an ingest process that shares its port or sits behind a balancer (ROLE=ingest); none for one logpond. */
export function connectionSpreader(config: Config): ConnectionSpreader | undefined {
  if (config.role !== "ingest") return undefined;
  const limits = { maxRequests: config.ingestConnectionMaxRequests, maxAgeMs: config.ingestConnectionMaxAgeMs };
  return limits.maxRequests > 0 || limits.maxAgeMs > 0 ? new ConnectionSpreader(limits) : undefined;
}
