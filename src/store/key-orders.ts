// The sent key order of stored events (codec/key-order.ts), kept beside them in log_key_orders:
// one row per committed write of events (store/copy.ts writes it in the batch's own transaction,
// from the tuples' JSON text, which is still in the order the client sent), covering its id range:
// the distinct orders, and per event a slot: a 1-based index into them (0: jsonb's order already). Ids do
// not change when rows are sealed or merged, so one row serves every tier. Readers that show events
// put the order back (query/read.ts, query/context.ts, tail/storage.ts); filters, the SQL view and
// the matcher keep reading jsonb's text. A row goes when its events are past every source's
// retention (retention/sweep.ts). Nothing here decides what is stored.
import { inKeyOrder, type KeyOrder, sentKeyOrder } from "../codec/key-order";
import { idOf, TUPLE_HEAD, tuplesOf } from "../codec/tuples";
import type { Sql } from "./db";

export interface KeyOrders {
  firstId: number;
  lastId: number;
  /** The distinct orders, as JSON texts. */
  orders: string[];
  /** Event firstId + i's order: 0 (none) or 1 + its place in `orders`; one byte each, two (big-endian) past 255 orders. */
  slots: Uint8Array;
}

/** A write whose ids span more than this gets no row (ids of a write are consecutive but for dropped chunks). */
const MAX_SPAN = 1 << 22;
/** Orders one row holds at most; the events of further ones show jsonb's order. */
const MAX_ORDERS = 65_535;

/**
 * The key orders of these tuples (ids set), or null when every event is in jsonb's order already
 * or a text is not JSON (PostgreSQL then refuses the rows, and says why).
 */
export function keyOrdersOf(parts: readonly Uint8Array[]): KeyOrders | null {
  try {
    return ordersOf(parts);
  } catch {
    return null;
  }
}

function ordersOf(parts: readonly Uint8Array[]): KeyOrders | null {
  const ids: number[] = [];
  const found: number[] = [];
  const at = new Map<string, number>();
  let firstId = Infinity;
  let lastId = -Infinity;
  for (const part of parts) {
    for (const tuple of tuplesOf(part)) {
      const id = idOf(tuple);
      if (id < firstId) firstId = id;
      if (id > lastId) lastId = id;
      const order = sentKeyOrder(tuple, TUPLE_HEAD, tuple.length);
      if (order === null) continue;
      let k = at.get(order);
      if (k === undefined) {
        if (at.size >= MAX_ORDERS) continue;
        at.set(order, (k = at.size + 1));
      }
      ids.push(id);
      found.push(k);
    }
  }
  if (ids.length === 0 || lastId - firstId >= MAX_SPAN) return null;
  const wide = at.size > 255;
  const slots = new Uint8Array((lastId - firstId + 1) * (wide ? 2 : 1));
  for (let i = 0; i < ids.length; i++) {
    const slot = ids[i]! - firstId;
    if (wide) {
      slots[2 * slot] = found[i]! >> 8;
      slots[2 * slot + 1] = found[i]! & 0xff;
    } else slots[slot] = found[i]!;
  }
  return { firstId, lastId, orders: [...at.keys()], slots };
}

/** Stores one write's orders, in its transaction. A row already there (it cannot be, ids being unique) is left as it is. */
export async function insertKeyOrders(sql: Sql, orders: KeyOrders): Promise<void> {
  await sql`insert into log_key_orders (first_id, last_id, orders, slots) values (${orders.firstId}, ${orders.lastId}, ${`[${orders.orders.join(",")}]`}::text::jsonb, ${Buffer.from(orders.slots.buffer, orders.slots.byteOffset, orders.slots.byteLength)})
    on conflict (first_id) do nothing`;
}

/**
 * Per id: the row covering it (the last starting at or before it, by primary key), its slot read as
 * a slice (`slots` is stored uncompressed, drizzle/0014, so a slice reads one TOAST chunk rather than
 * the write's whole array), and the order that slot names.
 */
const ORDERS_OF_IDS = `select i::text as id, (k.orders -> (s.slot - 1))::text as ord
  from unnest($1::bigint[]) i
  cross join lateral (select first_id, last_id, slots, orders, octet_length(slots) > last_id - first_id + 1 as wide
    from log_key_orders where first_id <= i order by first_id desc limit 1) k
  cross join lateral (select substring(k.slots from (case when k.wide then 2 * (i - k.first_id) else i - k.first_id end + 1)::int
    for case when k.wide then 2 else 1 end) as bytes) c
  cross join lateral (select case when i > k.last_id then 0 when k.wide then get_byte(c.bytes, 0) * 256 + get_byte(c.bytes, 1)
    else get_byte(c.bytes, 0) end as slot) s
  where s.slot > 0`;

/**
 * Rows (`id` and the event's JSON text in `field`) with their keys put back in the order sent,
 * in place; rows with no order keep their text. One statement for the page.
 */
export async function showInSentOrder<Row extends { id: string }>(sql: Sql, rows: Row[], field: keyof Row & string): Promise<Row[]> {
  if (rows.length === 0) return rows;
  // Prepared: one text for every page, planned once per connection (planning was as long as running it).
  const found = await sql.unsafe<{ id: string; ord: string | null }[]>(ORDERS_OF_IDS, [rows.map((row) => row.id)] as never[], { prepare: true });
  if (found.length === 0) return rows;
  const orderOf = new Map<string, string>();
  for (const { id, ord } of found) if (ord !== null) orderOf.set(id, ord);
  const parsed = new Map<string, KeyOrder>();
  for (const row of rows) {
    const text = orderOf.get(row.id);
    if (text === undefined) continue;
    let order = parsed.get(text);
    if (order === undefined) parsed.set(text, (order = JSON.parse(text) as KeyOrder));
    (row as Record<string, unknown>)[field] = inKeyOrder(row[field] as string, order);
  }
  return rows;
}

/** Rows examined by one DELETE, at most. */
const ROWS_PER_STATEMENT = 5_000;

/**
 * Deletes the rows committed before `before`, oldest ids first, a bounded statement at a time;
 * returns how many went. Stops at the first statement that finds none (a row committed late
 * under an old id waits for the next sweep).
 */
export async function forgetKeyOrders(sql: Sql, before: Date, signal: AbortSignal): Promise<number> {
  let removed = 0;
  for (;;) {
    signal.throwIfAborted();
    const gone = await sql`
      delete from log_key_orders where first_id = any(array(
        select first_id from (select first_id, committed_at from log_key_orders order by first_id limit ${ROWS_PER_STATEMENT}) oldest
        where committed_at < ${before.toISOString()}::timestamptz))`;
    removed += gone.count;
    if (gone.count < ROWS_PER_STATEMENT) return removed;
  }
}
