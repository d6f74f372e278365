// Content-Type → the codec's body format (CONTRACT §3): parameters ignored, case-insensitive;
// anything else is a 415 naming the supported types.
import type { Format } from "../codec/format";
import { AppError } from "../errors";

export const CONTENT_TYPES: Record<string, Format> = {
  "application/json": "json",
  "application/x-ndjson": "ndjson",
  "application/ndjson": "ndjson",
  "application/jsonl": "ndjson",
  "application/msgpack": "msgpack",
  "application/x-msgpack": "msgpack",
};

/**
 * A Map, not CONTENT_TYPES itself: an object lookup found "constructor" and "__proto__" (a 500
 * instead of 415). The usual header is exactly a key: one lookup, no strings made per request.
 */
const FORMATS = new Map(Object.entries(CONTENT_TYPES));

export function parseContentType(header: string | null): Format | AppError {
  const exact = header === null ? undefined : FORMATS.get(header);
  if (exact !== undefined) return exact;
  const mediaType = (header ?? "").split(";", 1)[0]!.trim().toLowerCase();
  const format = FORMATS.get(mediaType);
  if (format !== undefined) return format;
  return new AppError(
    "unsupported_content_type",
    `Content-Type ${header ? JSON.stringify(mediaType.slice(0, 64)) : "is missing and"} is not supported; use one of: ${Object.keys(CONTENT_TYPES).join(", ")}`,
  );
}

