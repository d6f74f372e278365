// Fluent Bit's event entries → events. Its `msgpack` output sends the buffered chunk as it is:
// entries back to back, each [[time, metadata], record] (event format v2, Fluent Bit ≥ 2.1) or
// [time, record] (older; Fluentd's forward entries too), where time is seconds as an integer or a
// float, or the EventTime extension (type 0: 4-byte seconds, 4-byte nanoseconds, big-endian).
// The event is the record, as Fluent Bit's own JSON formats render it (flb_pack.c): the entry's
// time as `dt` unless the record has one, and non-empty metadata and the open group's attributes
// under `__internal__`; group markers (time -1 / -2) are not events. Never throws.

/** Fluent's EventTime (msgpack extension type 0, 8 bytes). */
export class EventTime {
  constructor(
    readonly seconds: number,
    readonly nanoseconds: number,
  ) {}

  /** RFC 3339 UTC with nine fraction digits (the dt rules keep six). */
  text(): string {
    const carry = Math.floor(this.nanoseconds / 1e9); // a sender's nanoseconds past 999,999,999
    const nanos = this.nanoseconds - carry * 1e9;
    return `${new Date((this.seconds + carry) * 1000).toISOString().slice(0, 19)}.${String(nanos).padStart(9, "0")}Z`;
  }
}

/**
 * msgpackr's decoder for extension 0: an EventTime when it holds 8 bytes; otherwise what msgpackr
 * makes of it (undefined, notepack's meaning, which msgpackr itself writes as a fixext 1).
 */
export function unpackExtensionZero(data: Uint8Array): EventTime | undefined {
  if (data.length !== 8) return undefined;
  const view = new DataView(data.buffer, data.byteOffset, 8);
  return new EventTime(view.getUint32(0), view.getUint32(4));
}

/** The seconds of Fluent Bit's group markers as EventTime (uint32 -1 and -2; flb_log_event_decoder.c). */
const GROUP_START_SECONDS = 0xffffffff;
const GROUP_END_SECONDS = 0xfffffffe;

/**
 * Whether a body's top-level value may hold entries rather than events: its first element is no
 * map. One check on the usual path (an array of events starts with a map).
 */
export function mayHoldEntries(first: unknown): boolean {
  return !isMap(first);
}

/** One entry: a two-element array of a time (or [time, metadata map]) and a record map. */
export function isEntry(value: unknown): value is [unknown, unknown] {
  if (!Array.isArray(value) || value.length !== 2 || !isMap(value[1])) return false;
  const head = value[0];
  if (Array.isArray(head)) return head.length === 2 && isTime(head[0]) && isMap(head[1]);
  return isTime(head);
}

/**
 * Values (a body's top-level values, or the elements of its one array) → events: each entry
 * becomes its record; anything else passes through as it is (a map is an event; the encoder
 * refuses the rest with the event's index).
 */
export function eventsOfEntries(values: unknown[]): unknown[] {
  const events: unknown[] = [];
  let group: unknown; // the open group's attributes, while non-empty
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (!isEntry(value)) {
      events.push(value);
      continue;
    }
    const head = value[0];
    const time = Array.isArray(head) ? head[0] : head;
    const marker = groupMarker(time);
    if (marker === "start") group = isEmpty(value[1]) ? undefined : value[1];
    else if (marker === "end") group = undefined;
    else events.push(recordOf(value[1] as Record<string, unknown> | Map<unknown, unknown>, time, Array.isArray(head) ? head[1] : undefined, group));
  }
  return events;
}

function recordOf(record: Record<string, unknown> | Map<unknown, unknown>, time: unknown, metadata: unknown, group: unknown): unknown {
  setIfAbsent(record, "dt", time instanceof EventTime ? time.text() : time);
  const withMetadata = metadata !== undefined && !isEmpty(metadata);
  if (withMetadata || group !== undefined) {
    const internal: Record<string, unknown> = {};
    if (group !== undefined) internal.group_attributes = group;
    if (withMetadata) internal.log_metadata = metadata;
    setIfAbsent(record, "__internal__", internal);
  }
  return record;
}

function groupMarker(time: unknown): "start" | "end" | undefined {
  if (time instanceof EventTime) {
    if (time.nanoseconds !== 0) return undefined;
    return time.seconds === GROUP_START_SECONDS ? "start" : time.seconds === GROUP_END_SECONDS ? "end" : undefined;
  }
  return time === -1 ? "start" : time === -2 ? "end" : undefined;
}

function setIfAbsent(record: Record<string, unknown> | Map<unknown, unknown>, key: string, value: unknown): void {
  if (record instanceof Map) {
    if (!record.has(key)) record.set(key, value);
  } else if (!Object.hasOwn(record, key)) {
    record[key] = value;
  }
}

function isTime(value: unknown): boolean {
  return typeof value === "number" || typeof value === "bigint" || value instanceof EventTime || value instanceof Date;
}

function isMap(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null || value instanceof Map;
}

function isEmpty(map: unknown): boolean {
  if (map instanceof Map) return map.size === 0;
  for (const _ in map as object) return false;
  return true;
}
