// An event's keys in the order they were sent. Every tier stores an event as jsonb text, whose
// objects list their keys shortest first, then bytewise (codec/jsonb-text.ts): that is the text
// every filter, the SQL view and the live matcher read, so it stays as it is. The sent order is
// kept beside it as a "key order" (store/key-orders.ts stores them per committed write, by event
// id, and puts them back where an event is shown). Pure: no I/O.
//
// A key order is JSON text. An object's is an array of its keys as sent, first occurrence of each:
// a key alone, or [key, child] when its value needs an order too, child being an object's key order
// (an array) or an array's ({"<index>": child} for the elements that need one, {"*": child} when
// every element needs that same one). An event whose every object already lists its keys in
// jsonb's order needs none (null).
import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, COMMA, endOfString, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from "./jsonbytes";

/** A parsed key order: an object's (array) or an array's (index → order). */
export type KeyOrder = (string | [string, KeyOrder])[] | { [index: string]: KeyOrder };

const COLON = 0x3a;

const decoder = new TextDecoder();

// One scan at a time (the functions are synchronous): the bytes and the cursor live here.
let b: Uint8Array = new Uint8Array(0);
let p = 0;

/**
 * The key order of the JSON object text at bytes[start, end) (UTF-8, as a COPY tuple holds it),
 * or null when every object in it lists its keys in jsonb's order. The text is valid JSON.
 *
 * An order depends only on the text's structure (its keys, their nesting, arrays' lengths), which
 * repeats from event to event: a scan hashes it, and the order is worked out once per structure
 * (building it for every event cost more than encoding the event: bench/micro.ts, "key orders").
 */
export function sentKeyOrder(bytes: Uint8Array, start: number, end: number): string | null {
  b = bytes;
  p = start;
  h1 = 0x811c9dc5;
  h2 = 0x9747b28c;
  try {
    skipBlank();
    if (b[p] !== OPEN_OBJECT) return null;
    hashValue();
    if (p > end) throw new Error("the JSON text runs past its end");
    const key = (h1 >>> 0) * 0x100000 + (h2 >>> 12);
    let order = known.get(key);
    if (order === undefined) {
      p = start;
      skipBlank();
      const found = objectOrder();
      order = found === undefined ? null : JSON.stringify(found);
      // Bounded by entries and by characters: a client sending new keys with every event makes
      // every event a miss, and an order can be as long as its event.
      const chars = order === null ? 0 : order.length;
      if (chars <= KNOWN_ORDER_MAX_CHARS) {
        if (known.size >= KNOWN_MAX || knownChars + chars > KNOWN_MAX_CHARS) {
          known.clear();
          knownChars = 0;
        }
        known.set(key, order);
        knownChars += chars;
      }
    }
    return order;
  } finally {
    b = EMPTY;
  }
}

/** Orders by structure hash (52 bits: two independent 32-bit hashes, one cut to 20). */
const known = new Map<number, string | null>();
const KNOWN_MAX = 20_000;
const KNOWN_MAX_CHARS = 4 << 20;
/** A longer order (an event with thousands of keys) is worked out again each time rather than kept. */
const KNOWN_ORDER_MAX_CHARS = 16 << 10;
let knownChars = 0;
let h1 = 0;
let h2 = 0;

function mix(byte: number): void {
  h1 = Math.imul(h1 ^ byte, 0x01000193);
  h2 = Math.imul(h2 ^ byte, 0x5bd1e995);
  h2 ^= h2 >>> 13;
}

/** Past the value at p, hashing its structure: keys, nesting and arrays' lengths, not values. */
function hashValue(): void {
  skipBlank();
  const c = b[p];
  if (c === OPEN_OBJECT) {
    mix(OPEN_OBJECT);
    p++;
    skipBlank();
    if (b[p] === CLOSE_OBJECT) p++;
    else
      for (;;) {
        skipBlank();
        // The key's bytes as they are written (escapes too), then its length as a value no byte
        // has: a key's bytes cannot pass for the structure around them.
        const keyStart = p;
        for (p++; ; p++) {
          const k = b[p];
          if (k === QUOTE) break;
          if (k === BACKSLASH) mix(b[p++]!);
          else if (k === undefined) throw new Error("the JSON text ends inside a string");
          mix(b[p]!);
        }
        mix(0x100 + p - keyStart);
        p++;
        skipBlank();
        p++; // the colon
        hashValue();
        skipBlank();
        const d = b[p++];
        if (d === CLOSE_OBJECT) break;
        if (d !== COMMA) throw new Error("not a JSON object");
      }
    mix(CLOSE_OBJECT);
  } else if (c === OPEN_ARRAY) {
    mix(OPEN_ARRAY);
    p++;
    skipBlank();
    if (b[p] === CLOSE_ARRAY) p++;
    else
      for (;;) {
        hashValue();
        mix(COMMA);
        skipBlank();
        const d = b[p++];
        if (d === CLOSE_ARRAY) break;
        if (d !== COMMA) throw new Error("not a JSON array");
      }
    mix(CLOSE_ARRAY);
  } else if (c === QUOTE) skipString();
  else for (let d = c; d !== COMMA && d !== CLOSE_OBJECT && d !== CLOSE_ARRAY && d !== undefined && d > 0x20; d = b[++p]);
}

const EMPTY = new Uint8Array(0);

function skipBlank(): void {
  for (let c = b[p]; c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = b[++p]);
}

const SHORT_STRING = 24;

/** Past the string at p (its opening quote). */
function skipString(): void {
  // Short strings (most keys and values) byte by byte; past SHORT_STRING bytes, the next quote
  // that no backslash escapes is found by the engine's own search (jsonbytes.ts).
  for (let i = p + 1, stop = Math.min(p + 1 + SHORT_STRING, b.length); i < stop; i++) {
    const c = b[i];
    if (c === QUOTE) {
      p = i + 1;
      return;
    }
    if (c === BACKSLASH) break;
  }
  const quote = endOfString(b, p + 1);
  if (quote >= b.length) throw new Error("the JSON text ends inside a string");
  p = quote + 1;
}

/** The order the value at p needs (p moves past it), undefined when none. */
function valueOrder(): KeyOrder | undefined {
  skipBlank();
  const c = b[p];
  if (c === OPEN_OBJECT) return objectOrder();
  if (c === OPEN_ARRAY) return arrayOrder();
  if (c === QUOTE) {
    skipString();
    return undefined;
  }
  // A number, true, false or null: up to the next delimiter.
  for (let d = b[p]; d !== COMMA && d !== CLOSE_OBJECT && d !== CLOSE_ARRAY && d !== undefined && d > 0x20; d = b[++p]);
  return undefined;
}

function objectOrder(): KeyOrder | undefined {
  p++;
  skipBlank();
  if (b[p] === CLOSE_OBJECT) {
    p++;
    return undefined;
  }
  /** Per key: start and end of its text between the quotes, 1 when escaped. */
  const keys: number[] = [];
  const children: (KeyOrder | undefined)[] = [];
  let ordered = true;
  let childNeeded = false;
  for (;;) {
    skipBlank();
    const keyStart = p + 1;
    skipString();
    const keyEnd = p - 1;
    let escaped = 0;
    for (let i = keyStart; i < keyEnd; i++) if (b[i] === BACKSLASH) escaped = 1;
    keys.push(keyStart, keyEnd, escaped);
    skipBlank();
    if (b[p] !== COLON) throw new Error("not a JSON object");
    p++;
    const child = valueOrder();
    if (child !== undefined) childNeeded = true;
    children.push(child);
    const k = keys.length - 3;
    if (ordered && k > 0 && compareKeys(keys, k - 3, k) >= 0) ordered = false;
    skipBlank();
    const c = b[p++];
    if (c === CLOSE_OBJECT) break;
    if (c !== COMMA) throw new Error("not a JSON object");
  }
  if (ordered && !childNeeded) return undefined;
  // Each key once, where it first came; its value (and so its order) is the last one's, as jsonb keeps it.
  const order: (string | [string, KeyOrder])[] = [];
  const at = new Map<string, number>();
  for (let k = 0, i = 0; k < keys.length; k += 3, i++) {
    const name = keyName(keys, k);
    const child = children[i];
    const entry: string | [string, KeyOrder] = child === undefined ? name : [name, child];
    const seen = at.get(name);
    if (seen === undefined) {
      at.set(name, order.length);
      order.push(entry);
    } else order[seen] = entry;
  }
  return order;
}

function arrayOrder(): KeyOrder | undefined {
  p++;
  skipBlank();
  if (b[p] === CLOSE_ARRAY) {
    p++;
    return undefined;
  }
  let order: { [index: string]: KeyOrder } | undefined;
  let length = 0;
  for (let i = 0; ; i++) {
    const child = valueOrder();
    if (child !== undefined) (order ??= {})[i] = child;
    length++;
    skipBlank();
    const c = b[p++];
    if (c === CLOSE_ARRAY) break;
    if (c !== COMMA) throw new Error("not a JSON array");
  }
  if (order === undefined) return undefined;
  // Every element with one same order (a list of records, as sent by one logger): written once.
  const first = JSON.stringify(order[0]);
  for (let i = 0; i < length; i++) if (order[i] === undefined || JSON.stringify(order[i]) !== first) return order;
  return { "*": order[0]! };
}

function keyName(keys: number[], k: number): string {
  const text = decoder.decode(b.subarray(keys[k]!, keys[k + 1]!));
  return keys[k + 2] === 1 ? (JSON.parse(`"${text}"`) as string) : text;
}

function keyBytes(keys: number[], k: number): Uint8Array {
  return keys[k + 2] === 1 ? Buffer.from(keyName(keys, k)) : b.subarray(keys[k]!, keys[k + 1]!);
}

/** jsonb's order of two keys: the shorter in UTF-8 first, then bytewise. */
function compareKeys(keys: number[], x: number, y: number): number {
  if (keys[x + 2] === 0 && keys[y + 2] === 0) {
    const lengthX = keys[x + 1]! - keys[x]!;
    const lengthY = keys[y + 1]! - keys[y]!;
    if (lengthX !== lengthY) return lengthX - lengthY;
    for (let i = 0; i < lengthX; i++) {
      const d = b[keys[x]! + i]! - b[keys[y]! + i]!;
      if (d !== 0) return d;
    }
    return 0;
  }
  const bx = keyBytes(keys, x);
  const by = keyBytes(keys, y);
  return bx.length - by.length || Buffer.compare(bx, by);
}

// Putting an order back: the text is walked as UTF-16 units.
let t = "";
let q = 0;

/**
 * The JSON object text `text` (jsonb's `::text`, or compact) with its objects' members moved into
 * `order`: the members it names first, as listed, then the others as they were. Members are moved
 * whole, so values (numbers included) keep their exact text, and each object keeps the separator
 * it had. A text or order of another shape is given back unchanged.
 */
export function inKeyOrder(text: string, order: KeyOrder): string {
  t = text;
  q = 0;
  try {
    skipBlankText();
    return t.charCodeAt(q) === OPEN_OBJECT ? reordered(order) : text;
  } catch {
    return text;
  } finally {
    t = "";
  }
}

function skipBlankText(): void {
  for (let c = t.charCodeAt(q); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = t.charCodeAt(++q));
}

function skipStringText(): void {
  for (q++; ; q++) {
    const c = t.charCodeAt(q);
    if (c === QUOTE) break;
    if (c === BACKSLASH) q++;
    else if (Number.isNaN(c)) throw new Error("the JSON text ends inside a string");
  }
  q++;
}

/** Past the value at q, nested or not. */
function skipValueText(): void {
  skipBlankText();
  const c = t.charCodeAt(q);
  if (c === QUOTE) return skipStringText();
  if (c !== OPEN_OBJECT && c !== OPEN_ARRAY) {
    for (let d = c; d !== COMMA && d !== CLOSE_OBJECT && d !== CLOSE_ARRAY && !Number.isNaN(d) && d > 0x20; d = t.charCodeAt(++q));
    return;
  }
  let depth = 0;
  for (;;) {
    const d = t.charCodeAt(q);
    if (d === QUOTE) {
      skipStringText();
      continue;
    }
    q++;
    if (d === OPEN_OBJECT || d === OPEN_ARRAY) depth++;
    else if ((d === CLOSE_OBJECT || d === CLOSE_ARRAY) && --depth === 0) return;
    else if (Number.isNaN(d)) throw new Error("the JSON text ends inside a value");
  }
}

/** The value at q (moved past) as text, put in `order` when it is an object or array of that shape. */
function valueText(order: KeyOrder | undefined): string {
  skipBlankText();
  const c = t.charCodeAt(q);
  if (order !== undefined && c === OPEN_OBJECT && Array.isArray(order)) return reordered(order);
  if (order !== undefined && c === OPEN_ARRAY && !Array.isArray(order)) return reorderedArray(order);
  const start = q;
  skipValueText();
  return t.slice(start, q);
}

/** An object's order as a map from key to its value's order, made once per order (a list of records shares one). */
const wanted = new WeakMap<KeyOrder, Map<string, KeyOrder | undefined>>();

function reordered(order: KeyOrder): string {
  if (!Array.isArray(order)) {
    const start = q;
    skipValueText();
    return t.slice(start, q);
  }
  let want = wanted.get(order);
  if (want === undefined) {
    want = new Map();
    for (const entry of order) {
      if (typeof entry === "string") want.set(entry, undefined);
      else want.set(entry[0], entry[1]);
    }
    wanted.set(order, want);
  }
  q++;
  skipBlankText();
  if (t.charCodeAt(q) === CLOSE_OBJECT) {
    q++;
    return "{}";
  }
  const members = new Map<string, string>();
  const rest: string[] = [];
  let separator: string | undefined;
  for (;;) {
    skipBlankText();
    const keyStart = q;
    skipStringText();
    const keyText = t.slice(keyStart, q);
    const name = keyText.includes("\\") ? (JSON.parse(keyText) as string) : keyText.slice(1, -1);
    skipBlankText();
    q++; // the colon
    skipBlankText();
    const head = t.slice(keyStart, q);
    const member = head + valueText(want.get(name));
    if (want.has(name)) members.set(name, member);
    else rest.push(member);
    const end = q;
    skipBlankText();
    const c = t.charCodeAt(q++);
    if (c === CLOSE_OBJECT) break;
    if (c !== COMMA) throw new Error("not a JSON object");
    skipBlankText();
    separator ??= t.slice(end, q);
  }
  const out: string[] = [];
  for (const name of want.keys()) {
    const member = members.get(name);
    if (member !== undefined) out.push(member);
  }
  out.push(...rest);
  return `{${out.join(separator ?? ", ")}}`;
}

function reorderedArray(order: { [index: string]: KeyOrder }): string {
  q++;
  skipBlankText();
  if (t.charCodeAt(q) === CLOSE_ARRAY) {
    q++;
    return "[]";
  }
  const out: string[] = [];
  let separator: string | undefined;
  const every = order["*"];
  for (let i = 0; ; i++) {
    out.push(valueText(every ?? order[i]));
    const end = q;
    skipBlankText();
    const c = t.charCodeAt(q++);
    if (c === CLOSE_ARRAY) break;
    if (c !== COMMA) throw new Error("not a JSON array");
    skipBlankText();
    separator ??= t.slice(end, q);
  }
  return `[${out.join(separator ?? ", ")}]`;
}
