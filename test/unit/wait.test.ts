// test/helpers/wait.ts: a wait returns the value that reached the condition, and a wait that runs
// past its deadline fails naming what it awaited and the last value it saw.
import { expect, test } from "bun:test";
import { waitFor } from "../helpers/wait";

test("returns the first value that is reached: truthy by default, or what `until` accepts", async () => {
  let n = 0;
  expect(await waitFor("n to reach 3", () => ++n >= 3 && n, { intervalMs: 0 })).toBe(3);
  let m = 0;
  expect(await waitFor("m to reach 0 after counting down", async () => 5 - ++m, { intervalMs: 0, until: (left) => left === 0 })).toBe(0);
  expect(m).toBe(5);
});

test("past the deadline it throws, naming what was awaited and the last value seen", async () => {
  let probes = 0;
  const error = await waitFor("the answer", () => ({ status: 503, probe: ++probes }), { timeoutMs: 30, intervalMs: 5, until: (a) => a.status === 200 }).then(
    () => undefined,
    (e: Error) => e,
  );
  expect(error?.message).toStartWith("timed out after 30 ms waiting for the answer; last value seen: { status: 503, probe: ");
  expect(error?.message).toEndWith(`probe: ${probes} }`);
  expect(probes).toBeGreaterThan(1);
});
