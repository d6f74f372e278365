// The Loki push API's bodies → one event per log line: `dt` the entry's time (nanoseconds),
// `labels` the stream's labels, `metadata` the entry's structured metadata, and `level` copied from
// a `level` (or `detected_level`) label or metadata. A line that is a JSON object (pino-loki,
// Promtail's JSON pipelines) gives the event its fields (jsonLineEvent below: what wins where a
// field and the push both name a key); any other line is `message`, as sent. JSON
// (`{"streams":[{"stream":{…},"values":[["<ns>","<line>",{…}?]]}]}`, already parsed by decode.ts)
// and protobuf (logproto's PushRequest, after the route undid its snappy block), read with
// protobuf.ts. A bad stream or entry refuses the request naming it (Loki's own answer is a 400
// too); nothing is stored from it. docs/shippers.md ("Loki push API") documents the shape.
import { AppError } from "../errors";
import { LEN, Reader, VARINT, WireError } from "./protobuf";
import { millisText, nanosTextOf, setKey } from "./otlp-event";
import { eventMicros } from "./time";

type Json = Record<string, unknown>;

/** How a line that looks like a JSON object is read: decode.ts's parse (exact big numbers) and INGEST_MAX_DEPTH. */
export interface LineReader {
  parse(text: string): unknown;
  maxDepth: number;
}

/** One entry of a push, before its stream's labels are known (protobuf may send them last). */
interface Entry {
  dt: string | undefined;
  line: string;
  metadata: Json | undefined;
}

function lokiEvent(entry: Entry, labels: Json, lines: LineReader): Json {
  const level = levelOf(labels) ?? (entry.metadata && levelOf(entry.metadata));
  const fields = jsonObjectOf(entry.line, lines);
  if (fields === undefined) return { dt: entry.dt, level, message: entry.line, labels, metadata: entry.metadata };
  return jsonLineEvent(fields, entry.dt, level, labels, entry.metadata);
}

/**
 * A JSON line's event: its own fields, and the push's where the line has none or cannot mean the
 * same. `dt`: the line's when it reads as a time (as on `POST /`: the application's own time
 * beats a shipper that stamps lines when it reads them), else the entry's. `level`: the line's
 * when a string; a number becomes pino's name for it (10 trace … 60 fatal: the line is pino's,
 * where pino-loki's label says `debug` for trace and `critical` for fatal), else the stream's
 * `level` label, and is kept in `level_number`; none: the label's, as for a text line. `labels` and `metadata` are the stream's and the entry's; a line's
 * own field of either name is kept as `line_labels` / `line_metadata`. Every other field is the
 * line's as sent (pino's `time` stays epoch milliseconds; `msg` stays `msg`).
 */
function jsonLineEvent(fields: Json, dt: string | undefined, level: string | undefined, labels: Json, metadata: Json | undefined): Json {
  const event: Json = { dt: undefined, level: undefined, ...fields };
  if (fields.dt === undefined || eventMicros(fields.dt) === undefined) event.dt = dt;
  const own = fields.level;
  if (typeof own === "number") {
    const name = PINO_LEVELS[own] ?? level;
    if (name !== undefined) {
      event.level = name;
      if (fields.level_number === undefined) event.level_number = own;
    }
  } else if (own === undefined) event.level = level;
  if (fields.labels !== undefined && fields.line_labels === undefined) event.line_labels = fields.labels;
  event.labels = labels;
  if (metadata !== undefined) {
    if (fields.metadata !== undefined && fields.line_metadata === undefined) event.line_metadata = fields.metadata;
    event.metadata = metadata;
  }
  return event;
}

/** pino's level numbers (its `levels.labels`). */
const PINO_LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };

/** The line's fields when it is a JSON object (blanks around it allowed) no deeper than events may be; else undefined. */
function jsonObjectOf(line: string, lines: LineReader): Json | undefined {
  let first = 0;
  while (first < line.length && BLANK.has(line.charCodeAt(first))) first++;
  if (line.charCodeAt(first) !== OPEN_BRACE) return undefined;
  let value: unknown;
  try {
    value = lines.parse(line);
  } catch {
    return undefined;
  }
  // Too deep to be stored as fields: kept as its text, as before, rather than refusing the push.
  return isObject(value) && !deeperThan(value, 1, lines.maxDepth) ? value : undefined;
}
const OPEN_BRACE = 0x7b;
const BLANK = new Set([0x20, 0x09, 0x0a, 0x0d]);

function deeperThan(value: object, depth: number, max: number): boolean {
  if (depth > max) return true;
  for (const item of Object.values(value)) {
    if (typeof item === "object" && item !== null && !JSON.isRawJSON(item) && deeperThan(item, depth + 1, max)) return true;
  }
  return false;
}

/** `level`, else `detected_level` (Loki's own guess), when a string. */
function levelOf(pairs: Json): string | undefined {
  const level = pairs.level ?? pairs.detected_level;
  return typeof level === "string" ? level : undefined;
}

export function lokiJsonEvents(value: unknown, lines: LineReader): unknown[] | AppError {
  const streams = isObject(value) ? value.streams : undefined;
  if (!Array.isArray(streams)) return invalid("the body is not an object with a streams array");
  const events: unknown[] = [];
  for (let s = 0; s < streams.length; s++) {
    const stream = streams[s];
    if (!isObject(stream)) return invalid(`streams[${s}] is not an object`);
    const labels = stream.stream ?? {};
    if (!isObject(labels)) return invalid(`streams[${s}].stream (its labels) is not an object`);
    const entries = stream.values;
    if (!Array.isArray(entries)) return invalid(`streams[${s}].values is not an array`);
    for (let e = 0; e < entries.length; e++) {
      const entry = entries[e];
      if (!Array.isArray(entry) || entry.length < 2 || entry.length > 3)
        return invalid(`streams[${s}].values[${e}] is not [timestamp, line] or [timestamp, line, metadata]`);
      const [time, line, metadata] = entry as [unknown, unknown, unknown];
      const dt = nanosTextOf(typeof time === "number" ? time : typeof time === "string" ? time.trim() : undefined);
      if (dt === undefined) return invalid(`streams[${s}].values[${e}]: the timestamp is not nanoseconds since the epoch as a string of digits`);
      if (typeof line !== "string") return invalid(`streams[${s}].values[${e}]: the line is not a string`);
      if (metadata !== undefined && !isObject(metadata)) return invalid(`streams[${s}].values[${e}]: the structured metadata is not an object`);
      events.push(lokiEvent({ dt, line, metadata }, labels, lines));
    }
  }
  return events;
}

const T_STREAM = (1 << 3) | LEN,
  T_LABELS = (1 << 3) | LEN,
  T_ENTRY = (2 << 3) | LEN;
const T_TIMESTAMP = (1 << 3) | LEN,
  T_LINE = (2 << 3) | LEN,
  T_METADATA = (3 << 3) | LEN;
const T_SECONDS = (1 << 3) | VARINT,
  T_NANOS = (2 << 3) | VARINT,
  T_NAME = (1 << 3) | LEN,
  T_VALUE = (2 << 3) | LEN;

/** logproto.PushRequest: streams (1) { labels (1), entries (2) { timestamp (1), line (2), structuredMetadata (3) } }. */
export function decodeLokiProto(body: Buffer, lines: LineReader): unknown[] | AppError {
  const reader = new Reader(body);
  const events: unknown[] = [];
  let stream = 0;
  try {
    while (reader.pos < body.length) {
      const t = reader.tag();
      if (t === T_STREAM) {
        const problem = pushStream(reader, reader.end(body.length), events, lines);
        if (problem !== undefined) return invalid(`stream ${stream}: ${problem}`);
        stream++;
      } else reader.skip(t & 7, body.length);
    }
  } catch (error) {
    if (error instanceof WireError) return new AppError("body_undecodable", `Couldn't parse Loki protobuf content: ${error.problem}`);
    throw error;
  }
  return events;
}

/** One stream's entries into `events` (labels may come after them); a problem with it, or undefined. */
function pushStream(reader: Reader, end: number, events: unknown[], lines: LineReader): string | undefined {
  const entries: Entry[] = [];
  let labelsText = "{}";
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LABELS) labelsText = reader.string(end);
    else if (t === T_ENTRY) {
      const entry = readEntry(reader, reader.end(end));
      if (typeof entry === "string") return `entry ${entries.length}: ${entry}`;
      entries.push(entry);
    } else reader.skip(t & 7, end);
  }
  if (reader.pos !== end) throw new WireError("a field runs past the end of its message");
  const labels = parseLabels(labelsText);
  if (typeof labels === "string") return labels;
  for (const entry of entries) events.push(lokiEvent(entry, labels, lines));
  return undefined;
}

function readEntry(reader: Reader, end: number): Entry | string {
  let dt: string | undefined;
  let line = "";
  let metadata: Json | undefined;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_LINE) line = reader.string(end);
    else if (t === T_TIMESTAMP) {
      dt = timestamp(reader, reader.end(end));
      if (dt === "") return "the timestamp is out of range";
    } else if (t === T_METADATA) labelPair(reader, reader.end(end), (metadata ??= {}));
    else reader.skip(t & 7, end);
  }
  if (reader.pos !== end) throw new WireError("a field runs past the end of its message");
  return { dt, line, metadata };
}

/** google.protobuf.Timestamp → RFC 3339 with nanoseconds; "" when out of range; undefined for the epoch itself (unset). */
function timestamp(reader: Reader, end: number): string | undefined {
  let seconds: number | string = 0,
    nanos: number | string = 0;
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_SECONDS) seconds = reader.int64();
    else if (t === T_NANOS) nanos = reader.int64();
    else reader.skip(t & 7, end);
  }
  if (reader.pos !== end) throw new WireError("a field runs past the end of its message");
  if (typeof seconds !== "number" || typeof nanos !== "number" || seconds < 0 || seconds > MAX_SECONDS || nanos < 0 || nanos > 999_999_999) return "";
  if (seconds === 0 && nanos === 0) return undefined;
  return millisText(seconds * 1000 + Math.floor(nanos / 1e6), nanos % 1e6);
}
/** 9999-12-31T23:59:59Z. */
const MAX_SECONDS = 253402300799;

function labelPair(reader: Reader, end: number, target: Json): void {
  let name = "",
    value = "";
  while (reader.pos < end) {
    const t = reader.tag();
    if (t === T_NAME) name = reader.string(end);
    else if (t === T_VALUE) value = reader.string(end);
    else reader.skip(t & 7, end);
  }
  if (reader.pos !== end) throw new WireError("a field runs past the end of its message");
  setKey(target, name, value);
}

/**
 * A stream's labels as Loki's protobuf sends them, Prometheus' text form: `{job="api", level="info"}`,
 * values with \" \\ \n escapes. An object of strings, or what is wrong with the text.
 */
export function parseLabels(text: string): Json | string {
  const labels: Json = {};
  let at = skipBlanks(text, 0);
  if (text[at] !== "{") return "its labels do not start with {";
  at = skipBlanks(text, at + 1);
  if (text[at] === "}") return skipBlanks(text, at + 1) === text.length ? labels : "its labels have text after }";
  for (;;) {
    const name = LABEL_NAME.exec(text.slice(at, at + 1024));
    if (!name) return `its labels have no valid name at position ${at}`;
    at = skipBlanks(text, at + name[0].length);
    if (text[at] !== "=") return `its label ${name[0]} has no ="value"`;
    at = skipBlanks(text, at + 1);
    if (text[at] !== '"') return `its label ${name[0]} has no ="value"`;
    let value = "";
    let i = at + 1;
    for (; i < text.length && text[i] !== '"'; i++) {
      if (text[i] === "\\") {
        const next = text[++i];
        value += next === "n" ? "\n" : next === "t" ? "\t" : (next ?? "");
      } else value += text[i];
    }
    if (i >= text.length) return `its label ${name[0]} has an unterminated value`;
    setKey(labels, name[0], value);
    at = skipBlanks(text, i + 1);
    if (text[at] === ",") at = skipBlanks(text, at + 1);
    else if (text[at] === "}") return skipBlanks(text, at + 1) === text.length ? labels : "its labels have text after }";
    else return `its labels have no , or } at position ${at}`;
    if (text[at] === "}") return skipBlanks(text, at + 1) === text.length ? labels : "its labels have text after }"; // a trailing comma
  }
}
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_.]*/;

function skipBlanks(text: string, at: number): number {
  while (at < text.length && (text[at] === " " || text[at] === "\t" || text[at] === "\n")) at++;
  return at;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function invalid(problem: string): AppError {
  return new AppError("body_undecodable", `Loki push: ${problem}`);
}
