// /health (the process answers) and /ready (the database answers and storage takes writes), on both listeners.
import { Elysia } from "elysia";

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

/** `unready`: why logpond cannot take events now (the database down, flushes failing), or undefined. */
export const health = (unready: () => Promise<string | undefined>) =>
  new Elysia({ name: "logpond/health" })
    .get("/health", () => new Response('{"status":"ok"}', { headers: JSON_HEADERS }))
    .get("/ready", async () => {
      const reason = await unready();
      return reason === undefined
        ? new Response('{"status":"ready"}', { headers: JSON_HEADERS })
        : new Response(JSON.stringify({ status: "unavailable", errors: reason }), {
            status: 503,
            headers: { ...JSON_HEADERS, "retry-after": "1" },
          });
    });
