// OTLP/HTTP JSON (an ExportLogsServiceRequest, already parsed by decode.ts) → one event per
// LogRecord, the same events as otlp-proto.ts builds from protobuf. OTLP/JSON's own rules: field
// names in lowerCamelCase (the proto names in snake_case are accepted too), trace and span ids in
// hex, 64-bit integers as strings or numbers, bytes in base64, enums as numbers (or their names).
// A structure of the wrong kind (resourceLogs not an array, a record not an object) is refused
// naming its path; a scalar of the wrong kind is ignored. Nesting is bounded by INGEST_MAX_DEPTH.
import { AppError } from "../errors";
import {
  addAttribute,
  doubleValue,
  finishRecords,
  finishScope,
  idOrUndefined,
  logEvent,
  nanosTextOf,
  nestAttributes,
  resetAttributes,
  setKey,
  severityName,
  severityNumberOf,
  splitResource,
} from "./otlp-event";

type Json = Record<string, unknown>;

/**
 * A JSON body on `/` is an OTLP logs envelope: an object whose resourceLogs is an array (what every
 * OTLP/JSON exporter writes; one property lookup on an ordinary event).
 */
export function isOtlpEnvelope(value: unknown): boolean {
  return typeof value === "object" && value !== null && Array.isArray((value as Json).resourceLogs);
}

let maxDepth = 64;
/** Where the mapping is (built into a message only on a refusal: no path strings per record). */
let r = -1,
  s = -1,
  i = -1;

function where(): string {
  return `resourceLogs[${r}]${s < 0 ? "" : `.scopeLogs[${s}]`}${i < 0 ? "" : `.logRecords[${i}]`}`;
}

export function otlpJsonEvents(value: unknown, limits: { maxDepth: number }): unknown[] | AppError {
  maxDepth = limits.maxDepth;
  if (!isObject(value)) return new AppError("body_undecodable", "OTLP/JSON: the body is not an object (an ExportLogsServiceRequest)");
  const events: unknown[] = [];
  r = s = i = -1;
  resetAttributes();
  try {
    const resources = list(field(value, "resourceLogs", "resource_logs"), "resourceLogs");
    for (r = 0; r < resources.length; r++) {
      s = i = -1;
      const resourceLogs = resources[r];
      if (!isObject(resourceLogs)) throw shapeError("is not an object");
      const from = events.length;
      const scopes = list(field(resourceLogs, "scopeLogs", "scope_logs"), "scopeLogs");
      for (s = 0; s < scopes.length; s++) {
        i = -1;
        const scopeLogs = scopes[s];
        if (!isObject(scopeLogs)) throw shapeError("is not an object");
        const scopeFrom = events.length;
        const records = list(field(scopeLogs, "logRecords", "log_records"), "logRecords");
        for (i = 0; i < records.length; i++) {
          const record = records[i];
          if (!isObject(record)) throw shapeError("is not an object");
          events.push(logRecord(record));
        }
        i = -1;
        const scope = scopeOf(scopeLogs.scope);
        if (scope !== undefined) finishScope(events, scopeFrom, scope);
      }
      s = -1;
      const resource = resourceLogs.resource;
      const attributes = isObject(resource) ? attributesOf(resource.attributes, "resource.attributes") : undefined;
      const split = splitResource(attributes);
      finishRecords(events, from, split.service, split.resource);
    }
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  return events;
}

function logRecord(record: Json) {
  const severity = severityNumberOf(field(record, "severityNumber", "severity_number")) ?? 0;
  const severityText = field(record, "severityText", "severity_text");
  const body = anyValue(record.body, 1);
  const attributes = attributesOf(record.attributes, "attributes");
  const text = typeof body === "string";
  const flags = record.flags;
  const eventName = field(record, "eventName", "event_name");
  return logEvent(
    nanosTextOf(field(record, "timeUnixNano", "time_unix_nano")) ?? nanosTextOf(field(record, "observedTimeUnixNano", "observed_time_unix_nano")),
    typeof severityText === "string" && severityText !== "" ? severityText : severityName(severity),
    severity > 0 ? severity : undefined,
    text ? (body as string) : undefined,
    text || body === null ? undefined : body,
    idOf(field(record, "traceId", "trace_id")),
    idOf(field(record, "spanId", "span_id")),
    typeof flags === "number" && flags > 0 ? flags : undefined,
    typeof eventName === "string" && eventName !== "" ? eventName : undefined,
    attributes,
  );
}

function scopeOf(scope: unknown): Json | undefined {
  if (!isObject(scope)) return undefined;
  const name = typeof scope.name === "string" && scope.name !== "" ? scope.name : undefined;
  const version = typeof scope.version === "string" && scope.version !== "" ? scope.version : undefined;
  const attributes = attributesOf(scope.attributes, "scope.attributes");
  if (!name && !version && !attributes) return undefined;
  return { name, version, attributes };
}

/** A KeyValue list → an object with dotted keys nested (otlp-event.ts); undefined when empty. */
function attributesOf(value: unknown, name: string): Json | undefined {
  if (value === undefined || value === null) return undefined;
  const pairs = list(value, name);
  if (pairs.length === 0) return undefined;
  const target: Json = {};
  for (let k = 0; k < pairs.length; k++) {
    const pair = pairs[k];
    if (!isObject(pair) || typeof pair.key !== "string") throw shapeError(`${name}[${k}] is not a KeyValue with a string key`);
    addAttribute(target, pair.key, anyValue(pair.value, 1));
  }
  nestAttributes(target);
  return target;
}

/** An AnyValue → JSON, as otlp-proto.ts does. */
function anyValue(value: unknown, depth: number): unknown {
  if (!isObject(value)) return null;
  if (depth > maxDepth) throw tooDeep();
  const string = field(value, "stringValue", "string_value");
  if (typeof string === "string") return string;
  const bool = field(value, "boolValue", "bool_value");
  if (typeof bool === "boolean") return bool;
  const int = field(value, "intValue", "int_value");
  if (int !== undefined) return intOf(int);
  const double = field(value, "doubleValue", "double_value");
  if (typeof double === "number") return doubleValue(double);
  if (typeof double === "string") return doubleValue(Number(double));
  const array = field(value, "arrayValue", "array_value");
  if (isObject(array)) {
    const items = list(array.values, "an arrayValue's values");
    const out = new Array<unknown>(items.length);
    for (let k = 0; k < items.length; k++) out[k] = anyValue(items[k], depth + 1);
    return out;
  }
  const kvlist = field(value, "kvlistValue", "kvlist_value");
  if (isObject(kvlist)) {
    if (depth + 1 > maxDepth) throw tooDeep();
    const pairs = list(kvlist.values, "a kvlistValue's values");
    const out: Json = {};
    for (let k = 0; k < pairs.length; k++) {
      const pair = pairs[k];
      if (!isObject(pair) || typeof pair.key !== "string") throw shapeError(`a kvlistValue's values[${k}] is not a KeyValue with a string key`);
      setKey(out, pair.key, anyValue(pair.value, depth + 1));
    }
    return out;
  }
  const bytes = field(value, "bytesValue", "bytes_value");
  if (typeof bytes === "string") return bytes; // base64 already, as OTLP/JSON writes bytes
  return null;
}

/** int64 as JSON sends it: a number, or a string of digits (exact past 2^53). */
function intOf(value: unknown): unknown {
  if (typeof value === "number" || JSON.isRawJSON(value)) return value;
  if (typeof value !== "string" || !/^-?\d{1,20}$/.test(value)) return null;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : JSON.rawJSON(value.replace(/^(-?)0+(?=\d)/, "$1"));
}

/** Hex ids as OTLP/JSON sends them, lower-cased; anything else is kept as sent. */
function idOf(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  return idOrUndefined(/^[0-9a-fA-F]+$/.test(value) ? value.toLowerCase() : value);
}

function field(object: Json, camel: string, snake: string): unknown {
  const value = object[camel];
  return value === undefined ? object[snake] : value;
}

const EMPTY: readonly unknown[] = [];

function list(value: unknown, name: string): readonly unknown[] {
  if (value === undefined || value === null) return EMPTY;
  if (!Array.isArray(value)) throw shapeError(`${name} is not an array`);
  return value;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `problem` at the current place: "OTLP/JSON: resourceLogs[0].scopeLogs[2]: logRecords is not an array". */
function shapeError(problem: string): AppError {
  return new AppError("body_undecodable", `OTLP/JSON: ${r < 0 ? "" : `${where()}: `}${problem}`);
}

function tooDeep(): AppError {
  return new AppError("too_deep", `OTLP/JSON: ${where()}: an AnyValue is nested deeper than ${maxDepth} levels (INGEST_MAX_DEPTH)`);
}
