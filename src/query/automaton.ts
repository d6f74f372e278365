// A pattern of query/regex.ts as a matcher for the live stream, which runs it on every event: a
// Thompson automaton walked as a DFA built lazily, one state per set of automaton states met, its
// transitions cached per class of characters (within CACHE_LIMITS; past them, the automaton itself). Time is linear in the text whatever the pattern
// (JavaScript's backtracking RegExp is exponential on `(a|a)*b`, and one event's match would hold
// the event loop), and a cached step costs two array reads per character. Searches anywhere in the
// text, as PostgreSQL's `~` does; characters are code points; `^` and `$` are the text's ends.
import { type Re, type Regex, requiredLiterals } from "./regex";

const SET = 0,
  SPLIT = 1,
  BOL = 2,
  EOL = 3,
  MATCH = 4;

/**
 * What the cache of DFA states may hold: transitions (states × character classes) and automaton
 * states listed in them. A pattern that needs more (`(a|b)*a(a|b){30}` needs 2^31 states) is run
 * from then on as the automaton itself, a set of states per character: no state is kept, memory
 * stays bounded and time linear in the text, at a few times the cost of a cached step.
 */
export interface CacheLimits {
  cells: number;
  listed: number;
}
export const CACHE_LIMITS: CacheLimits = { cells: 1 << 18, listed: 1 << 16 };

export type TextMatcher = (text: string) => boolean;

export function compileRegex(regex: Regex, limits: CacheLimits = CACHE_LIMITS): TextMatcher {
  const test = new Dfa(build(regex.tree), limits).test;
  // A text without the pattern's literal runs cannot match: the engine's own substring search
  // (a linear scan, several times faster than a step per character here) rules most texts out.
  // With (?i) the search folds case as JavaScript does, which finds at least what ASCII folding finds.
  const runs = requiredLiterals(regex);
  if (runs.length === 0) return test;
  if (!regex.ignoreCase) return (text) => runs.every((run) => text.includes(run)) && test(text);
  const literals = runs.map((run) => new RegExp(run.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&"), "iu"));
  return (text) => literals.every((literal) => literal.test(text)) && test(text);
}

interface Nfa {
  kind: number[];
  out: number[];
  out2: number[];
  /** Per state of kind SET: its set's index in `sets`. */
  set: number[];
  sets: { ranges: number[]; negated: boolean }[];
  start: number;
}

function build(tree: Re): Nfa {
  const nfa: Nfa = { kind: [], out: [], out2: [], set: [], sets: [], start: 0 };
  const add = (kind: number, set = -1) => {
    nfa.kind.push(kind);
    nfa.out.push(-1);
    nfa.out2.push(-1);
    nfa.set.push(set);
    return nfa.kind.length - 1;
  };
  // A fragment: its entry state and the dangling exits ([state, 1 | 2]) its successor is patched into.
  type Fragment = { start: number; exits: [number, 1 | 2][] };
  const patch = (exits: [number, 1 | 2][], to: number) => {
    for (const [state, which] of exits) (which === 1 ? nfa.out : nfa.out2)[state] = to;
  };
  const concat = (parts: Fragment[]): Fragment => {
    for (let k = 0; k + 1 < parts.length; k++) patch(parts[k]!.exits, parts[k + 1]!.start);
    return { start: parts[0]!.start, exits: parts[parts.length - 1]!.exits };
  };
  const optional = (inner: Fragment): Fragment => {
    const split = add(SPLIT);
    nfa.out[split] = inner.start;
    return { start: split, exits: [...inner.exits, [split, 2]] };
  };
  const frag = (re: Re): Fragment => {
    switch (re.t) {
      case "set": {
        nfa.sets.push({ ranges: re.ranges, negated: re.negated });
        const state = add(SET, nfa.sets.length - 1);
        return { start: state, exits: [[state, 1]] };
      }
      case "bol":
      case "eol": {
        const state = add(re.t === "bol" ? BOL : EOL);
        return { start: state, exits: [[state, 1]] };
      }
      case "seq":
        return concat(re.items.map(frag));
      case "alt": {
        const parts = re.items.map(frag);
        let joined = parts[parts.length - 1]!;
        for (let k = parts.length - 2; k >= 0; k--) {
          const split = add(SPLIT);
          nfa.out[split] = parts[k]!.start;
          nfa.out2[split] = joined.start;
          joined = { start: split, exits: [...parts[k]!.exits, ...joined.exits] };
        }
        return joined;
      }
      case "rep": {
        const parts: Fragment[] = [];
        for (let k = 0; k < re.min; k++) parts.push(frag(re.item));
        if (re.max === Infinity) {
          const inner = frag(re.item);
          const split = add(SPLIT);
          nfa.out[split] = inner.start;
          patch(inner.exits, split);
          parts.push({ start: split, exits: [[split, 2]] });
        } else if (re.max > re.min) {
          // x{0,3} as (x(x(x)?)?)?: each optional copy reachable only through the one before.
          let tail = optional(frag(re.item));
          for (let k = re.max - re.min - 1; k > 0; k--) {
            const copy = frag(re.item);
            patch(copy.exits, tail.start);
            tail = optional({ start: copy.start, exits: tail.exits });
          }
          parts.push(tail);
        }
        return concat(parts);
      }
    }
  };
  const whole = frag(tree);
  const match = add(MATCH);
  patch(whole.exits, match);
  nfa.start = whole.start;
  return nfa;
}

class Dfa {
  /** Class boundaries: code point c is in class k where bounds[k-1] <= c < bounds[k]. */
  private readonly bounds: number[];
  private readonly classes: number;
  private readonly ascii = new Uint16Array(128);
  /** Per set, per class: 1 member, 2 not, 0 not computed yet. */
  private readonly member: Uint8Array[];
  private readonly mark: Uint32Array;
  private generation = 0;
  private ids = new Map<string, number>();
  private states: Int32Array[] = [];
  private accepting: Uint8Array = new Uint8Array(16);
  /** 0 not computed, 1 no, 2 yes: the state matches if the text ends here. */
  private atEnd: Uint8Array = new Uint8Array(16);
  private dead: Uint8Array = new Uint8Array(16);
  /** Transitions: next state + 1, 0 not computed yet. */
  private table: Int32Array;
  /** Automaton states listed in the cached states, all together. */
  private listed = 0;
  /** The cache is full: every text is run through the automaton itself. */
  private uncached = false;

  constructor(
    private readonly nfa: Nfa,
    private readonly limits: CacheLimits,
  ) {
    const cuts = new Set<number>();
    for (const { ranges } of nfa.sets) for (let k = 0; k < ranges.length; k += 2) cuts.add(ranges[k]!).add(ranges[k + 1]! + 1);
    this.bounds = [...cuts].sort((a, b) => a - b);
    this.classes = this.bounds.length + 1;
    for (let c = 0; c < 128; c++) this.ascii[c] = this.classOf(c);
    this.member = nfa.sets.map(() => new Uint8Array(this.classes));
    this.mark = new Uint32Array(nfa.kind.length);
    this.table = new Int32Array(16 * this.classes);
    this.intern(this.closure([this.nfa.start], true), true);
  }

  private classOf(c: number): number {
    let lo = 0,
      hi = this.bounds.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.bounds[mid]! <= c) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * The automaton states reached from `seeds` without reading, sorted: SET and MATCH states, and
   * EOL states waiting for the end (passed when `atEnd`); `^` is passed only `atStart`.
   */
  private closure(seeds: number[], atStart: boolean, atEnd = false, sorted = true): number[] {
    const { kind, out, out2 } = this.nfa;
    const generation = ++this.generation;
    const found: number[] = [];
    const stack = [...seeds];
    while (stack.length) {
      const s = stack.pop()!;
      if (this.mark[s] === generation) continue;
      this.mark[s] = generation;
      switch (kind[s]) {
        case SPLIT:
          stack.push(out2[s]!, out[s]!);
          break;
        case BOL:
          if (atStart) stack.push(out[s]!);
          break;
        case EOL:
          if (atEnd) stack.push(out[s]!);
          else found.push(s);
          break;
        default:
          found.push(s);
      }
    }
    return sorted ? found.sort((a, b) => a - b) : found;
  }

  private intern(found: number[], initial = false): number {
    const key = (initial ? "^" : "") + found.join(",");
    const known = this.ids.get(key);
    if (known !== undefined) return known;
    const index = this.states.length;
    this.states.push(Int32Array.from(found));
    this.ids.set(key, index);
    this.listed += found.length;
    if (index >= this.accepting.length) {
      const grow = (old: Uint8Array) => {
        const next = new Uint8Array(old.length * 2);
        next.set(old);
        return next;
      };
      this.accepting = grow(this.accepting);
      this.atEnd = grow(this.atEnd);
      this.dead = grow(this.dead);
      const table = new Int32Array(this.accepting.length * this.classes);
      table.set(this.table);
      this.table = table;
    }
    this.accepting[index] = found.some((s) => this.nfa.kind[s] === MATCH) ? 1 : 0;
    this.dead[index] = found.length === 0 ? 1 : 0;
    this.atEnd[index] = 0;
    return index;
  }

  /** Whether character class `k` is in the set of index `index` (computed once per pair). */
  private inSet(index: number, k: number): boolean {
    const row = this.member[index]!;
    if (row[k] === 0) {
      const { ranges, negated } = this.nfa.sets[index]!;
      const c = k === 0 ? 0 : this.bounds[k - 1]!;
      let inside = false;
      for (let r = 0; r < ranges.length && ranges[r]! <= c; r += 2) if (c <= ranges[r + 1]!) inside = true;
      row[k] = inside !== negated ? 1 : 2;
    }
    return row[k] === 1;
  }

  /** The state after reading a character of class `k` in state `from`, cached; -1 when the cache is full. */
  private step(from: number, k: number): number {
    const { kind, out, set } = this.nfa;
    const seeds: number[] = [];
    for (const s of this.states[from]!) if (kind[s] === SET && this.inSet(set[s]!, k)) seeds.push(out[s]!);
    seeds.push(this.nfa.start);
    const found = this.closure(seeds, false);
    if (!this.ids.has(found.join(",")) && ((this.states.length + 1) * this.classes > this.limits.cells || this.listed + found.length > this.limits.listed)) {
      this.uncached = true;
      return -1;
    }
    const next = this.intern(found);
    this.table[from * this.classes + k] = next + 1;
    return next;
  }

  /**
   * The automaton itself over the text, a set of its states per character: what the cache holds,
   * recomputed with no allocation per character (typed lists, marks by generation).
   */
  private simulate(text: string): boolean {
    const { kind, out, set, start } = this.nfa;
    const size = kind.length;
    this.lists ??= { a: new Int32Array(size), b: new Int32Array(size), seeds: new Int32Array(size + 1), stack: new Int32Array(3 * size + 2) };
    let { a: current, b: next } = this.lists;
    const seeds = this.lists.seeds;
    seeds[0] = start;
    let count = this.fill(current, seeds, 1, true);
    if (count < 0) return true;
    const n = text.length;
    for (let i = 0; i < n; i++) {
      let c = text.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
        const low = text.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          c = ((c - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
          i++;
        }
      }
      const k = c < 128 ? this.ascii[c]! : this.classOf(c);
      let seeded = 0;
      for (let j = 0; j < count; j++) {
        const s = current[j]!;
        if (kind[s] === SET && this.inSet(set[s]!, k)) seeds[seeded++] = out[s]!;
      }
      seeds[seeded++] = start;
      count = this.fill(next, seeds, seeded, false);
      if (count < 0) return true;
      [current, next] = [next, current];
    }
    const pending: number[] = [];
    for (let j = 0; j < count; j++) if (kind[current[j]!] === EOL) pending.push(current[j]!);
    return pending.length > 0 && this.closure(pending, n === 0, true, false).some((s) => kind[s] === MATCH);
  }

  private lists: { a: Int32Array; b: Int32Array; seeds: Int32Array; stack: Int32Array } | undefined;

  /** closure() into `into` without allocating: the count of states, or -1 as soon as MATCH is reached. */
  private fill(into: Int32Array, seeds: Int32Array, seedCount: number, atStart: boolean): number {
    const { kind, out, out2 } = this.nfa;
    const stack = this.lists!.stack;
    const generation = ++this.generation;
    let top = 0;
    for (let j = seedCount - 1; j >= 0; j--) stack[top++] = seeds[j]!;
    let count = 0;
    while (top > 0) {
      const s = stack[--top]!;
      if (this.mark[s] === generation) continue;
      this.mark[s] = generation;
      switch (kind[s]) {
        case SPLIT:
          stack[top++] = out2[s]!;
          stack[top++] = out[s]!;
          break;
        case BOL:
          if (atStart) stack[top++] = out[s]!;
          break;
        case MATCH:
          return -1;
        default:
          into[count++] = s;
      }
    }
    return count;
  }

  /** Whether the text may end in this state: its pending `$`s passed (and `^` too in the initial state, an empty text). */
  private endsHere(state: number): boolean {
    if (this.atEnd[state] === 0) {
      const pending = [...this.states[state]!].filter((s) => this.nfa.kind[s] === EOL);
      const reached = pending.length ? this.closure(pending, state === 0, true) : [];
      this.atEnd[state] = reached.some((s) => this.nfa.kind[s] === MATCH) ? 2 : 1;
    }
    return this.atEnd[state] === 2;
  }

  readonly test = (text: string): boolean => {
    if (this.uncached) return this.simulate(text);
    let state = 0;
    if (this.accepting[0]) return true;
    const n = text.length;
    const classes = this.classes;
    const ascii = this.ascii;
    // Locals for the loop; a step may grow (replace) the arrays, so they are read again after one.
    let table = this.table;
    let accepting = this.accepting;
    let dead = this.dead;
    for (let i = 0; i < n; i++) {
      let c = text.charCodeAt(i);
      let k: number;
      if (c < 128) k = ascii[c]!;
      else {
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
          const low = text.charCodeAt(i + 1);
          if (low >= 0xdc00 && low <= 0xdfff) {
            c = ((c - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
            i++;
          }
        }
        k = this.classOf(c);
      }
      const cached = table[state * classes + k]!;
      if (cached !== 0) state = cached - 1;
      else {
        state = this.step(state, k);
        if (state < 0) return this.simulate(text);
        table = this.table;
        accepting = this.accepting;
        dead = this.dead;
      }
      if (accepting[state]) return true;
      if (dead[state]) return false;
    }
    return this.endsHere(state);
  };
}
