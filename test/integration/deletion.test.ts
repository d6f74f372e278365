// Deleting a source while its events are still on the way: a slow upload that
// authenticated before the DELETE is refused at push time (403); events another instance still
// holds in its buffer are written after the first purge and removed by the next sweeps (the
// tombstone); the source's dead letters go too. Afterwards nothing of the source remains.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";
import { waitFor } from "../helpers/wait";

let a: TestLogpond;
let b: TestLogpond;
beforeAll(async () => {
  a = await startTestLogpond({ RETENTION_SWEEP_INTERVAL_MS: "200" });
  // b flushes once a second at most, so what it accepted sits in its buffer meanwhile; it sweeps
  // only at its start (a's sweeps remove its late events): a sweep of its own, once a tombstone
  // exists, would flush its buffer first (retention/scheduler.ts) and empty it under the test.
  b = await startTestLogpond({ RETENTION_SWEEP_INTERVAL_MS: "600000", FLUSH_INTERVAL_MS: "1000", FLUSH_MAX_EVENTS: "1000000" });
  await b.retention.idle();
});
afterAll(async () => {
  await a.stop();
  await b.stop();
});

const remaining = async (lp: TestLogpond, sourceId: string) => {
  const [events] = await lp.sql`select count(*)::int as n from log_events where source_id = ${Number(sourceId)}`;
  const [letters] = await lp.sql`select count(*)::int as n from dead_letters where source_id = ${Number(sourceId)}`;
  return events!.n + letters!.n;
};

/** Sends headers and the first half of the body now; `finish()` sends the rest and returns the status. */
function slowUpload(url: string, token: string, body: string) {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let answer = "";
  const answered = new Promise<number>((resolve, reject) => {
    socket.on("data", (data) => {
      answer += data.toString();
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (status) resolve(Number(status[1]));
    });
    socket.on("error", reject);
  });
  const half = body.length >>> 1;
  socket.write(
    `POST / HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, half)}`,
  );
  return {
    async finish() {
      socket.write(body.slice(half));
      const status = await answered;
      socket.destroy();
      return status;
    },
  };
}

test("a source deleted during a slow upload and while another instance buffers its events leaves nothing behind", async () => {
  for (let attempt = 0; ; attempt++) {
    const source = await a.createSource();
    // b learns of the source through LISTEN/NOTIFY.
    await waitFor("b to take the new source's token", async () => (await b.ingest(source.token, "[]")).status, {
      intervalMs: 10,
      until: (status) => status === 202,
    });

    expect((await a.ingest(source.token, JSON.stringify(Array.from({ length: 100 }, (_, i) => ({ stored: i }))))).status).toBe(202);
    await a.flusher.flush();
    await a.sql`insert into dead_letters (source_id, dt, raw, sqlstate, error) values (${Number(source.id)}, 'x', '{}', '22P02', 'test')`;
    const flushedByB = b.metrics.value("logpond_flush_events_total");
    expect((await b.ingest(source.token, JSON.stringify(Array.from({ length: 50 }, (_, i) => ({ late: i }))))).status).toBe(202);

    const upload = slowUpload(a.ingestUrl, source.token, JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ slow: i, pad: "x".repeat(100) }))));
    // A request sent after the upload's headers is answered after they were read (one event
    // loop, in order), so the upload has authenticated by then.
    expect((await a.ingest(source.token, "[]")).status).toBe(202);

    expect((await a.api("DELETE", `/api/v1/sources/${source.id}`)).status).toBe(204);
    const heldByB = b.ring.heldEvents;
    expect(await upload.finish()).toBe(403);

    // b writes what it held after the first purge; the tombstone's sweeps remove it.
    await b.flusher.flush();
    // (Sweeps run every 200 ms.)
    await waitFor("the tombstone's sweeps to remove b's late events", () => remaining(a, source.id), { intervalMs: 50, until: (n) => n === 0 });
    expect(await remaining(a, source.id)).toBe(0);
    if (heldByB === 0 && attempt < 3) continue; // b flushed before the DELETE this time: try again
    expect(heldByB).toBe(50);
    expect(b.metrics.value("logpond_flush_events_total") - flushedByB).toBe(50); // written late, then removed
    return;
  }
}, 120_000);
