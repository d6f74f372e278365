// What building blocks from committed tuples costs on the main thread and on a worker thread (the
// memory path's seal threads, src/store/seal-worker.ts), and where a block's time goes. The work is
// the seal thread's own: each event's jsonb text (src/codec/jsonb-text.ts), then BlockBuilder
// (src/store/blocks.ts: ordering, per-minute counts, the Bloom filter's hashes, deflate and the
// payload's frame), on 20,000 of bench/corpus.ts's events over three sources. Rounds alternate
// between the main thread and two workers (smol, as src/rpc.ts starts them, and a default one), each
// with and without a full collection every 32 MiB (as the seal thread does); wall time of the work
// alone, the first round dropped. Then the parts of one block apart.
//   bun bench/seal-build.ts [rounds]
import { blockHashes } from "../src/codec/grams";
import { jsonbText } from "../src/codec/jsonb-text";
import { PayloadText } from "../src/codec/pgp";
import { buildFrom, texts } from "./seal-build-work";

const ROUNDS = Number(process.argv[2] ?? 6);
const url = new URL("./seal-build-thread.ts", import.meta.url).href;
const threads = { "worker (smol)": new Worker(url, { smol: true }), worker: new Worker(url) };
const ask = (thread: Worker, gc: boolean) =>
  new Promise<number>((resolve) => {
    thread.onmessage = (event) => resolve(event.data as number);
    thread.postMessage(gc);
  });

const results = new Map<string, number[]>();
const add = (name: string, value: number) => results.set(name, [...(results.get(name) ?? []), value]);
for (let round = 0; round <= ROUNDS; round++) {
  for (const gc of [false, true]) {
    const suffix = gc ? ", collected every 32 MiB" : "";
    add(`main thread${suffix}`, buildFrom(gc));
    for (const [name, thread] of Object.entries(threads)) add(`${name}${suffix}`, await ask(thread, gc));
  }
}
const range = (values: number[]) => `${Math.min(...values.slice(1)).toFixed(1)}–${Math.max(...values.slice(1)).toFixed(1)}`;
console.log(`jsonb text + blocks, µs/event (min–max of ${ROUNDS} rounds):`);
for (const [name, values] of results) console.log(`  ${name.padEnd(40)} ${range(values)}`);

const lines = texts.map((text) => jsonbText(text).line);
/** The lines' payload as src/store/blocks.ts writes it (one line at a time into the literal packet). */
const text = new PayloadText();
const payload = (block: string[], level: number) => {
  for (let i = 0; i < block.length; i++) {
    if (i > 0) text.byte(0x0a);
    text.text(block[i]!);
  }
  return text.seal(level);
};
const parts = new Map<string, number[]>();
for (let round = 0; round <= ROUNDS; round++) {
  const time = (name: string, work: (block: string[]) => unknown) => {
    const started = performance.now();
    for (let at = 0; at < lines.length; at += 1000) work(lines.slice(at, at + 1000));
    parts.set(name, [...(parts.get(name) ?? []), ((performance.now() - started) * 1000) / lines.length]);
  };
  time("jsonb text", (block) => block.forEach((line) => jsonbText(line)));
  time("filter hashes", (block) => blockHashes(block));
  time("payload (deflate 6, framed)", (block) => payload(block, 6));
  time("payload (deflate 1, framed)", (block) => payload(block, 1));
  time("zstd 3 of the same text", (block) => Bun.zstdCompressSync(Buffer.from(block.join("\n")), { level: 3 }));
}
console.log("parts, main thread, µs/event:");
for (const [name, values] of parts) console.log(`  ${name.padEnd(40)} ${range(values)}`);
process.exit(0);
