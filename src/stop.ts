// The stop: bounded by SHUTDOWN_TIMEOUT_MS whatever clients and PostgreSQL do. The services
// server.ts lists are halted, then stopped one after the other, in reverse: the last started (the
// ingest listener) first, storage last. What each may take of the time is its own (service.ts).
import type { Service } from "./service";

/** Halts every service, then stops each in turn, the list in reverse. */
export async function stopAll(services: readonly Service[], shutdownTimeoutMs: number): Promise<void> {
  const deadline = performance.now() + shutdownTimeoutMs;
  const order = services.toReversed();
  for (const service of order) service.halt?.();
  for (const service of order) await service.stop(deadline);
}
