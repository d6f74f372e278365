// POST /loki/api/v1/push: the Loki push API, on the one ingest path (accept.ts) with the codec's
// loki-json and loki-proto formats. Loki's edges: the token (Bearer — Promtail's and Alloy's
// bearer_token — or Basic's password — pino-loki's basicAuth), JSON or protobuf (a missing
// Content-Type is protobuf, as Loki reads it), protobuf always a snappy block (snappy.ts), and
// Loki's answers: 204, or the refusal's message as text with 400 for a body that cannot be used.
import type { Format } from "../codec/format";
import { AppError, refusalHeaders } from "../errors";
import { bearerOrBasicToken } from "../http/auth";
import { CORS_ORIGIN, ingest, type IngestDeps, type Protocol } from "./accept";
import { otlpStatus } from "./otlp";
import { unsnappy } from "./snappy";

function lokiFormat(contentType: string | null): Format | AppError {
  const mediaType = (contentType ?? "").split(";", 1)[0]!.trim().toLowerCase();
  if (mediaType === "application/json") return "loki-json";
  if (mediaType === "" || mediaType === "application/x-protobuf" || mediaType === "application/protobuf") return "loki-proto";
  return new AppError(
    "unsupported_content_type",
    `Content-Type ${JSON.stringify(mediaType.slice(0, 64))} is not supported on /loki/api/v1/push; use application/json or application/x-protobuf (snappy-compressed)`,
  );
}

const LOKI: Protocol = {
  name: "loki",
  token: (headers) => bearerOrBasicToken(headers.get("authorization")),
  format: lokiFormat,
  unpack: (body, format, maxBytes) => (format === "loki-proto" ? unsnappy(body, maxBytes, "Loki's protobuf is snappy-compressed") : body),
};

const NO_CONTENT = new Response(null, { status: 204, headers: CORS_ORIGIN });

export async function acceptLoki(request: Request, deps: IngestDeps): Promise<Response> {
  const outcome = await ingest(request, deps, LOKI);
  if (!(outcome instanceof AppError)) return NO_CONTENT.clone() as Response;
  // Loki's statuses are OTLP's: 400 for a body that cannot be used (Promtail and Alloy drop it),
  // 429 and 5xx retried.
  return new Response(`${outcome.message}\n`, {
    status: otlpStatus(outcome.status),
    headers: refusalHeaders(outcome, "text/plain; charset=utf-8", CORS_ORIGIN),
  });
}
