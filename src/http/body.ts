// A management request's body: read whole up to MANAGEMENT_MAX_BODY_BYTES (a source or a token is
// a few hundred bytes), then parsed as one JSON object. Bun's own cap on the listener would answer
// a bare 413 with an empty body before any handler runs; this one answers the `{"errors": …}` body
// of src/errors.ts, whether the client declares a Content-Length or streams chunks.
import { AppError } from "../errors";

export const MANAGEMENT_MAX_BODY_BYTES = 1024 * 1024;

/** The body as a JSON object; 413 past the cap, 400 when it is not JSON or not an object. */
export async function readJsonObject(request: Request): Promise<Record<string, unknown>> {
  return parseJsonObject(await readCapped(request));
}

/** Parses a management request body: any Content-Type, JSON object or 400. */
export function parseJsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AppError("bad_request", "Request body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new AppError("bad_request", "Request body must be a JSON object");
  }
  return value as Record<string, unknown>;
}

async function readCapped(request: Request): Promise<string> {
  const tooLarge = () => new AppError("body_too_large", `Request body is larger than the management API's limit of ${MANAGEMENT_MAX_BODY_BYTES} bytes`);
  const declared = Number(request.headers.get("content-length") ?? 0);
  if (declared > MANAGEMENT_MAX_BODY_BYTES) throw tooLarge();
  if (request.body === null) return "";
  const parts: Uint8Array[] = [];
  let bytes = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > MANAGEMENT_MAX_BODY_BYTES) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    parts.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(parts));
}
