// The live stream's row text is spliced into the stored JSON text instead of parsed and
// re-serialised; on random events it must mean exactly what parse + assign means (`dt`, `source_id`
// and `id` replace fields of those names sent in the event: docs/api.md, "A row").
import { expect, test } from "bun:test";
import fc from "fast-check";
import { textOf } from "../../src/tail/rows";

test("spliced row text = the event with dt, source_id and id set by logpond", () => {
  const key = fc.constantFrom("dt", "id", "source_id", "a", "b", 'x"y', "d\\t", "ünï", "");
  const event = fc.dictionary(key, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 });
  fc.assert(
    fc.property(event, (value) => {
      const raw = JSON.stringify(value);
      const row = { seq: 1, id: "42", sourceId: 7, dt: "2026-01-01T00:00:00.000000Z", raw };
      const text = textOf(row);
      const expected = { ...JSON.parse(raw), dt: row.dt, source_id: "7", id: "42" };
      expect(JSON.parse(text)).toEqual(expected);
      // No duplicate keys: as many members as the parsed object has keys.
      expect(text).toBe(
        JSON.stringify(
          Object.assign(Object.fromEntries(Object.entries(JSON.parse(raw)).filter(([k]) => !["dt", "id", "source_id"].includes(k))), {
            dt: row.dt,
            source_id: "7",
            id: "42",
          }),
        ),
      );
    }),
    { numRuns: 3000, seed: 20261122 },
  );
});
