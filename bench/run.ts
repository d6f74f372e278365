// `npm run bench`: logpond's speed as ratios to ceilings measured in the same run, on this box.
//   npm run bench [-- --quick] [--runs 3] [--seconds 5] [--only json-100,durable] [--corpus realistic]
// 1. PostgreSQL: the embedded one in a temporary DATA_DIR, or DATABASE_URL (then log_events is
//    not truncated between runs; the bench's sources are deleted at the end).
// 2. Ceilings, per corpus (ceilings.ts): psql \copy of the same rows from a file; a bare Bun.serve
//    that reads the body and answers 202, under wrk -c64.
// 3. Scenarios, per corpus (scenarios.ts) against `bun src/main.ts`, each `runs` times, medians;
//    after each run the conservation check (PostgreSQL holds exactly the acknowledged events).
// 4. Extra modules (EXTRA_MODULES below), then micro-benchmarks (micro.ts).
// 5. Report (report.ts): stdout, bench/out/results/<time>.json (not committed), and bench/RESULTS.md
//    on a full run.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { cpus } from "node:os";
import * as path from "node:path";
import postgres from "postgres";
import { createSource, spawnService, SERVICE_API_TOKEN, type Service } from "../test/helpers/service";
import { bareCeilings, copyCeilings } from "./ceilings";
import { runStandalone } from "./appendix";
import { benchDir, benchPostgres, progress, type BenchContext, type BenchModule, type Row } from "./lib";
import { runMicro } from "./micro";
import { CORPORA, type Corpus } from "./payloads";
import { writeReport } from "./report";
import { runScenario, SCENARIOS, type Scenario } from "./scenarios";
import { findWrk } from "./wrk";

/**
 * Extra bench modules run after the scenarios, each `export async function run(ctx: BenchContext):
 * Promise<Row[]>` (bench/lib.ts), paths relative to bench/. Their rows join the report ("Other rows"
 * unless they set `corpus`). E.g. "./storage.ts", "./read.ts" once those export `run`.
 */
const EXTRA_MODULES: string[] = [];

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] ? argv[at + 1]! : fallback;
};
const QUICK = flag("quick");
const RUNS = Number(option("runs", QUICK ? "1" : "3"));
const SECONDS = Number(option("seconds", QUICK ? "3" : "5"));
const ONLY = option("only", "").split(",").filter(Boolean);
const CORPUS_LIST = option("corpus", CORPORA.join(",")).split(",").filter(Boolean) as Corpus[];
const COPY_EVENTS = QUICK ? 200_000 : 400_000;
const ROOT = path.join(import.meta.dir, "..");
const FLUSH_INTERVAL_MS = 200;
const BUFFER_MAX_BYTES = 256 * 1024 * 1024;

async function main(): Promise<boolean> {
  const work = benchDir("logpond-bench-");
  const children: BenchContext["children"] = [];
  const { url, stop: stopPostgres } = await benchPostgres(work);
  const embedded = !process.env.DATABASE_URL;
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  const clear = async () => {
    if (embedded) await sql`truncate log_hot, log_blocks, flush_batches`;
  };
  const wrk = findWrk(progress);
  progress(wrk.note);
  const ctx: BenchContext = {
    url,
    sql,
    work,
    quick: QUICK,
    runs: RUNS,
    seconds: SECONDS,
    corpora: CORPUS_LIST,
    wrk: wrk.path,
    progress,
    children,
    want: (name) => ONLY.length === 0 || ONLY.some((o) => name.includes(o)),
  };

  const pgVersion = (await sql`select version() as v`)[0]!.v as string;
  const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).stdout.trim() || "unknown";
  const dirty = spawnSync("git", ["status", "--porcelain", "--", "src", "bench"], { cwd: ROOT, encoding: "utf8" }).stdout.trim() !== "";
  const machine = {
    cpu: cpus()[0]?.model ?? "unknown",
    cores: cpus().length,
    bun: Bun.version,
    postgres: pgVersion.split(" on ")[0]!,
    commit: dirty ? `${commit}+changes` : commit,
  };
  progress(
    `bench: ${RUNS} run(s) of ${SECONDS} s, corpora ${CORPUS_LIST.join(", ")}; ${machine.cpu} × ${machine.cores}, Bun ${machine.bun}, ${machine.postgres}, commit ${machine.commit}`,
  );

  const rows: Row[] = [];
  const services: Service[] = [];
  let failed = false;
  try {
    const ceilings: Record<string, { copy: number; bare: Record<string, number> }> = {};
    for (const corpus of CORPUS_LIST) {
      const copy = await copyCeilings(ctx, corpus, COPY_EVENTS, clear);
      rows.push(...copy);
      const bare = wrk.path ? await bareCeilings(ctx, corpus, ["json-1", "json-100"]) : { rows: [], reqPerSecond: {} };
      rows.push(...bare.rows);
      ceilings[corpus] = { copy: copy[0]!.median.eventsPerSecond, bare: bare.reqPerSecond };
    }

    const start = async (env: Record<string, string>) => {
      const service = await spawnService({ DATABASE_URL: url!, LOG_LEVEL: "info", ...env });
      children.push(service.proc);
      services.push(service);
      return service;
    };
    const buffered = await start({ DATA_DIR: path.join(work, "service") });
    const one = [await createSource(buffered, "bench")];
    const many: { id: number; token: string }[] = [];
    if (SCENARIOS.some((s) => s.sources === "many" && ctx.want(s.name))) for (let i = 0; i < 1000; i++) many.push(await createSource(buffered, `bench ${i}`));
    let durable: { service: Service; sources: { id: number; token: string }[] } | undefined;

    const chosen = (s: Scenario) => ctx.want(s.name);
    for (const corpus of CORPUS_LIST) {
      for (const s of SCENARIOS.filter(chosen)) {
        if (s.durable && !durable) {
          const service = await start({ DATA_DIR: path.join(work, "durable"), INGEST_ACK: "durable" });
          durable = { service, sources: [await createSource(service, "bench durable")] };
        }
        const env = s.durable ? durable! : { service: buffered, sources: s.sources === "many" ? many : one };
        const row = await runScenario(ctx, s, corpus, { ...env, clear, ceilings: ceilings[corpus]! }, rows);
        if (!row) continue;
        rows.push(row);
        if (row.mismatch) failed = true;
      }
    }
    if (!embedded) {
      for (const s of [...one, ...many])
        await fetch(`${buffered.apiUrl}/api/v1/sources/${s.id}`, { method: "DELETE", headers: { authorization: `Bearer ${SERVICE_API_TOKEN}` } }).catch(
          () => {},
        );
    }
    for (const service of services) {
      await service.stop();
    }

    for (const module of EXTRA_MODULES) {
      progress(`extra: ${module} …`);
      const loaded = (await import(path.join(import.meta.dir, module))) as BenchModule;
      rows.push(...(await loaded.run(ctx)));
    }

    progress("micro-benchmarks …");
    const micro = ONLY.length === 0 || ctx.want("micro") ? runMicro() : [];
    writeReport({
      rows,
      micro,
      machine,
      settings: {
        runs: RUNS,
        seconds: SECONDS,
        flushIntervalMs: FLUSH_INTERVAL_MS,
        bufferMaxBytes: BUFFER_MAX_BYTES,
        wrkNote: wrk.note,
        quick: QUICK,
        only: ONLY,
      },
    });
    // A full run ends with the storage layout's and the read path's own benches (bench/appendix.ts).
    if (!QUICK && ONLY.length === 0 && !(await runStandalone(progress, path.join(import.meta.dir, "RESULTS.md")))) failed = true;
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await sql.end({ timeout: 5 });
    await stopPostgres();
    rmSync(work, { recursive: true, force: true });
  }
  return !failed;
}

if (!(await main())) {
  console.error("bench: FAILED (stored ≠ acknowledged in some run, or a standalone bench failed: see above)");
  process.exit(1);
}
