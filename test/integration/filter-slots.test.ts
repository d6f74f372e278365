// logpond_filter_slots (src/store/sql/functions.sql): the slots of a filter group whose filters
// hold every probed item, read item by item with an early stop. Checked against the filters as
// codec/grams.ts `sliced` lays them out, stored as a search stores them (log_filters.slices,
// uncompressed out of line), for groups of 1 to 130 blocks — past the 48 slots of one mask, with
// every bit offset an item's slots can start at — and items present in all, some or none.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rng } from "../../bench/corpus";
import { sliced } from "../../src/codec/grams";
import { runMigrations } from "../../src/store/db";
import { createScratchDatabase, type ScratchDatabase } from "../helpers/database";

let db: ScratchDatabase;
beforeAll(async () => {
  db = await createScratchDatabase("filter_slots");
  await runMigrations(db.url);
});

afterAll(async () => {
  await db?.drop();
});

/** What a probe must answer: the slots whose filter has every item's position set. */
function expected(hashLists: Uint32Array[], bits: number, items: number[]): number[] {
  return hashLists.flatMap((hashes, slot) => {
    const positions = new Set(Array.from(hashes, (hash) => hash % bits));
    return items.every((item) => positions.has(item % bits)) ? [slot] : [];
  });
}

test("a group's slots that hold every item, for groups of 1 to 130 blocks", async () => {
  const next = rng(20261128); // seeded: a failure repeats
  const cases: { id: number; bits: number; lists: Uint32Array[]; items: number[] }[] = [];
  for (let id = 1; id <= 160; id++) {
    const blocks = id <= 130 ? id : 1 + Math.floor(next() * 130);
    // Sizes that make every bit offset of an item's first byte come up (bits × blocks not a multiple of 8).
    const bits = 64 + Math.floor(next() * 400);
    const lists = Array.from({ length: blocks }, () => Uint32Array.from({ length: Math.floor(next() * bits * 0.7) }, () => Math.floor(next() * 2 ** 32)));
    // Items: some every block holds, some one block holds, some at random (mostly absent somewhere).
    const items: number[] = [];
    const shared = Math.floor(next() * 2 ** 32);
    for (const list of lists) list[0] = shared;
    const kinds = Math.floor(next() * 4);
    if (kinds !== 1) items.push(shared);
    if (kinds !== 2) {
      const list = lists[Math.floor(next() * blocks)]!;
      if (list.length > 1) items.push(list[1 + Math.floor(next() * (list.length - 1))]!);
    }
    const others = Math.floor(next() * 6);
    for (let i = 0; i < others; i++) items.push(Math.floor(next() * 2 ** 32));
    cases.push({ id, bits, lists, items });
  }
  for (const c of cases) {
    const slices = sliced(c.lists, c.bits);
    await db.sql`insert into log_filters (id, source_id, min_dt, max_dt, blocks, bits, slices)
      values (${c.id}, 1, now(), now(), ${c.lists.length}, ${c.bits}, ${Buffer.from(slices)})`;
  }
  let some = 0;
  let none = 0;
  for (const c of cases) {
    const [row] = await db.sql<{ slots: number[] }[]>`
      select logpond_filter_slots(slices, bits, blocks, ${c.items}::bigint[]) as slots from log_filters where id = ${c.id}`;
    const want = expected(c.lists, c.bits, c.items);
    expect({ id: c.id, slots: row!.slots }).toEqual({ id: c.id, slots: want });
    if (want.length === 0) none++;
    else if (want.length < c.lists.length) some++;
  }
  // The cases reach each kind of answer: some slots, none, and (no items, or only the shared one) all.
  expect(some).toBeGreaterThan(20);
  expect(none).toBeGreaterThan(20);
});

test("no items: every slot; a group with a TOASTed value is read in slices", async () => {
  const blocks = 70;
  const bits = 4096; // 35 KiB: stored out of line
  const lists = Array.from({ length: blocks }, (_, k) => Uint32Array.of(k * 7919, 123456789));
  await db.sql`insert into log_filters (id, source_id, min_dt, max_dt, blocks, bits, slices)
    values (1000, 1, now(), now(), ${blocks}, ${bits}, ${Buffer.from(sliced(lists, bits))})`;
  const [stored] = await db.sql<{ toasted: boolean }[]>`
    select pg_column_size(slices) < octet_length(slices) / 2 as toasted from log_filters where id = 1000`;
  expect(stored!.toasted).toBe(false); // uncompressed (STORAGE EXTERNAL), as drizzle/0007 sets it
  const probe = async (items: number[]) =>
    (await db.sql<{ slots: number[] }[]>`select logpond_filter_slots(slices, bits, blocks, ${items}::bigint[]) as slots from log_filters where id = 1000`)[0]!
      .slots;
  expect(await probe([])).toEqual(Array.from({ length: blocks }, (_, k) => k));
  expect(await probe([123456789])).toEqual(Array.from({ length: blocks }, (_, k) => k));
  expect(await probe([123456789, 69 * 7919])).toEqual([69]);
  expect(await probe([50 * 7919, 123456789])).toEqual([50]);
  expect(await probe([50 * 7919, 69 * 7919])).toEqual([]);
});

// Against the expression it replaced in logpond_events_matching (cfb7423's parent): groups of 1 to
// 512 blocks, sizes whose slices do not end on a byte (bits not a multiple of 8, as a filter of
// drizzle/0007 could have), dense and sparse filters, items at the edges of a 32-bit hash (0,
// 2^32 - 1, multiples of bits), repeated items, none, and a null array.
/** The candidates as logpond_events_matching computed them before logpond_filter_slots. */
const OLD = `
  select coalesce(array_agg(k."slot" order by k."slot"), '{}') as slots
  from "log_filters" f
  cross join lateral (
    select array_agg(substring(f."slices" from (q."at" / 8 + 1)::int for ((q."at" + f."blocks" - 1) / 8 - q."at" / 8 + 1)::int)) as "bytes",
      array_agg((q."at" % 8)::int) as "offs"
    from (select (g % f."bits") * f."blocks" as "at" from unnest($2::bigint[] || $3::bigint[]) g) q
  ) p
  cross join lateral generate_series(0, f."blocks" - 1) k("slot")
  where f."id" = $1
    and not exists (select 1 from unnest(p."bytes", p."offs") x("bytes", "off") where get_bit(x."bytes", x."off" + k."slot") = 0)`;
const NEW = `
  select array(select s from unnest(logpond_filter_slots(f."slices", f."bits", f."blocks", $2::bigint[] || $3::bigint[])) s order by s) as slots
  from "log_filters" f where f."id" = $1`;

test("the same slots as the expression it replaced, for any group, size and items", async () => {
  const next = rng(5481128); // seeded: a failure repeats
  const sizes = [1, 2, 7, 8, 9, 47, 48, 49, 95, 96, 97, 143, 144, 145, 200, 333, 512];
  let id = 2000; // past the ids of the tests above
  let compared = 0;
  const answers = { all: 0, some: 0, none: 0 };
  for (const blocks of sizes) {
    for (const bits of [61, 64, 65, 127, 136, 1001]) {
      for (const density of [0.3, 0.9, 0.99]) {
        id++;
        // Each block's filter: about `density` of its positions set, so many items pass many slots.
        const lists = Array.from({ length: blocks }, () => {
          const hashes: number[] = [];
          for (let p = 0; p < bits; p++) if (next() < density) hashes.push(p + bits * Math.floor(next() * Math.floor(2 ** 32 / bits - 1)));
          return Uint32Array.from(hashes);
        });
        await db.sql`insert into log_filters (id, source_id, min_dt, max_dt, blocks, bits, slices)
          values (${id}, 1, now(), now(), ${blocks}, ${bits}, ${Buffer.from(sliced(lists, bits))})`;
        const edges = [0, 2 ** 32 - 1, bits - 1, bits, bits * Math.floor((2 ** 32 - 1) / bits), 2 ** 32 - 1 - ((2 ** 32 - 1) % bits)];
        const itemSets: (number[] | null)[] = [null, [], edges, [...edges, ...edges]];
        for (let i = 0; i < 6; i++) itemSets.push(Array.from({ length: 1 + Math.floor(next() * 20) }, () => Math.floor(next() * 2 ** 32)));
        for (const grams of itemSets) {
          for (const nums of [null, [], [Math.floor(next() * 2 ** 32)]]) {
            const old = (await db.sql.unsafe<{ slots: number[] }[]>(OLD, [id, grams, nums] as never[]))[0]!.slots;
            const now = (await db.sql.unsafe<{ slots: number[] }[]>(NEW, [id, grams, nums] as never[]))[0]!.slots;
            expect({ id, blocks, bits, grams, nums, slots: now }).toEqual({ id, blocks, bits, grams, nums, slots: old });
            compared++;
            if (old.length === blocks) answers.all++;
            else if (old.length > 0) answers.some++;
            else answers.none++;
          }
        }
      }
    }
  }
  expect(compared).toBe(sizes.length * 6 * 3 * 10 * 3);
  // Every kind of answer came up, past one mask of 48 slots too.
  expect(answers.all).toBeGreaterThan(100);
  expect(answers.some).toBeGreaterThan(100);
  expect(answers.none).toBeGreaterThan(100);
}, 600_000);
