// Renders every error the same way: AppError → its status and `{"errors": …}`; Elysia's own
// errors (unknown route, unparsable input) → 404/400; anything else → a generic 500 whose
// stack goes to the log, never to the client.
import { Elysia } from "elysia";
import { AppError } from "../errors";

const JSON_TYPE = { "content-type": "application/json; charset=utf-8" };

export function errorResponse(error: AppError): Response {
  const headers: Record<string, string> = { ...JSON_TYPE };
  if (error.code === "unauthorized") headers["www-authenticate"] = "Bearer";
  if (error.extra.retryAfterSeconds !== undefined) headers["retry-after"] = String(error.extra.retryAfterSeconds);
  const body: Record<string, unknown> = { errors: error.message };
  if (error.extra.invalidAttributes) body.invalid_attributes = error.extra.invalidAttributes;
  return new Response(JSON.stringify(body), { status: error.status, headers });
}

export const errorHandler = (log: (line: string) => void) =>
  new Elysia({ name: "logpond/errors" }).onError({ as: "global" }, ({ code, error }) => {
    if (error instanceof AppError) return errorResponse(error);
    if (code === "NOT_FOUND") return errorResponse(new AppError("not_found", "Not found"));
    if (code === "PARSE") return errorResponse(new AppError("bad_request", "Request body is not valid JSON"));
    log(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return errorResponse(new AppError("internal", "Internal server error"));
  });
