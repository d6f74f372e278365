// The accept path's admission before decoding (ingest/accept.ts): a buffer that cannot take a
// request's size refuses it before its body is decoded — a garbage body gets 503 buffer_full, not
// 406 — a compressed one by its inflated size. No PostgreSQL here: the ring is filled directly and
// nothing flushes.
import { expect, test } from "bun:test";
import { gzipSync } from "node:zlib";
import { Ring } from "../../src/buffer/ring";
import { acceptRequest, ingestLimits, type IngestDeps } from "../../src/ingest/accept";
import { loadConfig } from "../../src/config";
import { GcPacer } from "../../src/memory/gcpace";
import { Gate } from "../../src/memory/gate";
import { DecodeWorker } from "../../src/ingest/offload";
import { RateLimiter } from "../../src/ingest/ratelimit";
import { ingestSeries } from "../../src/ingest/series";
import { Metrics } from "../../src/metrics";
import type { Flusher } from "../../src/buffer/flusher";
import { SourceCache } from "../../src/sources/cache";

const MAX_BYTES = 100_000;

function deps(ring: Ring): IngestDeps {
  const cache = new SourceCache();
  cache.put({ id: 1, token: "source-token", ingestingPaused: false, logsRetention: 30 });
  return {
    cache,
    ring,
    flusher: { pushed() {} } as unknown as Flusher,
    metrics: ingestSeries(new Metrics()),
    limits: ingestLimits(loadConfig({}), MAX_BYTES),
    gate: new Gate({ budgetBytes: 512 << 20 }),
    decodeWorker: new DecodeWorker(),
    gcPacer: new GcPacer(Infinity),
    ackMode: "buffered",
    durableTimeoutMs: 10_000,
    rateLimiter: new RateLimiter(0),
    accepting: () => true,
    eventTimes: { maxFutureMs: 86_400_000, retentionGraceMs: 3_600_000 },
  };
}

const post = (body: Uint8Array | string, headers: Record<string, string> = {}) =>
  new Request("http://logpond/", { method: "POST", headers: { authorization: "Bearer source-token", "content-type": "application/json", ...headers }, body });

test("a nearly full buffer refuses by size before decoding; an empty one decodes (and refuses garbage with 406)", async () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: MAX_BYTES });
  const d = deps(ring);
  expect(ring.append(new Uint8Array(90_000), 1)).toBe(true); // 10,000 bytes left
  const garbage = "not json ".repeat(2_000); // 18,000 bytes
  const refused = await acceptRequest(post(garbage), d);
  expect(refused.status).toBe(503);
  expect(await refused.text()).toContain("buffer is full");
  expect((await acceptRequest(post(garbage, { "content-length": String(garbage.length) }), d)).status).toBe(503);
  // Compressed to a few hundred bytes, it is judged by its inflated size.
  const gzipped = await acceptRequest(post(gzipSync(garbage), { "content-encoding": "gzip" }), d);
  expect(gzipped.status).toBe(503);
  // Small enough for what is left: decoded, and refused for what it is.
  expect((await acceptRequest(post("not json"), d)).status).toBe(406);
  expect((await acceptRequest(post(JSON.stringify([{ a: 1 }])), d)).status).toBe(202);
  ring.release(ring.take(1_000_000));
  expect((await acceptRequest(post(garbage), d)).status).toBe(406);
  // Bigger than the buffer ever holds: not a 503 (a retry would never fit) but decoded, then 413.
  const huge = JSON.stringify([{ message: "x".repeat(MAX_BYTES) }]);
  expect((await acceptRequest(post(huge), d)).status).toBe(413);
});

test("a gzip body is judged by the size its trailer states, before it is inflated", async () => {
  const ring = new Ring({ maxEvents: 1_000_000, maxBytes: MAX_BYTES });
  const d = deps(ring);
  expect(ring.append(new Uint8Array(90_000), 1)).toBe(true); // 10,000 bytes left
  // Damaged in the middle, trailer intact (it states 18,000 bytes): inflating it would give 406.
  const damaged = gzipSync("not json ".repeat(2_000));
  damaged.fill(0xff, 12, damaged.length - 8);
  const refused = await acceptRequest(post(damaged, { "content-encoding": "gzip" }), d);
  expect(refused.status).toBe(503);
  expect(await refused.text()).toContain("buffer is full");
  // With room for what the trailer states, it is inflated, and refused for what it is.
  ring.release(ring.take(1_000_000));
  expect((await acceptRequest(post(damaged, { "content-encoding": "gzip" }), d)).status).toBe(406);
  // A trailer past INGEST_MAX_DECOMPRESSED_BYTES is no reason for a 503: the body is inflated and
  // gets what it earns (here a 406: the trailer lies about a small body).
  expect(ring.append(new Uint8Array(90_000), 1)).toBe(true);
  const liar = gzipSync(JSON.stringify([{ a: 1 }]));
  liar.writeUInt32LE(0xffff_fff0, liar.length - 4);
  expect((await acceptRequest(post(liar, { "content-encoding": "gzip" }), d)).status).toBe(406);
});
