// The one-scenario probes' set-up (cpu-split.ts, perf.ts): an embedded PostgreSQL in a temporary
// folder, `bun src/main.ts` on it, one source (paused with --paused) and wrk's files for a payload.
// `stop()` stops the service and PostgreSQL by their handles and removes the folder.
import { rmSync } from "node:fs";
import * as path from "node:path";
import { createSource, SERVICE_API_TOKEN, spawnService, type Service } from "../test/helpers/service";
import { benchDir, benchPostgres } from "./lib";
import { payload, type Corpus, type Payload, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";

export interface Probe {
  work: string;
  service: Service;
  source: { id: number; token: string };
  /** Runs wrk -c64 with the payload (or another one) for `seconds`. */
  load(seconds: number, other?: PayloadName): ReturnType<typeof runWrk>;
  payload: Payload;
  stop(): Promise<void>;
}

export async function startProbe(prefix: string, name: PayloadName, corpus: Corpus, env: Record<string, string> = {}): Promise<Probe> {
  const wrk = findWrk(() => {});
  if (!wrk.path) throw new Error(wrk.note);
  const work = benchDir(prefix);
  const pg = await benchPostgres(work);
  // LP_ENV='{"FLUSH_STREAMS":"4"}': the service's configuration for a probe, to try settings.
  const tried = JSON.parse(process.env.LP_ENV ?? "{}") as Record<string, string>;
  const service = await spawnService({ DATABASE_URL: pg.url, DATA_DIR: path.join(work, "data"), ...tried, ...env });
  const stop = async () => {
    service.proc.kill("SIGTERM");
    await service.proc.exited;
    await pg.stop();
    rmSync(work, { recursive: true, force: true });
  };
  try {
    const source = await createSource(service, "probe");
    if (process.argv.includes("--paused")) {
      await fetch(`${service.apiUrl}/api/v1/sources/${source.id}`, { method: "PATCH", headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` }, body: JSON.stringify({ ingesting_paused: true }) });
    }
    const p = payload(name, corpus);
    const load = (seconds: number, other?: PayloadName) => {
      const used = other ? payload(other, corpus) : p;
      const dir = writeWrkFiles(path.join(work, `wrk-${other ?? name}`), used, [source.token]);
      return runWrk(wrk.path!, `${service.ingestUrl}/`, dir, used.bodies.length, seconds);
    };
    return { work, service, source, load, payload: p, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
