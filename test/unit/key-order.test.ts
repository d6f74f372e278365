// Keys in the order they were sent (src/codec/key-order.ts): the order read from the sent JSON text,
// put back into jsonb's text of the same event (computed in the application, codec/jsonb-text.ts,
// which test/integration/jsonb-text.test.ts holds to PostgreSQL's).
import { expect, test } from "bun:test";
import { realisticBatch } from "../../bench/corpus";
import { inKeyOrder, type KeyOrder, sentKeyOrder } from "../../src/codec/key-order";
import { jsonbText } from "../../src/codec/jsonb-text";

/** The stored text with the sent order put back. */
function shown(sent: string): string {
  const stored = jsonbText(sent).line;
  const bytes = Buffer.from(`xx${sent}yy`);
  const order = sentKeyOrder(bytes, 2, bytes.length - 2);
  return order === null ? stored : inKeyOrder(stored, JSON.parse(order) as KeyOrder);
}

/** Keys of every object, depth first, as the text lists them (JSON.parse would put integer-like keys first). */
function keyPaths(text: string): string[] {
  const out: string[] = [];
  const walk = (value: unknown, path: string) => {
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, `${path}[${i}]`));
    else if (value !== null && typeof value === "object")
      for (const [key, child] of Object.entries(value)) out.push(`${path}.${key}`), walk(child, `${path}.${key}`);
  };
  walk(JSON.parse(text), "");
  return out;
}

test.each([
  ['{"message":"hi","level":"info","dt":"2026-01-01T00:00:00Z"}', '["message","level","dt"]'],
  ['{"dt":1,"level":2,"message":3}', null],
  ['{"a":1,"b":{"zz":1,"y":2}}', '["a",["b",["zz","y"]]]'],
  ['{"a":[1,{"b":1,"a":2},{"a":1}]}', '[["a",{"1":["b","a"]}]]'],
  ['{"a":[{"b":1,"a":2},{"b":3,"a":4}]}', '[["a",{"*":["b","a"]}]]'],
  ['{"a":[{"b":1,"a":2},{"a":3,"b":4}]}', '[["a",{"0":["b","a"]}]]'],
  ['{"b":1,"a":2,"b":3}', '["b","a"]'],
  ['{ "é" : 1 , "e" : 2 }', '["é","e"]'],
  ['{"\\u0062":1,"a":2}', '["b","a"]'],
  ['{"x":"}{\\"","a":[]}', '["x","a"]'],
  ["{}", null],
])("the sent order of %s is %s", (sent, order) => {
  const bytes = Buffer.from(sent);
  expect(sentKeyOrder(bytes, 0, bytes.length)).toBe(order);
});

test("jsonb's text of an event shows its keys as sent, at every depth, values untouched", () => {
  const sent = '{"message":"disk full","level":"error","context":{"zone":"b","host":{"name":"db1","id":7}},"tags":[{"z":1,"a":2}],"n":1.50}';
  const stored = jsonbText(sent).line;
  expect(stored).toBe(
    '{"n": 1.50, "tags": [{"a": 2, "z": 1}], "level": "error", "context": {"host": {"id": 7, "name": "db1"}, "zone": "b"}, "message": "disk full"}',
  );
  expect(shown(sent)).toBe(
    '{"message": "disk full", "level": "error", "context": {"zone": "b", "host": {"name": "db1", "id": 7}}, "tags": [{"z": 1, "a": 2}], "n": 1.50}',
  );
});

test("keys the order does not name follow the named ones as they were; compact text stays compact", () => {
  const order = JSON.parse(sentKeyOrder(Buffer.from('{"message":1,"dt":2}'), 0, 20)!) as KeyOrder;
  expect(inKeyOrder('{"dt": "x", "id": "9", "message": 1, "source_id": "3"}', order)).toBe('{"message": 1, "dt": "x", "id": "9", "source_id": "3"}');
  expect(inKeyOrder('{"dt":"x","id":"9","message":1}', order)).toBe('{"message":1,"dt":"x","id":"9"}');
});

test("an order of another shape leaves the text as it was", () => {
  expect(inKeyOrder('{"a": [1, 2], "b": 1}', [["a", ["x"]], "b"])).toBe('{"a": [1, 2], "b": 1}');
  expect(inKeyOrder('{"a": {"x": 1}}', [["a", { "0": ["x"] }]])).toBe('{"a": {"x": 1}}');
  expect(inKeyOrder("[1, 2]", ["a"])).toBe("[1, 2]");
  expect(inKeyOrder('{"a": ', ["a"])).toBe('{"a": ');
});

test("random events: the shown keys are the sent keys, in the sent order", () => {
  let seed = 7;
  const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const names = ["a", "b", "zz", "id", "dt", "level", "message", "é", "ü1", "10", "2", "a b", 'q"', "x\\y", "ключ"];
  const value = (depth: number): unknown => {
    const r = random();
    if (depth < 3 && r < 0.2) return object(depth + 1);
    if (depth < 3 && r < 0.3) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1));
    if (r < 0.6) return Math.floor(random() * 1000);
    return names[Math.floor(random() * names.length)];
  };
  const object = (depth: number) => {
    const out: Record<string, unknown> = {};
    for (let k = Math.floor(random() * 6); k > 0; k--) out[names[Math.floor(random() * names.length)]!] = value(depth);
    return out;
  };
  for (let i = 0; i < 2000; i++) {
    const sent = JSON.stringify(object(0));
    expect(keyPaths(shown(sent))).toEqual(keyPaths(sent));
    expect(JSON.parse(shown(sent))).toEqual(JSON.parse(sent));
  }
});

test("the realistic corpus: every event shown as sent", () => {
  for (const event of realisticBatch(500, 1)) {
    const sent = JSON.stringify(event);
    expect(keyPaths(shown(sent))).toEqual(keyPaths(sent));
  }
});

test("a client sending new keys with every event: each order is its own, past the cache's bound", () => {
  for (let i = 0; i < 30_000; i++) {
    const sent = `{"zz${i}":1,"a":{"y${i}":1,"x":2}}`;
    const bytes = Buffer.from(sent);
    expect(sentKeyOrder(bytes, 0, bytes.length)).toBe(`["zz${i}",["a",["y${i}","x"]]]`);
  }
  // A key whose bytes imitate the structure of another event's keys gets its own order.
  const a = Buffer.from('{"b":{"d":1,"c":2}}');
  const b = Buffer.from('{"b\\":{\\"d":1,"c":2}');
  expect(sentKeyOrder(a, 0, a.length)).toBe('[["b",["d","c"]]]');
  expect(sentKeyOrder(b, 0, b.length)).toBe('["b\\":{\\"d","c"]');
});
