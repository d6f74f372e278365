// The page's modules import ./levels.js. In the browser that is src/query/levels.ts itself, served
// by web/routes.ts with its types stripped; under Bun (test/unit/web.test.ts imports the page's
// modules) ./levels.js resolves to this file, which is that module again.
export * from "../query/levels";
