// CPU profile of logpond under wrk -c64 for one scenario: the evidence behind hot-path changes.
//   bun bench/profile.ts [payload=json-1] [corpus=realistic] [seconds=6] [--paused]
// --paused: the source is paused (events decoded, validated and dropped: no ring, no COPY), which
// isolates the request path from the flusher's and PostgreSQL's share of the machine.
// Starts an embedded PostgreSQL and `bun --cpu-prof --cpu-prof-md src/main.ts`, creates a source,
// runs wrk, stops the service (SIGTERM: the profile is written on exit) and prints where the
// .cpuprofile and its markdown summary are (open the first in Chrome DevTools → Performance).
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { runMigrations } from "../src/store/db";
import { startEmbeddedPostgres } from "../src/store/embedded";
import { createSource, SERVICE_API_TOKEN } from "../test/helpers/service";
import { payload, type Corpus, type PayloadName } from "./payloads";
import { findWrk, runWrk, writeWrkFiles } from "./wrk";
import { benchDir } from "./lib";

const paused = process.argv.includes("--paused");
const [name = "json-1", corpus = "realistic", seconds = "6"] = process.argv.slice(2).filter((a) => !a.startsWith("--")) as [PayloadName?, Corpus?, string?];
const wrk = findWrk(console.log);
if (!wrk.path) throw new Error(wrk.note);
const work = benchDir("logpond-profile-");
const profiles = path.join(work, "profiles");
const pg = await startEmbeddedPostgres(path.join(work, "pg"), 0);
try {
  await runMigrations(pg.url);
  const proc = Bun.spawn([process.execPath, "--cpu-prof", "--cpu-prof-md", "--cpu-prof-interval=250", `--cpu-prof-dir=${profiles}`, path.join(import.meta.dir, "..", "src", "main.ts")], {
    env: { ...process.env, DATABASE_URL: pg.url, DATA_DIR: path.join(work, "service"), API_PORT: "0", INGEST_PORT: "0", API_TOKEN: SERVICE_API_TOKEN },
    stdout: "pipe",
    stderr: "inherit",
  });
  let banner = "";
  for await (const part of proc.stdout as ReadableStream<Uint8Array>) {
    banner += new TextDecoder().decode(part);
    if (/ingestion\s+http\S+/.test(banner)) break;
  }
  const apiUrl = /management API\s+(http\S+)\/api\/v1\/sources/.exec(banner)![1]!;
  const ingestUrl = /ingestion\s+(http\S+)\//.exec(banner)![1]!;
  const source = await createSource({ proc, apiUrl, ingestUrl, output: () => banner }, "profile");
  if (paused) {
    const response = await fetch(`${apiUrl}/api/v1/sources/${source.id}`, { method: "PATCH", headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` }, body: JSON.stringify({ ingesting_paused: true }) });
    if (!response.ok) throw new Error(`pause: ${response.status} ${await response.text()}`);
  }
  const p = payload(name, corpus);
  const dir = writeWrkFiles(path.join(work, "wrk"), p, [source.token]);
  const r = await runWrk(wrk.path, `${ingestUrl}/`, dir, p.bodies.length, Number(seconds));
  console.log(`${name} (${corpus}): ${Math.round((r.statuses["202"] ?? 0) / r.seconds)} req/s acknowledged, statuses ${JSON.stringify(r.statuses)}, p99 ${r.p99} ms`);
  proc.kill("SIGTERM");
  await proc.exited;
  for (const file of readdirSync(profiles)) console.log(path.join(profiles, file));
} finally {
  await pg.stop();
}
