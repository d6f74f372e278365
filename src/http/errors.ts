// The Elysia side of errors.ts, on both listeners: an AppError is rendered as it is; Elysia's own
// errors (unknown route, unparsable input) become 404/400; PostgreSQL unreachable, restarting or out
// of resources (store/unavailable.ts) a 503 with Retry-After; anything else a generic 500 whose
// stack goes to the log, never to the client.
import { Elysia } from "elysia";
import { AppError, describeError, errorResponse } from "../errors";
import { isStorageUnavailable } from "../store/unavailable";

export const errorHandler = (log: (line: string) => void) =>
  new Elysia({ name: "logpond/errors" }).onError({ as: "global" }, ({ code, error, request }) => {
    if (error instanceof AppError) return errorResponse(error);
    if (code === "NOT_FOUND") return errorResponse(new AppError("not_found", "Not found"));
    if (code === "PARSE") return errorResponse(new AppError("bad_request", "Request body is not valid JSON"));
    // The path, not the query string: a search's text is the user's.
    const where = `${request.method} ${new URL(request.url).pathname}`;
    if (isStorageUnavailable(error)) {
      log(`storage unavailable (${where}): ${describeError(error)}`);
      return errorResponse(new AppError("storage_unavailable", "The database is unavailable; retry later"));
    }
    log(`internal error (${where}): ${describeError(error)}`);
    return errorResponse(new AppError("internal", "Internal server error"));
  });
