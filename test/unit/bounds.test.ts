// The byte walk of codec/bounds.ts against the decoders: for any value fast-check makes, packed
// by msgpackr (plain maps, records, records with two-byte ids) or written as JSON / NDJSON, the
// walk never refuses what fits and counts the events the decoder builds; and the in-flight budget.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { Packr } from "msgpackr";
import { walkBody, type CostLimits } from "../../src/codec/bounds";
import { decodeBody } from "../../src/codec/decode";
import { COST_FACTOR } from "../../src/memory/costs";
import { Gate, Ticket } from "../../src/memory/gate";
import { AppError } from "../../src/errors";

const generous: CostLimits = { maxEvents: 1_000_000, maxDecompressedBytes: 1 << 30, maxDepth: 64, maxEventBytes: 1 << 20 };
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.string(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    tie("array"),
    tie("object"),
  ),
  array: fc.array(tie("value"), { maxLength: 5 }),
  object: fc.dictionary(fc.string({ maxLength: 8 }), tie("value"), { maxKeys: 5 }),
})) as unknown as { object: fc.Arbitrary<Record<string, unknown>> };
const events = fc.array(json.object, { minLength: 1, maxLength: 20 });

function decodedCount(body: Buffer, format: "json" | "ndjson" | "msgpack"): number {
  const decoded = decodeBody(body, format);
  if (decoded instanceof AppError) throw new Error(decoded.message);
  return decoded.length;
}

test("MessagePack, plain maps and records (one-byte and two-byte ids): the walk counts what the decoder builds", () => {
  const packers = [
    new Packr({ useRecords: false }),
    new Packr({ useRecords: true }),
    new Packr({ useRecords: true, maxSharedStructures: 0, maxOwnStructures: 1000 } as ConstructorParameters<typeof Packr>[0]),
  ];
  fc.assert(
    fc.property(events, fc.integer({ min: 0, max: 2 }), fc.boolean(), (list, which, single) => {
      const body = packers[which]!.pack(single ? list[0] : list);
      const walked = walkBody(body, "msgpack", generous);
      if (walked instanceof AppError) throw new Error(walked.message);
      expect(walked).toBe(decodedCount(body, "msgpack"));
    }),
    { numRuns: 300 },
  );
});

test("many record definitions (wide ids past 64 structures) walk without a refusal", () => {
  const list = Array.from({ length: 5_000 }, (_, i) => ({ [`k${i}`]: i, shared: { a: i, [`n${i % 300}`]: [i] } }));
  const body = new Packr({ useRecords: true, maxSharedStructures: 0, maxOwnStructures: 4000 } as ConstructorParameters<typeof Packr>[0]).pack(list);
  expect(walkBody(body, "msgpack", generous)).toBe(5_000);
});

test("JSON and NDJSON: the walk counts what the decoder builds", () => {
  fc.assert(
    fc.property(events, fc.boolean(), (list, single) => {
      const body = Buffer.from(JSON.stringify(single ? list[0] : list));
      expect(walkBody(body, "json", generous)).toBe(decodedCount(body, "json"));
      const lines = Buffer.from(list.map((e) => JSON.stringify(e)).join("\n\n") + "\n");
      expect(walkBody(lines, "ndjson", generous)).toBe(list.length);
    }),
    { numRuns: 300 },
  );
});

test("the walk refuses past its bounds, with the contract's reasons", () => {
  const small: CostLimits = { maxEvents: 3, maxDecompressedBytes: 16_000, maxDepth: 4, maxEventBytes: 100 };
  const reason = (body: Buffer | string, format: "json" | "msgpack" | "ndjson") => {
    const walked = walkBody(typeof body === "string" ? Buffer.from(body) : body, format, small);
    return walked instanceof AppError ? walked.reason : walked;
  };
  expect(reason("[{},{},{},{}]", "json")).toBe("too_many_events");
  expect(reason("{}\n{}\n{}\n{}\n", "ndjson")).toBe("too_many_events");
  expect(reason(`{"a":[${"0,".repeat(1500)}0]}`, "json")).toBe("too_many_values"); // 1000 = 16,000 / 16
  expect(reason(`{"a":[[[[[[1]]]]]]}`, "json")).toBe("too_deep");
  expect(reason(`{"s":"${"x".repeat(700)}"}`, "json")).toBe("event_too_large");
  expect(reason(`{"s":"a \\" quote and a \\\\"}`, "json")).toBe(1);
  expect(reason(Buffer.from([0x94, 0x80, 0x80, 0x80, 0x80]), "msgpack")).toBe("too_many_events");
  const bigint = Buffer.concat([Buffer.from([0x81, 0xa1, 0x6e, 0xc9, 0x00, 0x01, 0x00, 0x01, 0x42]), Buffer.alloc(65537)]);
  expect(reason(bigint, "msgpack")).toBe("unsupported_value");
});

test("in-flight budget: a request alone always enters; past the budget → refused until released", () => {
  const gate = new Gate({ budgetBytes: 100 * COST_FACTOR });
  const big = gate.admit(1_000, "whole") as Ticket; // alone: let in although over the budget
  expect(big.cost).toBe(1_000 * COST_FACTOR);
  expect(gate.admit(1, "whole")).not.toBeInstanceOf(Ticket);
  gate.leave(big);
  const a = gate.admit(60, "whole") as Ticket;
  expect(gate.admit(50, "whole")).not.toBeInstanceOf(Ticket);
  const b = gate.admit(40, "whole") as Ticket;
  gate.leave(a);
  gate.leave(b);
  expect(gate.bytes).toBe(0);
});
