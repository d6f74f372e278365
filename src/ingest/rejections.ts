// Why an ingestion request is refused: one table of reasons, each with its status. A rejection is
// a value that travels back to the route; messages state the limit, the value seen and the fix.
import type { ErrorCode } from "../errors";

export const REASONS = {
  missing_token: "unauthorized",
  invalid_token: "forbidden",
  body_empty: "not_acceptable",
  body_undecodable: "not_acceptable",
  not_an_event: "not_acceptable",
  too_deep: "not_acceptable",
  unsupported_value: "not_acceptable",
  body_too_large: "payload_too_large",
  decompressed_too_large: "payload_too_large",
  event_too_large: "payload_too_large",
  too_many_events: "payload_too_large",
  too_many_values: "payload_too_large",
  never_fits: "payload_too_large",
  unsupported_content_type: "unsupported_media_type",
  unsupported_encoding: "unsupported_media_type",
  rate_limited: "rate_limited",
  buffer_full: "unavailable",
  shutting_down: "unavailable",
  storage_unavailable: "unavailable",
  overloaded: "unavailable",
} as const satisfies Record<string, ErrorCode>;

export type Reason = keyof typeof REASONS;

export class Rejection {
  constructor(
    readonly reason: Reason,
    readonly message: string,
    /** 429 / 503: the Retry-After header, in seconds. */
    readonly retryAfter?: number,
  ) {}
}

export const reject = (reason: Reason, message: string, retryAfter?: number): Rejection => new Rejection(reason, message, retryAfter);

export const isRejection = (value: unknown): value is Rejection => value instanceof Rejection;
