// POST /v1/logs: OTLP/HTTP logs, on the one ingest path (accept.ts) with the codec's otlp-proto and
// otlp-json formats. Only the edges are OTLP's: the token (Bearer, or Basic's password), the
// Content-Type, and the answers the OTLP specification prescribes, in the request's own encoding:
// 200 + ExportLogsServiceResponse (partial_success when records were refused one by one), and
// for a refusal a google.rpc.Status with 400 for a body that cannot be decoded (our 406s), 413,
// 415, 401/403, and 429/503 with Retry-After, which OTLP clients retry.
import type { Format } from "../codec/format";
import { AppError, refusalHeaders } from "../errors";
import { bearerOrBasicToken } from "../http/auth";
import { CORS_ORIGIN, ingest, type IngestDeps, type Ingested, type Protocol } from "./accept";

const PROTOBUF_TYPE = "application/x-protobuf";
const JSON_TYPE = "application/json";

/** Content-Type → format: OTLP/HTTP's two encodings (parameters ignored). */
function otlpFormat(contentType: string | null): Format | AppError {
  const mediaType = (contentType ?? "").split(";", 1)[0]!.trim().toLowerCase();
  if (mediaType === PROTOBUF_TYPE || mediaType === "application/protobuf") return "otlp-proto";
  if (mediaType === JSON_TYPE) return "otlp-json";
  return new AppError(
    "unsupported_content_type",
    `Content-Type ${contentType ? JSON.stringify(mediaType.slice(0, 64)) : "is missing and"} is not supported on /v1/logs; use application/x-protobuf or application/json (OTLP/HTTP)`,
  );
}

const OTLP: Protocol = {
  name: "otlp",
  token: (headers) => bearerOrBasicToken(headers.get("authorization")),
  format: otlpFormat,
};

export async function acceptOtlp(request: Request, deps: IngestDeps): Promise<Response> {
  const outcome = await ingest(request, deps, OTLP);
  // Answers in the request's encoding; JSON when it named neither (a 415).
  const protobuf = otlpFormat(request.headers.get("content-type")) === "otlp-proto";
  return outcome instanceof AppError ? refusal(outcome, protobuf) : success(outcome, protobuf);
}

/**
 * The empty ExportLogsServiceResponse in protobuf is no bytes at all: a body-less template, cloned
 * per answer as accept.ts's 202 is (a returned Response's headers are moved out; cloning one with a
 * body would tee its stream). JSON's is "{}", made per answer.
 */
const OK_PROTOBUF = new Response(null, { status: 200, headers: { "content-type": PROTOBUF_TYPE, ...CORS_ORIGIN } });
const OK_JSON_HEADERS = { "content-type": JSON_TYPE, ...CORS_ORIGIN };

function success(ingested: Ingested, protobuf: boolean): Response {
  if (ingested.refused === 0) return protobuf ? (OK_PROTOBUF.clone() as Response) : new Response("{}", { status: 200, headers: OK_JSON_HEADERS });
  const message = ingested.refusal ?? "";
  const body = protobuf
    ? field(1, concat(varintField(1, ingested.refused), field(2, Buffer.from(message))))
    : JSON.stringify({ partialSuccess: { rejectedLogRecords: String(ingested.refused), errorMessage: message } });
  return new Response(body, { status: 200, headers: { "content-type": protobuf ? PROTOBUF_TYPE : JSON_TYPE, ...CORS_ORIGIN } });
}

/** OTLP/HTTP's status for each of ours: a body that cannot be used is 400 (not retried); the rest keep theirs. */
export function otlpStatus(status: number): number {
  return status === 406 ? 400 : status;
}

/** google.rpc.Code for a status: what gRPC clients and the Collector's logs show. */
function rpcCode(status: number): number {
  switch (status) {
    case 401:
      return 16; // UNAUTHENTICATED
    case 403:
      return 7; // PERMISSION_DENIED
    case 413:
    case 429:
      return 8; // RESOURCE_EXHAUSTED
    case 503:
      return 14; // UNAVAILABLE
    default:
      return status >= 500 ? 13 : 3; // INTERNAL, INVALID_ARGUMENT
  }
}

function refusal(error: AppError, protobuf: boolean): Response {
  const status = otlpStatus(error.status);
  const code = rpcCode(status);
  const body = protobuf ? concat(varintField(1, code), field(2, Buffer.from(error.message))) : JSON.stringify({ code, message: error.message });
  return new Response(body, { status, headers: refusalHeaders(error, protobuf ? PROTOBUF_TYPE : JSON_TYPE, CORS_ORIGIN) });
}

// The two small messages we write: a tag, then a varint or a length and bytes.
function varint(value: number): number[] {
  const bytes: number[] = [];
  for (; value >= 0x80; value = Math.floor(value / 128)) bytes.push((value % 128) | 0x80);
  bytes.push(value);
  return bytes;
}

function varintField(number: number, value: number): Buffer {
  return Buffer.from([...varint(number << 3), ...varint(value)]);
}

function field(number: number, bytes: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([...varint((number << 3) | 2), ...varint(bytes.length)]), bytes]);
}

function concat(...parts: Uint8Array[]): Buffer {
  return Buffer.concat(parts);
}
