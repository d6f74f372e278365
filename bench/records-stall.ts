// How long one body of many msgpackr record definitions holds the event loop, with msgpackr's
// compiling decoder and with its no-eval build (what decode.ts uses for every body). Run: npx bun bench/records-stall.ts [definitions=40000]
import { Packr, Unpackr } from "msgpackr";
import { Unpackr as NoEvalUnpackr } from "msgpackr/unpack-no-eval";
import { decodeBody } from "../src/codec/decode";

const definitions = Number(process.argv[2] ?? 40_000);
// Each object has its own key set, so each is a new record definition; used 5 times so msgpackr compiles it (after its third read).
const events = Array.from({ length: definitions }, (_, i) => ({ [`k${i}`]: i, [`v${i}`]: "x" }));
const body = Buffer.from(new Packr({ useRecords: true }).pack(events.flatMap((e) => [e, { ...e }, { ...e }, { ...e }, { ...e }])));
const time = (label: string, fn: () => unknown) => {
  const t0 = performance.now();
  fn();
  console.log(`${label.padEnd(28)} ${(performance.now() - t0).toFixed(0).padStart(6)} ms`);
};
console.log(`body: ${(body.length / 1e6).toFixed(1)} MB, ${definitions} record definitions`);
time("msgpackr (compiling)", () => new Unpackr({ mapsAsObjects: true }).unpack(body));
time("msgpackr no-eval build", () => new NoEvalUnpackr({ mapsAsObjects: true }).unpack(body));
time("logpond decodeBody", () => decodeBody(body, "msgpack"));
