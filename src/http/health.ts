// /health (the process answers) and /ready (the database answers too), on both listeners.
import { Elysia } from "elysia";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

export const health = (ready: () => Promise<boolean>) =>
  new Elysia({ name: "logpond/health" })
    .get("/health", () => new Response('{"status":"ok"}', { headers: JSON_HEADERS }))
    .get("/ready", async () =>
      (await ready())
        ? new Response('{"status":"ready"}', { headers: JSON_HEADERS })
        : new Response('{"status":"unavailable","errors":"Database is unreachable"}', {
            status: 503,
            headers: { ...JSON_HEADERS, "retry-after": "1" },
          }),
    );
