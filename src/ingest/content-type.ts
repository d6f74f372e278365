// Content-Type → the codec's body format (docs/api.md, "Body formats"): parameters ignored, case-insensitive;
// anything else is a 415 naming the supported types. A missing one (pino-http-send's NDJSON mode)
// is told from the body's first byte when that is unambiguous.
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

/** The body's format; undefined when the header is missing or blank: sniffFormat() tells it from the body. */
export function parseContentType(header: string | null): Format | AppError | undefined {
  if (header === null) return undefined;
  const exact = FORMATS.get(header);
  if (exact !== undefined) return exact;
  const mediaType = header.split(";", 1)[0]!.trim().toLowerCase();
  const format = FORMATS.get(mediaType);
  if (format !== undefined) return format;
  if (mediaType === "") return undefined;
  return new AppError("unsupported_content_type", `Content-Type ${JSON.stringify(mediaType.slice(0, 64))} is not supported; use one of: ${supported()}`);
}

/**
 * A body with no Content-Type, by its first byte: a MessagePack map or array header (never the
 * first byte of JSON text), or `{` / `[` after blanks (JSON; NDJSON and values back to back decode
 * as JSON too). Anything else cannot be told apart: 415.
 */
export function sniffFormat(body: Uint8Array): Format | AppError {
  const first = body[0] ?? 0;
  if ((first >= 0x80 && first <= 0x9f) || (first >= 0xdc && first <= 0xdf)) return "msgpack";
  let at = first === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0; // a UTF-8 byte order mark
  while (body[at] === 0x20 || body[at] === 0x0a || body[at] === 0x0d || body[at] === 0x09) at++;
  if (body[at] === 0x7b || body[at] === 0x5b) return "json";
  return new AppError(
    "unsupported_content_type",
    `Content-Type is missing and the body is neither JSON (an object or array) nor MessagePack (a map or array); send Content-Type: one of ${supported()}`,
  );
}

function supported(): string {
  return Object.keys(CONTENT_TYPES).join(", ");
}
