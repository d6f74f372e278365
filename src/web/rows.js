// One row of the list: its time (local or UTC, with the date when not today), its source and its
// line — the source's live_tail_pattern, or a compact key=value form of the event when the pattern
// finds nothing to show — with the query's bare words marked. Always one line (the full event
// opens on click). Everything from the server is set as text, never as HTML.
import { levelOf } from "./levels.js";

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
/** Fields the API adds to every row: never part of the compact form. */
const OURS = new Set(["dt", "id", "source_id"]);
const LEVEL_PATH = /^(level|severity|log\.level)$/i;
const COMPACT_MAX_CHARS = 600;

const pad = (n, width = 2) => String(n).padStart(width, "0");

/** "14:03:07.125", or "Nov 23 14:03:07.125" on another day, or "2025-11-23 14:03:07.125" in another year. */
export function formatTime(dt, utc, now = new Date(), withDate = false) {
  const date = new Date(`${dt.slice(0, 23)}Z`);
  if (Number.isNaN(date.getTime())) return dt;
  const get = utc
    ? { y: date.getUTCFullYear(), mo: date.getUTCMonth(), d: date.getUTCDate(), h: date.getUTCHours(), mi: date.getUTCMinutes(), s: date.getUTCSeconds() }
    : { y: date.getFullYear(), mo: date.getMonth(), d: date.getDate(), h: date.getHours(), mi: date.getMinutes(), s: date.getSeconds() };
  const today = utc
    ? now.getUTCFullYear() === get.y && now.getUTCMonth() === get.mo && now.getUTCDate() === get.d
    : now.getFullYear() === get.y && now.getMonth() === get.mo && now.getDate() === get.d;
  const time = `${pad(get.h)}:${pad(get.mi)}:${pad(get.s)}.${dt.slice(20, 23)}`;
  if (today && !withDate) return time;
  const year = utc ? now.getUTCFullYear() : now.getFullYear();
  return get.y === year ? `${MONTHS[get.mo]} ${pad(get.d)} ${time}` : `${pad(get.y, 4)}-${pad(get.mo + 1)}-${pad(get.d)} ${time}`;
}

/** "UTC+01:00" for this browser's zone at that instant. */
export function zoneName(date = new Date()) {
  const offset = -date.getTimezoneOffset();
  const sign = offset < 0 ? "-" : "+";
  return `UTC${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
}

/** One formatter for every row: toLocaleString builds one per call (a third of a busy live tail's time). */
const LOCAL = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** What the time cell's title says: both zones, to the microsecond. */
export function timeTitle(dt) {
  const date = new Date(`${dt.slice(0, 23)}Z`);
  return `${dt} (UTC)\n${LOCAL.format(date)} ${zoneName(date)} (local)`;
}

/** The colour of a level: its severity in the one table of level names (src/query/levels.ts), else "other". */
export function levelClass(level) {
  return levelOf(String(level)) ?? "other";
}

export function lookup(row, path) {
  return path.split(".").reduce((object, key) => (object !== null && typeof object === "object" ? object[key] : undefined), row);
}

const text = (value) => (value === undefined || value === null ? "" : typeof value === "object" ? JSON.stringify(value) : String(value));

/**
 * The row's line as nodes. The pattern's fields first; when every field but the level is empty
 * (an event with no `message`), the event itself in one compact line instead of a blank.
 */
export function lineNodes(pattern, row) {
  const parts = [];
  const used = new Set();
  let filled = false;
  let levelNode;
  let last = 0;
  for (const match of pattern.matchAll(/\{([^{}]+)\}/g)) {
    if (match.index > last) parts.push(document.createTextNode(pattern.slice(last, match.index)));
    const path = match[1].trim();
    used.add(path.split(".")[0]);
    const value = text(lookup(row, path));
    if (LEVEL_PATH.test(path)) {
      levelNode = Object.assign(document.createElement("span"), { className: `level ${levelClass(value)}`, textContent: value });
      parts.push(levelNode);
    } else {
      if (value !== "") filled = true;
      parts.push(document.createTextNode(value));
    }
    last = match.index + match[0].length;
  }
  if (last < pattern.length) parts.push(document.createTextNode(pattern.slice(last)));
  if (filled) return parts;
  const compact = compactNodes(row, levelNode ? used : new Set());
  return levelNode && levelNode.textContent ? [levelNode, document.createTextNode(" "), ...compact] : compact;
}

/** `key=value key2.sub=value` for the event's fields (logpond's own and `skip` left out), one line. */
function compactNodes(row, skip) {
  const nodes = [];
  let length = 0;
  const add = (key, value) => {
    if (length > COMPACT_MAX_CHARS) return;
    const shown = typeof value === "string" ? (/^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)) : text(value);
    if (nodes.length) nodes.push(document.createTextNode(" "));
    nodes.push(Object.assign(document.createElement("span"), { className: "key", textContent: `${key}=` }), document.createTextNode(shown));
    length += key.length + shown.length + 2;
  };
  const walk = (object, prefix, depth) => {
    for (const [key, value] of Object.entries(object)) {
      if (!prefix && (OURS.has(key) || skip.has(key))) continue;
      const name = prefix ? `${prefix}.${key}` : key;
      if (value !== null && typeof value === "object" && !Array.isArray(value) && depth < 3 && Object.keys(value).length) walk(value, name, depth + 1);
      else add(name, value);
    }
  };
  walk(row, "", 0);
  if (!nodes.length) nodes.push(Object.assign(document.createElement("span"), { className: "key", textContent: "(an empty event)" }));
  return nodes;
}

/**
 * The bare words and phrases of a query (what it searches anywhere in the event), for marking:
 * not field terms (`level:error`), not the operators, not a term that NOT negates (an even number
 * of NOTs over it, counting those before its parentheses, leaves it searched).
 */
export function searchedWords(query) {
  const words = [];
  // As src/query/parse.ts reads a query: a phrase; a /pattern/ (its closing slash ends a term); a
  // field and operator with its value (after `:`, also a comparison, a /pattern/); a parenthesis;
  // `-` before a term (NOT); a word.
  const quoted = String.raw`"(?:[^"\\]|\\.)*"`;
  const pattern = String.raw`\/(?:[^\/\\]|\\.)*\/(?=[\s()]|$)`;
  const field = String.raw`[A-Za-z0-9_.@$][A-Za-z0-9_.@$-]*\s*(?:(?:!:|:)\s*(?:(?:>=|<=|>|<)\s*)?(?:${quoted}|${pattern}|[^\s()]*)|(?:>=|<=|=~|!~|!=|=|>|<)\s*(?:${quoted}|[^\s()]*))`;
  const token = new RegExp(String.raw`\s*(?:"((?:[^"\\]|\\.)*)"|(${pattern})|(${field})|([()])|(-)(?=[^\s)])|([^\s()"]+))`, "gy");
  const negatedAt = [false]; // per open parenthesis: is what it holds negated?
  let not = false; // NOTs just read, not yet applied (each one flips)
  for (const [, phrase, regex, fieldTerm, paren, minus, word] of query.matchAll(token)) {
    if (paren === "(") {
      negatedAt.push(negatedAt[negatedAt.length - 1] !== not);
      not = false;
    } else if (paren === ")") {
      if (negatedAt.length > 1) negatedAt.pop();
      not = false;
    } else if (minus !== undefined || (word !== undefined && /^not$/i.test(word))) {
      not = !not;
    } else if (word === undefined || !/^(and|or)$/i.test(word)) {
      const negated = negatedAt[negatedAt.length - 1] !== not;
      not = false;
      if (negated || fieldTerm !== undefined || regex !== undefined) continue;
      // A trailing `*` is a prefix: the word without it is what is found.
      const text = phrase !== undefined ? phrase.replace(/\\(.)/g, "$1") : word.endsWith("*") ? word.slice(0, -1) : word;
      if (text !== "") words.push(text);
    }
  }
  return [...new Set(words)];
}

/** A regular expression finding any of the words, case-insensitively; undefined for none. */
export function marker(words) {
  if (!words.length) return undefined;
  return new RegExp(words.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "gi");
}

/** Wraps what `regex` finds in the text nodes among `nodes` (in place) in <mark>. */
export function markNodes(nodes, regex) {
  if (!regex) return nodes;
  const out = [];
  const markText = (value) => {
    const pieces = [];
    let last = 0;
    for (const match of value.matchAll(regex)) {
      if (!match[0]) continue;
      if (match.index > last) pieces.push(document.createTextNode(value.slice(last, match.index)));
      pieces.push(Object.assign(document.createElement("mark"), { textContent: match[0] }));
      last = match.index + match[0].length;
    }
    if (!pieces.length) return undefined;
    if (last < value.length) pieces.push(document.createTextNode(value.slice(last)));
    return pieces;
  };
  for (const node of nodes) {
    if (node.nodeType === 3) {
      out.push(...(markText(node.nodeValue) ?? [node]));
    } else {
      if (node.firstChild && node.firstChild.nodeType === 3 && node.childNodes.length === 1) {
        const pieces = markText(node.textContent);
        if (pieces) node.replaceChildren(...pieces);
      }
      out.push(node);
    }
  }
  return out;
}
