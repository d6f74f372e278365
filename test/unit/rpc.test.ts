// The worker-RPC helper (src/rpc.ts) both thread pools use, against a real thread
// (test/helpers/rpc-worker.ts): answers and errors find their call, a thread that dies or stops
// answering fails only its own calls and is replaced on the next call, a closed client refuses.
import { afterEach, expect, test } from "bun:test";
import { ThreadClient } from "../../src/rpc";
import type { Request } from "../helpers/rpc-worker";

class Lost extends Error {}
class Unsent extends Error {}

const clients: ThreadClient<Request, unknown, string>[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.close("test over");
});

function client(backstopMs?: number, started?: () => void) {
  const made = new ThreadClient<Request, unknown, string>({
    url: new URL("../helpers/rpc-worker.ts", import.meta.url).href,
    name: "test thread",
    answered: (message) => new Error(`answered: ${message}`),
    lost: (reason) => new Lost(reason),
    unsent: (reason) => new Unsent(reason),
    backstopMs,
    started,
  });
  clients.push(made);
  return made;
}

test("answers reach their own calls, in any order; a thrown error comes back as the caller's error", async () => {
  const thread = client();
  const calls = Array.from({ length: 50 }, (_, i) => thread.call({ op: "echo", value: { i } }));
  const failed = thread.call({ op: "throw", message: "no such thing" }).catch((error) => error);
  expect(thread.waiting).toBe(51);
  expect(await Promise.all(calls)).toEqual(Array.from({ length: 50 }, (_, i) => ({ i })));
  expect(((await failed) as Error).message).toBe("answered: no such thing");
  expect(thread.waiting).toBe(0);
});

test("transferred bytes are moved to the thread and back", async () => {
  const thread = client();
  const bytes = new Uint8Array([1, 2, 3]);
  const back = (await thread.call({ op: "bytes", bytes }, [bytes.buffer])) as Uint8Array;
  expect(bytes.byteLength).toBe(0); // moved: the caller's view is emptied
  expect([...back]).toEqual([1, 2, 3]);
});

test("a thread that dies fails its waiting calls as lost; the next call runs on a new thread, set up again", async () => {
  let starts = 0;
  const thread = client(undefined, () => starts++);
  thread.start();
  const hanging = thread.call({ op: "hang" }).catch((error) => error);
  const dying = thread.call({ op: "die" }).catch((error) => error);
  expect(await hanging).toBeInstanceOf(Lost);
  expect(await dying).toBeInstanceOf(Lost);
  expect(thread.waiting).toBe(0);
  expect(await thread.call({ op: "echo", value: "again" })).toBe("again");
  expect(starts).toBe(2);
});

test("past the backstop an unanswered call fails as lost and ends its thread", async () => {
  const thread = client(200); // the call never answers: how soon the backstop fires is not asserted
  const hanging = await thread.call({ op: "hang" }).catch((error) => error);
  expect(hanging).toBeInstanceOf(Lost);
  expect((hanging as Error).message).toContain("no answer from the test thread within 200 ms");
  expect([thread.running, thread.waiting]).toEqual([false, 0]);
});

test("close fails the waiting calls as lost and refuses later ones as unsent", async () => {
  const thread = client();
  const hanging = thread.call({ op: "hang" }).catch((error) => error);
  thread.close("closed by the test");
  expect(await hanging).toBeInstanceOf(Lost);
  expect(await thread.call({ op: "echo", value: 1 }).catch((error) => error)).toBeInstanceOf(Unsent);
  expect(thread.running).toBe(false);
});
