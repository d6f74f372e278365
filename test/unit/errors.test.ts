// The one renderer of errors (errors.ts), as both listeners use it: status from the reason, the
// contract's `{"errors": …}` body, WWW-Authenticate on a 401, Retry-After where the reason (or the
// error) says when to come back, and the listener's own headers.
import { expect, test } from "bun:test";
import { AppError, errorResponse, REASONS, type Reason } from "../../src/errors";

const CORS = { "access-control-allow-origin": "*" };

test.each([
  ["unauthorized", undefined, { "content-type": "application/json; charset=utf-8", "www-authenticate": "Bearer" }],
  ["missing_token", CORS, { "content-type": "application/json; charset=utf-8", ...CORS, "www-authenticate": "Bearer" }],
  ["invalid_token", CORS, { "content-type": "application/json; charset=utf-8", ...CORS }],
  ["buffer_full", CORS, { "content-type": "application/json; charset=utf-8", ...CORS, "retry-after": "1" }],
  ["query_timeout", undefined, { "content-type": "application/json; charset=utf-8" }],
  ["not_found", undefined, { "content-type": "application/json; charset=utf-8" }],
] as [Reason, Record<string, string> | undefined, Record<string, string>][])("%s: its status, body and headers", async (reason, own, headers) => {
  const response = errorResponse(new AppError(reason, "no"), own);
  expect(response.status).toBe(REASONS[reason].status);
  expect(Object.fromEntries(response.headers)).toEqual(headers);
  expect(await response.text()).toBe('{"errors":"no"}');
});

test("an error's own Retry-After wins over its reason's", () => {
  const response = errorResponse(new AppError("rate_limited", "slow down", { retryAfterSeconds: 50 }));
  expect(response.status).toBe(429);
  expect(response.headers.get("retry-after")).toBe("50");
});

test("a 422 carries invalid_attributes after errors", async () => {
  const response = errorResponse(new AppError("validation", "Validation errors", { invalidAttributes: { name: ["can't be blank"] } }));
  expect(response.status).toBe(422);
  expect(await response.text()).toBe('{"errors":"Validation errors","invalid_attributes":{"name":["can\'t be blank"]}}');
});

test("an AppError is an Error when thrown, without a stack of its own", () => {
  const error = new AppError("bad_request", "nope");
  expect(error).toBeInstanceOf(Error);
  expect(String(error)).toBe("AppError: nope");
  expect(error.status).toBe(400);
});
