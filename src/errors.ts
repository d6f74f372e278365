// One error type for everything a client can be told. The status comes from one table; the
// renderer in http/errors.ts turns it into the contract's `{"errors": …}` body. Messages are for
// the client: they never carry tokens, bodies or SQL.

export const STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  not_acceptable: 406,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation: 422,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof STATUS;

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: { invalidAttributes?: Record<string, string[]>; retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = "AppError";
  }

  get status(): number {
    return STATUS[this.code];
  }
}

export const notFound = () => new AppError("not_found", "Resource with the provided ID was not found");
