// An ingest worker's memory path as the supervisor's sealer sees it (cluster/stagers.ts), against
// a fake worker slot: a generation's staged blocks are vouched for only by the process that heard
// of its opening; a replaced worker, a silent one or one that exits makes the generation read back.
import { expect, test } from "bun:test";
import { type StageTarget, workerStager } from "../../src/cluster/stagers";
import type { StageAnswer, StageCall } from "../../src/cluster/worker";

/** A slot whose process answers opening and known with null, finish with `finished`, unless silent. */
function slot(finished: StageAnswer = { seqs: [7], events: 10, blocks: 1 }) {
  const state = { pid: 100 as number | undefined, silent: false, calls: [] as StageCall[] };
  const target: StageTarget = {
    index: 2,
    pid: () => state.pid,
    async ask(call) {
      state.calls.push(call);
      if (state.silent) return undefined;
      return call.kind === "finish" ? finished : null;
    },
  };
  return { state, stager: workerStager(target) };
}

test("the process that heard of the opening answers for the generation", async () => {
  const { state, stager } = slot();
  await stager.opening(1_000);
  expect(await stager.finish(1_000)).toEqual({ seqs: [7], events: 10, blocks: 1 });
  expect(state.calls.map((c) => c.kind)).toEqual(["opening", "finish"]);
});

test("a worker replaced since the opening, or not listening then, cannot vouch for it: read back", async () => {
  const replaced = slot();
  await replaced.stager.opening(1_000);
  replaced.state.pid = 101; // started again: its predecessor's staged blocks are nobody's
  expect(await replaced.stager.finish(1_000)).toBe("ingest worker 2 was started again since the generation opened");
  expect(replaced.state.calls.map((c) => c.kind)).toEqual(["opening"]);

  const away = slot();
  away.state.pid = undefined;
  await away.stager.opening(2_000);
  away.state.pid = 100;
  expect(await away.stager.finish(2_000)).toBe("ingest worker 2 was not listening when the generation opened");
});

test("no answer to the opening (in time), or none to the finish: read back", async () => {
  const silentOpening = slot();
  silentOpening.state.silent = true;
  await silentOpening.stager.opening(1_000);
  silentOpening.state.silent = false;
  expect(await silentOpening.stager.finish(1_000)).toBe("ingest worker 2 did not answer the generation's opening within 2000 ms");

  const silentFinish = slot();
  await silentFinish.stager.opening(1_000);
  silentFinish.state.silent = true;
  expect(await silentFinish.stager.finish(1_000)).toContain("exited or did not answer");
});

test("a worker's own refusal is passed on; generations no longer hot are forgotten", async () => {
  const { stager } = slot("a seal thread failed: boom");
  await stager.opening(1_000);
  await stager.opening(2_000);
  expect(await stager.finish(1_000)).toBe("a seal thread failed: boom");
  stager.known([2_000]);
  expect(await stager.finish(1_000)).toBe("ingest worker 2 had not started when the generation opened");
});
