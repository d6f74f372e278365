// GET / on the management listener: the log explorer page (CONTRACT §8, §9). Plain files (ES
// modules, CSS, an SVG icon) read once at start and served as they are: no build step, no
// external assets. The page holds no secret; it asks for a token (the API token, or a read token:
// the page only reads) and sends it in the Authorization header of its own fetches.
import { Elysia } from "elysia";
import * as path from "node:path";

const FILES: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/web/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/web/context.js": { file: "context.js", type: "text/javascript; charset=utf-8" },
  "/web/fields.js": { file: "fields.js", type: "text/javascript; charset=utf-8" },
  "/web/histogram.js": { file: "histogram.js", type: "text/javascript; charset=utf-8" },
  "/web/list.js": { file: "list.js", type: "text/javascript; charset=utf-8" },
  "/web/rows.js": { file: "rows.js", type: "text/javascript; charset=utf-8" },
  "/web/state.js": { file: "state.js", type: "text/javascript; charset=utf-8" },
  "/web/stream.js": { file: "stream.js", type: "text/javascript; charset=utf-8" },
  "/web/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
  "/web/favicon.svg": { file: "favicon.svg", type: "image/svg+xml" },
};

export async function webRoutes() {
  const app = new Elysia({ name: "logpond/web" });
  for (const [route, { file, type }] of Object.entries(FILES)) {
    const body = await Bun.file(path.join(import.meta.dir, file)).text();
    app.get(
      route,
      () =>
        new Response(body, {
          headers: {
            "content-type": type,
            "cache-control": "no-cache",
            "content-security-policy": "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:",
            "x-content-type-options": "nosniff",
          },
        }),
    );
  }
  return app;
}
