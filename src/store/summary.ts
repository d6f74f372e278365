// A sealed block's field summary (log_blocks.fields, drizzle/0012): for each field path of its
// events that has few distinct scalar values, how many events hold each value, written as
// PostgreSQL's `raw #>> path` prints it — so the query API counts a field over whole blocks
// without opening them (query/aggregate.ts). Built from the lines a block holds (jsonb's text),
// on the seal threads with the rest of the block (store/blocks.ts). Pure: no I/O.
//
// A path is objects' keys joined by "." (the query API's field paths: query/request.ts). What the
// summary cannot vouch for is named, so a reader knows to open the block instead:
// - `o` (opaque): the value is an object, a string longer than VALUE_MAX_CHARS, or one of more than
//   VALUES_MAX distinct values in the block;
// - `a` (arrays): an array (or an object deeper than DEPTH_MAX) at this path: `#>>` indexes arrays,
//   so neither it nor any path below it is known;
// - `x`: more than PATHS_MAX paths: a path not in `c` is unknown.
// A path no event holds is in none of them: every event's value is null there. Keys no field path
// can name are skipped.

export interface FieldSummary {
  /** path → value text → events holding it. */
  c: Record<string, Record<string, number>>;
  o: string[];
  a: string[];
  x?: true;
}

/** Distinct values per path, at most (past it the path is opaque in this block). */
export const VALUES_MAX = 24;
/** A longer string makes its path opaque: it would cost more to keep than to read. */
export const VALUE_MAX_CHARS = 64;
/** Paths a summary tracks (of any kind), at most. */
export const PATHS_MAX = 128;
/** Objects nested deeper than this are not walked (their path goes into `a`). */
export const DEPTH_MAX = 4;

/** Keys left out that an object's node remembers, at most (each is tested again past it). */
const SKIPPED_KEYS_MAX = 1024;

/** A key a field path can name (query/request.ts FIELD_PATH's segments). */
const SEGMENT = /^[A-Za-z0-9_@$-]+$/;

/**
 * Integers of at most this magnitude are counted. A double is not a number's text: `#>>` prints
 * numeric_out's digits, so 200.0 stays "200.0" and 100 can have been sent as 99.999…; a value is
 * counted only when its text is surely String(value) (integerText below), else its path is opaque.
 */
const INTEGER_MAX = 1e9;

/** A path seen in the block; null in a parent's children: a key no field path can name. */
interface Node {
  path: string;
  children: Map<string, Node | null>;
  /** Value text → events; null once the path is opaque or under an array. */
  values: Map<string, number> | null;
  opaque: boolean;
  array: boolean;
}

/** Collects the summary of one block's lines. */
export class SummaryBuilder {
  private readonly root: Node = { path: "", children: new Map(), values: null, opaque: true, array: false };
  private paths = 0;
  private overflow = false;
  private line = "";
  private nines = false;
  private readonly fractions = new Set<string>();
  private fractionsOf: string | undefined;
  /** An event that is an array: `#>>` indexes it by a path's first key, which no summary vouches for. */
  private indexed = false;

  /** One event's line (jsonb's text of a JSON value). */
  add(line: string): void {
    if (line.charCodeAt(0) !== 0x7b) {
      // A scalar: no field has a value (`#>>` gives null). An array: see `known`.
      if (line.charCodeAt(0) === 0x5b) this.indexed = true;
      return;
    }
    this.line = line;
    // Near an integer from below (99.9999999…), a longer text parses to that integer.
    this.nines = line.includes(".999999");
    this.walk(JSON.parse(line) as Record<string, unknown>, this.root, 1);
  }

  /**
   * Whether the block can have a summary: not when one of its events is an array (ingestion takes
   * objects only, but a row written by SQL may hold any JSON), whose elements `#>>` reads at a path
   * such as `0` or `1.level`.
   */
  get known(): boolean {
    return !this.indexed;
  }

  finish(): FieldSummary {
    const c: [string, Record<string, number>][] = [];
    const o: string[] = [];
    const a: string[] = [];
    const visit = (node: Node) => {
      for (const child of node.children.values()) {
        if (!child) continue;
        if (child.array) a.push(child.path);
        else if (child.opaque) o.push(child.path);
        // fromEntries: a path or value named __proto__ is a key like any other.
        else if (child.values) c.push([child.path, Object.fromEntries(child.values)]);
        visit(child);
      }
    };
    visit(this.root);
    const summary: FieldSummary = { c: Object.fromEntries(c), o, a };
    if (this.overflow) summary.x = true;
    return summary;
  }

  private walk(object: Record<string, unknown>, parent: Node, depth: number): void {
    for (const key in object) {
      let node = parent.children.get(key);
      if (node === undefined) {
        node = SEGMENT.test(key) ? this.node(parent, key) : null;
        // A key left out is remembered (not tested again) only up to a bound: a block of events
        // with a million distinct keys would otherwise hold them all.
        if (node !== null || parent.children.size < SKIPPED_KEYS_MAX) parent.children.set(key, node);
      }
      if (node === null || node.array) continue;
      const value = object[key];
      if (value === null) continue;
      if (typeof value === "object") {
        if (Array.isArray(value) || depth >= DEPTH_MAX) this.unknownBelow(node);
        else {
          this.opaque(node);
          this.walk(value as Record<string, unknown>, node, depth + 1);
        }
        continue;
      }
      if (node.opaque) continue;
      const text = typeof value === "string" ? value : typeof value === "boolean" ? (value ? "true" : "false") : this.integerText(value as number);
      if (text === undefined || text.length > VALUE_MAX_CHARS) {
        this.opaque(node);
        continue;
      }
      const values = node.values!;
      const n = values.get(text);
      if (n !== undefined) values.set(text, n + 1);
      else if (values.size >= VALUES_MAX) this.opaque(node);
      else values.set(text, 1);
    }
  }

  /** A new path, or null past PATHS_MAX (the summary then says a path not in `c` is unknown). */
  private node(parent: Node, key: string): Node | null {
    if (this.paths >= PATHS_MAX) {
      this.overflow = true; // nothing below a path left out is counted either
      return null;
    }
    this.paths++;
    return { path: parent === this.root ? key : `${parent.path}.${key}`, children: new Map(), values: new Map(), opaque: false, array: false };
  }

  private opaque(node: Node): void {
    node.opaque = true;
    node.values = null;
  }

  /** An array (or an object too deep to walk) here: neither this path nor any below it is known. */
  private unknownBelow(node: Node): void {
    node.array = true;
    node.values = null;
  }

  /**
   * The number's text in the line when it is surely its digits: an integer of at most INTEGER_MAX,
   * and no member's value in the line that starts with them and goes on with a zero fraction
   * ("200.0": the only longer text of that integer from above; from below, see `nines`). A
   * string holds `": ` only with its quote escaped, so a match there only makes this cautious.
   */
  private integerText(value: number): string | undefined {
    if (!Number.isInteger(value) || Math.abs(value) > INTEGER_MAX || this.nines) return undefined;
    // -0 is no jsonb text of zero (numeric prints no sign on it): it is a negative number too small
    // for a double, which PostgreSQL prints in full ("-0.000…1").
    if (Object.is(value, -0)) return undefined;
    const text = String(value);
    return this.zeroFractions().has(text) ? undefined : text;
  }

  /** The integer parts of the line's member values with a zero fraction (`": 200.0`), found once per line. */
  private zeroFractions(): Set<string> {
    if (this.fractionsOf !== this.line) {
      this.fractions.clear();
      for (const match of this.line.matchAll(/": (-?\d+)\.0/g)) this.fractions.add(match[1]!);
      this.fractionsOf = this.line;
    }
    return this.fractions;
  }
}

/** The summary of `lines` as the text log_blocks.fields stores, or null where there can be none (the block is always opened). */
export function summarize(lines: Iterable<string>): string | null {
  const builder = new SummaryBuilder();
  for (const line of lines) builder.add(line);
  return builder.known ? JSON.stringify(builder.finish()) : null;
}
