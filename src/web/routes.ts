// GET / on the management listener: the log explorer page (docs/reading.md). Plain files (ES
// modules, CSS, an SVG icon) read once at start and served as they are: no build step, no
// external assets. The page holds no secret; it asks for a token (the API token, or a read token:
// the page only reads) and sends it in the Authorization header of its own fetches. One module is
// the server's own: /web/levels.js is src/query/levels.ts (the one table of level names) with its
// types stripped, so the page folds levels exactly as search and the histogram do.
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
  "/web/url.js": { file: "url.js", type: "text/javascript; charset=utf-8" },
  "/web/views.js": { file: "views.js", type: "text/javascript; charset=utf-8" },
  "/web/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
  "/web/favicon.svg": { file: "favicon.svg", type: "image/svg+xml" },
};

/** The level table as a browser module: src/query/levels.ts imports nothing, so stripping its types is all it takes. */
export async function levelsModule(): Promise<string> {
  const source = await Bun.file(path.join(import.meta.dir, "..", "query", "levels.ts")).text();
  return new Bun.Transpiler({ loader: "ts" }).transformSync(source);
}

export async function webRoutes() {
  const app = new Elysia({ name: "logpond/web" });
  const bodies: [string, string, string][] = [];
  for (const [route, { file, type }] of Object.entries(FILES)) bodies.push([route, await Bun.file(path.join(import.meta.dir, file)).text(), type]);
  bodies.push(["/web/levels.js", await levelsModule(), "text/javascript; charset=utf-8"]);
  for (const [route, body, type] of bodies) {
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
