// `bun bench/copy-format.ts [--rows 200000] [--rounds 3] [--corpus realistic]`: PostgreSQL's side
// of the COPY format choice (README "Storage layout"). The same rows — a corpus's json-100 bodies
// as logpond's encoder writes them — go into log_events as COPY text (what psql \copy and logpond
// before binary COPY send) and as binary COPY (codec/tuples.ts), alternating, one stream, on an
// embedded PostgreSQL of its own. Prints rows/s and the backend's CPU µs per row, per round.
import { readFileSync, rmSync } from "node:fs";
import postgres from "postgres";
import { decodeBody } from "../src/codec/decode";
import { encodeEvents, type Encoded } from "../src/codec/encode";
import { microsOfMillis } from "../src/codec/time";
import { COPY_HEADER, COPY_TRAILER, setIds, toText, tuplesOf } from "../src/codec/tuples";
import { benchDir, benchPostgres } from "./lib";
import { payload, type Corpus } from "./payloads";

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1]! : fallback);
const ROWS = Number(option("rows", "200000"));
const ROUNDS = Number(option("rounds", "3"));
const CORPUS = option("corpus", "realistic") as Corpus;
const LIMITS = { maxEventBytes: 1 << 20, maxDepth: 64 };

const bodies = payload("json-100", CORPUS).bodies.map((b) => Buffer.from((encodeEvents(decodeBody(Buffer.from(b), "json") as unknown[], "json", 1, microsOfMillis(Date.now()), LIMITS) as Encoded).rows));
/** ROWS rows as binary tuples (one buffer per body) and as the same rows' COPY text. */
const binary: Uint8Array[] = [];
const text: string[] = [];
for (let i = 0; i * 100 < ROWS; i++) {
  const body = Buffer.from(bodies[i % bodies.length]!);
  setIds(body, 100, 1 + i * 100);
  binary.push(body);
  text.push(tuplesOf(body).map(toText).join(""));
}

const work = benchDir("logpond-copy-format-");
const pg = await benchPostgres(work);
const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
try {
  const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }];
  const cpu = () => {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  };
  console.log(`copy format: ${ROWS} ${CORPUS} rows (${(text.reduce((s, t) => s + Buffer.byteLength(t), 0) / ROWS).toFixed(0)} B as text, ${(binary.reduce((s, b) => s + b.length, 0) / ROWS).toFixed(0)} B as tuples), ${ROUNDS} rounds, load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`);
  const results: Record<string, number[]> = { text: [], binary: [] };
  for (let round = 0; round <= ROUNDS; round++) {
    for (const format of ["text", "binary"] as const) {
      await sql`truncate log_events`;
      await sql`checkpoint`;
      const cpu0 = cpu();
      const started = performance.now();
      const stream = await sql.unsafe(`copy log_events (id, source_id, dt, raw) from stdin${format === "binary" ? " (format binary)" : ""}`).writable();
      if (format === "binary") stream.write(COPY_HEADER);
      for (const part of format === "binary" ? binary : text) if (!stream.write(part)) await new Promise((resolve) => stream.once("drain", resolve));
      if (format === "binary") stream.write(COPY_TRAILER);
      await new Promise((resolve, reject) => {
        stream.once("error", reject);
        stream.end(resolve);
      });
      const seconds = (performance.now() - started) / 1000;
      const micros = ((cpu() - cpu0) * 1e6) / ROWS;
      const [{ n }] = (await sql`select count(*)::int as n from log_events`) as unknown as [{ n: number }];
      if (n !== ROWS) throw new Error(`${format}: stored ${n} of ${ROWS}`);
      if (round === 0) continue; // warm-up: WAL segments and caches
      results[format]!.push(micros);
      console.log(`round ${round} ${format.padEnd(6)} ${Math.round(ROWS / seconds).toLocaleString("en").padStart(8)} rows/s  backend ${micros.toFixed(2)} µs/row`);
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(`backend CPU per row, medians: text ${median(results.text!).toFixed(2)} µs, binary ${median(results.binary!).toFixed(2)} µs (text ÷ binary = ${(median(results.text!) / median(results.binary!)).toFixed(2)})`);
} finally {
  await sql.end();
  await pg.stop();
  rmSync(work, { recursive: true, force: true });
}
