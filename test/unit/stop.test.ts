// stop.ts on its own: every service halted first, then each stopped in turn, the list in reverse,
// each given the same deadline (the whole stop's), a later one only once the one before is done.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { readiness, type Service } from "../../src/service";
import { stopAll } from "../../src/stop";

test("halts every service, then stops them one at a time, the list in reverse, all with the stop's deadline", async () => {
  const calls: string[] = [];
  const deadlines: number[] = [];
  let release = () => {};
  const service = (name: string, halts: boolean, holds = false): Service => ({
    name,
    ...(halts ? { halt: () => void calls.push(`halt ${name}`) } : {}),
    async stop(deadline) {
      calls.push(`stop ${name}`);
      deadlines.push(deadline);
      if (holds) await new Promise<void>((resolve) => (release = resolve));
      calls.push(`stopped ${name}`);
    },
  });
  const before = performance.now();
  const stopping = stopAll([service("storage", false), service("job", true), service("listener", true, true)], 10_000);
  await Bun.sleep(0);
  // The listener's stop holds: nothing after it in the stop has begun.
  expect(calls).toEqual(["halt listener", "halt job", "stop listener"]);
  release();
  await stopping;
  expect(calls).toEqual(["halt listener", "halt job", "stop listener", "stopped listener", "stop job", "stopped job", "stop storage", "stopped storage"]);
  expect(new Set(deadlines).size).toBe(1);
  expect(deadlines[0]!).toBeGreaterThanOrEqual(before + 10_000);
  expect(deadlines[0]!).toBeLessThanOrEqual(performance.now() + 10_000);
});

test("stop.ts knows no service: it imports only service.ts", () => {
  const text = readFileSync(path.join(import.meta.dir, "..", "..", "src", "stop.ts"), "utf8");
  expect([...text.matchAll(/from "([^"]+)"/g)].map((m) => m[1])).toEqual(["./service"]);
});

test("/ready's answer is the first reason a service gives, in the list's order, read when asked", async () => {
  const reasons: Record<string, string | undefined> = { storage: undefined, flusher: undefined };
  const services: Service[] = [
    { name: "storage", stop: async () => {}, ready: async () => reasons.storage },
    { name: "job", stop: async () => {} },
    { name: "flusher", stop: async () => {}, ready: async () => reasons.flusher },
  ];
  const ready = readiness(() => services);
  expect(await ready()).toBeUndefined();
  reasons.flusher = "flushes failing";
  expect(await ready()).toBe("flushes failing");
  reasons.storage = "database down";
  expect(await ready()).toBe("database down");
  services.splice(0, 1);
  expect(await ready()).toBe("flushes failing");
});
