// One error type for every way logpond says no, on both listeners, and its one renderer: a reason
// from one table (its status; for a refusal worth sending again as it is, a Retry-After), a message
// for the client, and the contract's `{"errors": …}` body. Management and query throw it (to
// http/errors.ts); ingestion returns it as a value, bad input being no exception there. Messages
// are for the client: they never carry tokens, bodies or SQL.

interface Rule {
  readonly status: number;
  /** Retry-After, in seconds, unless the error names its own: the same request may succeed later. */
  readonly retryAfter?: number;
}

/**
 * Reason → how it is answered. Ingestion's reasons are also the `reason` label values of
 * logpond_ingest_requests_rejected_total: renaming one renames a metric series.
 */
const RULES = {
  // management and query
  bad_request: { status: 400 },
  unauthorized: { status: 401 },
  /** A valid token whose scope does not cover the request (a read token on a management write). */
  forbidden: { status: 403 },
  not_found: { status: 404 },
  validation: { status: 422 },
  internal: { status: 500 },
  /** No Retry-After: the same query would take as long again; the message says to narrow it. */
  query_timeout: { status: 503 },
  // ingestion
  /** The client closed the connection before its body was whole: counted, answered to no one. */
  body_incomplete: { status: 400 },
  missing_token: { status: 401 },
  invalid_token: { status: 403 },
  body_empty: { status: 406 },
  body_undecodable: { status: 406 },
  not_an_event: { status: 406 },
  too_deep: { status: 406 },
  unsupported_value: { status: 406 },
  /** A body not whole within INGEST_BODY_TIMEOUT_MS; the connection is closed after the answer. */
  body_timeout: { status: 408 },
  body_too_large: { status: 413 },
  decompressed_too_large: { status: 413 },
  event_too_large: { status: 413 },
  too_many_events: { status: 413 },
  too_many_values: { status: 413 },
  never_fits: { status: 413 },
  unsupported_content_type: { status: 415 },
  unsupported_encoding: { status: 415 },
  rate_limited: { status: 429, retryAfter: 1 },
  buffer_full: { status: 503, retryAfter: 1 },
  shutting_down: { status: 503, retryAfter: 1 },
  storage_unavailable: { status: 503, retryAfter: 1 },
  overloaded: { status: 503, retryAfter: 1 },
} as const satisfies Record<string, Rule>;

export type Reason = keyof typeof RULES;
export const REASONS: Readonly<Record<Reason, Rule>> = RULES;

export interface ErrorExtra {
  /** 422: `invalid_attributes`, attribute → problems. */
  readonly invalidAttributes?: Record<string, string[]>;
  /** Overrides the reason's Retry-After (seconds). */
  readonly retryAfterSeconds?: number;
}

const NO_EXTRA: ErrorExtra = Object.freeze({});

/**
 * Not `extends Error`: an Error records a stack trace when it is made (0.6–1.3 µs ten frames deep,
 * this class 0.05 µs; Bun 1.4.5), and ingestion makes one per refused request, where no one reads
 * it. Its prototype is Error's all the same, so a thrown one is still `instanceof Error`.
 */
export class AppError {
  declare readonly name: string;
  declare readonly stack?: string;

  constructor(
    readonly reason: Reason,
    readonly message: string,
    readonly extra: ErrorExtra = NO_EXTRA,
  ) {}

  get status(): number {
    return REASONS[this.reason].status;
  }
}
Object.setPrototypeOf(AppError.prototype, Error.prototype);
Object.defineProperty(AppError.prototype, "name", { value: "AppError" });

export const notFound = () => new AppError("not_found", "Resource with the provided ID was not found");

const JSON_TYPE = "application/json; charset=utf-8";

/**
 * The answer to an AppError, on every listener: its status, `{"errors": message}` (with
 * `invalid_attributes` on a 422), JSON, `WWW-Authenticate: Bearer` on a 401, Retry-After where
 * its reason has one. `headers`: the listener's own (ingestion's CORS Allow-Origin).
 */
export function errorResponse(error: AppError, headers?: Readonly<Record<string, string>>): Response {
  const { invalidAttributes } = error.extra;
  const body = invalidAttributes ? { errors: error.message, invalid_attributes: invalidAttributes } : { errors: error.message };
  return new Response(JSON.stringify(body), { status: error.status, headers: refusalHeaders(error, JSON_TYPE, headers) });
}

/**
 * The headers of a refusal, whatever its body (other protocols write their own: OTLP's Status, Loki's
 * text): its content type, the listener's own, `WWW-Authenticate: Bearer` on a 401, Retry-After where
 * its reason has one.
 */
export function refusalHeaders(error: AppError, contentType: string, headers?: Readonly<Record<string, string>>): Record<string, string> {
  const { status, retryAfter } = REASONS[error.reason];
  const all: Record<string, string> = { "content-type": contentType, ...headers };
  if (status === 401) all["www-authenticate"] = "Bearer";
  // The rest of a late body may still arrive: the connection cannot carry another request.
  if (status === 408) all.connection = "close";
  const wait = error.extra.retryAfterSeconds ?? retryAfter;
  if (wait !== undefined) all["retry-after"] = String(wait);
  return all;
}

/**
 * An error as a log line shows it, never empty: name, code (PostgreSQL's SQLSTATE, a system error's)
 * and message, then the stack's frames, then its cause. Bun gives some errors an empty stack (a body
 * read cut by a closed connection: an AbortError whose stack is ""), so the message is never taken
 * from the stack alone.
 */
export function describeError(error: unknown, depth = 0): string {
  if (!(error instanceof Error)) return `a non-error was thrown: ${Bun.inspect(error)}`;
  const { code } = error as { code?: unknown };
  const head = `${error.name || "Error"}${typeof code === "string" || typeof code === "number" ? ` [${code}]` : ""}: ${error.message || "(no message)"}`;
  const frames = (typeof error.stack === "string" ? error.stack : "").split("\n").filter((line) => /^\s+at /.test(line));
  const cause = error.cause !== undefined && depth < 3 ? `\ncaused by: ${describeError(error.cause, depth + 1)}` : "";
  return `${head}${frames.length > 0 ? `\n${frames.join("\n")}` : " (no stack)"}${cause}`;
}
