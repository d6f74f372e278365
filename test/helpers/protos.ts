// Protobuf encoders that are not ours (protobufjs, from the messages' .proto definitions), for tests
// and the bench: OTLP's ExportLogsServiceRequest (opentelemetry-proto v1) and Loki's PushRequest
// (logproto's push.proto), with snappyjs's block compressor for Loki.
import protobuf from "protobufjs";
import { compress } from "snappyjs";

const OTLP_PROTO = `
syntax = "proto3";
package otlp;
message ExportLogsServiceRequest { repeated ResourceLogs resource_logs = 1; }
message ExportLogsServiceResponse { ExportLogsPartialSuccess partial_success = 1; }
message ExportLogsPartialSuccess { int64 rejected_log_records = 1; string error_message = 2; }
message Status { int32 code = 1; string message = 2; }
message ResourceLogs { Resource resource = 1; repeated ScopeLogs scope_logs = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message ScopeLogs { InstrumentationScope scope = 1; repeated LogRecord log_records = 2; string schema_url = 3; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message LogRecord {
  fixed64 time_unix_nano = 1; fixed64 observed_time_unix_nano = 11; int32 severity_number = 2; string severity_text = 3;
  AnyValue body = 5; repeated KeyValue attributes = 6; uint32 dropped_attributes_count = 7; fixed32 flags = 8;
  bytes trace_id = 9; bytes span_id = 10; string event_name = 12;
}
message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; } }
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
`;

const LOKI_PROTO = `
syntax = "proto3";
package logproto;
message PushRequest { repeated Stream streams = 1; }
message Stream { string labels = 1; repeated Entry entries = 2; uint64 hash = 3; }
message Entry { Timestamp timestamp = 1; string line = 2; repeated LabelPair structuredMetadata = 3; }
message LabelPair { string name = 1; string value = 2; }
message Timestamp { int64 seconds = 1; int32 nanos = 2; }
`;

const otlp = protobuf.parse(OTLP_PROTO, { keepCase: true }).root;
const loki = protobuf.parse(LOKI_PROTO, { keepCase: true }).root;
export const ExportLogsServiceRequest = otlp.lookupType("otlp.ExportLogsServiceRequest");
export const ExportLogsServiceResponse = otlp.lookupType("otlp.ExportLogsServiceResponse");
export const RpcStatus = otlp.lookupType("otlp.Status");
export const PushRequest = loki.lookupType("logproto.PushRequest");

/** An ExportLogsServiceRequest (snake_case fields, as in the .proto) → protobuf bytes. */
export function otlpProtobuf(request: object): Buffer {
  return Buffer.from(ExportLogsServiceRequest.encode(ExportLogsServiceRequest.fromObject(request)).finish());
}

/** A PushRequest → protobuf, snappy-compressed as Loki's clients send it. */
export function lokiProtobuf(request: object, snappy = true): Buffer {
  const bytes = PushRequest.encode(PushRequest.fromObject(request)).finish();
  return snappy ? Buffer.from(compress(Buffer.from(bytes))) : Buffer.from(bytes);
}

/** Nanoseconds since the epoch of a Date, as the digits OTLP and Loki send. */
export function nanos(date: Date, extra = 0): string {
  return (BigInt(date.getTime()) * 1_000_000n + BigInt(extra)).toString();
}

/** A string attribute. */
export const attr = (key: string, value: unknown) => ({ key, value: anyValue(value) });

export function anyValue(value: unknown): object {
  if (typeof value === "string") return { string_value: value };
  if (typeof value === "boolean") return { bool_value: value };
  if (typeof value === "bigint") return { int_value: value.toString() };
  if (typeof value === "number") return Number.isInteger(value) ? { int_value: value } : { double_value: value };
  if (value instanceof Uint8Array) return { bytes_value: value };
  if (Array.isArray(value)) return { array_value: { values: value.map(anyValue) } };
  if (value && typeof value === "object") return { kvlist_value: { values: Object.entries(value).map(([k, v]) => attr(k, v)) } };
  return {};
}
