// The one renderer of errors (errors.ts), as both listeners use it: status from the reason, the
// contract's `{"errors": …}` body, WWW-Authenticate on a 401, Retry-After where the reason (or the
// error) says when to come back, and the listener's own headers.
import { expect, test } from "bun:test";
import { Elysia } from "elysia";
import { AppError, describeError, errorResponse, REASONS, type Reason } from "../../src/errors";
import { errorHandler } from "../../src/http/errors";

const CORS = { "access-control-allow-origin": "*" };

test.each([
  ["unauthorized", undefined, { "content-type": "application/json; charset=utf-8", "www-authenticate": "Bearer" }],
  ["missing_token", CORS, { "content-type": "application/json; charset=utf-8", ...CORS, "www-authenticate": "Bearer" }],
  ["invalid_token", CORS, { "content-type": "application/json; charset=utf-8", ...CORS }],
  ["buffer_full", CORS, { "content-type": "application/json; charset=utf-8", ...CORS, "retry-after": "1" }],
  ["query_timeout", undefined, { "content-type": "application/json; charset=utf-8" }],
  ["not_found", undefined, { "content-type": "application/json; charset=utf-8" }],
  ["body_timeout", CORS, { "content-type": "application/json; charset=utf-8", ...CORS, connection: "close" }],
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

/** An error as Bun makes it for a body read cut by a closed connection: an AbortError whose stack is "". */
function closedConnection(): Error {
  const error = Object.assign(new Error("The connection was closed."), { name: "AbortError", code: 20 });
  error.stack = "";
  return error;
}

test.each([
  ["an Error", () => new Error("disk on fire"), /^Error: disk on fire\n\s+at /],
  ["an error with an empty stack (Bun's closed connection)", closedConnection, /^AbortError \[20\]: The connection was closed\. \(no stack\)$/],
  ["an error with a code and no message", () => Object.assign(new Error(""), { code: "57014" }), /^Error \[57014\]: \(no message\)\n\s+at /],
  ["an AppError (no stack of its own)", () => new AppError("internal", "broken"), /^AppError: broken \(no stack\)$/],
  ["a thrown string", () => "just text", /^a non-error was thrown: "just text"$/],
  ["a thrown object", () => ({ why: 1 }), /^a non-error was thrown: \{\n?\s*why: 1/],
  ["an error with a cause", () => new Error("outer", { cause: new Error("inner") }), /^Error: outer\n[\s\S]*\ncaused by: Error: inner\n\s+at /],
] as [string, () => unknown, RegExp][])("describeError: %s is described, never as an empty text", (_name, make, shape) => {
  expect(describeError(make())).toMatch(shape);
});

test("an internal error's log line names the request and carries the error's message and stack", async () => {
  const logs: string[] = [];
  const app = new Elysia()
    .use(errorHandler((line) => logs.push(line)))
    .get("/empty-stack", () => {
      throw closedConnection();
    })
    .get("/plain", () => {
      throw new Error("plain failure");
    });
  const empty = await app.handle(new Request("http://localhost/empty-stack?query=secret"));
  expect(empty.status).toBe(500);
  expect(await empty.text()).toBe('{"errors":"Internal server error"}');
  expect((await app.handle(new Request("http://localhost/plain"))).status).toBe(500);
  expect(logs).toHaveLength(2);
  expect(logs[0]).toBe("internal error (GET /empty-stack): AbortError [20]: The connection was closed. (no stack)");
  expect(logs[1]).toMatch(/^internal error \(GET \/plain\): Error: plain failure\n\s+at /);
});
