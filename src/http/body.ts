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

/** Parses a management request body: any Content-Type, JSON object or 400; a NUL in its text is a 422 naming the attribute. */
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
  // PostgreSQL refuses a NUL in text: a name or a pattern holding one would otherwise be a 500.
  for (const [key, attribute] of Object.entries(value)) {
    if (holdsNul(key) || holdsNul(attribute)) {
      throw new AppError("validation", "Validation errors", { invalidAttributes: { [key]: ["must not contain a NUL character (\\u0000)"] } });
    }
  }
  return value as Record<string, unknown>;
}

/** Whether a string, or any key or string inside an object or array, holds a NUL (walked without recursion: bodies may nest deep). */
function holdsNul(value: unknown): boolean {
  const pending = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === "string") {
      if (next.includes("\u0000")) return true;
    } else if (typeof next === "object" && next !== null) {
      for (const [key, inner] of Object.entries(next)) {
        if (key.includes("\u0000")) return true;
        pending.push(inner);
      }
    }
  }
  return false;
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
