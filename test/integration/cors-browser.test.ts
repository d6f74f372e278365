// CORS as a browser enforces it: a headless Chromium (helpers/browser.ts), on a page of another
// origin (the management listener), sends @logtail/browser's request shape to the ingestion
// listener: a preflight (Authorization is not a simple header), then the POST with keepalive.
// The browser refuses the response unless both answers carry the right headers.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser } from "puppeteer-core";
import { launchBrowser } from "../helpers/browser";
import { startTestLogpond, type TestLogpond } from "../helpers/logpond";

let lp: TestLogpond;
let browser: Browser | undefined;
beforeAll(async () => {
  lp = await startTestLogpond();
});
afterAll(async () => {
  await browser?.close();
  await lp.stop();
});

test("a browser page on another origin sends logs the way @logtail/browser does", async () => {
  const source = await lp.createSource();
  browser = await launchBrowser();
  const page = await browser.newPage();
  await page.goto(`${lp.apiUrl}/health`); // any page of the other listener: a different origin (port)
  const result = await page.evaluate(
    async (endpoint: string, token: string) => {
      try {
        const response = await fetch(endpoint, {
          method: "POST",
          headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
          body: JSON.stringify([{ dt: new Date().toISOString(), level: "info", message: "from a browser page" }]),
          keepalive: true,
        });
        return { status: response.status };
      } catch (error) {
        return { error: String(error) };
      }
    },
    `${lp.ingestUrl}/`,
    source.token,
  );
  expect(result).toEqual({ status: 202 });
  const stored = await lp.stored(source.id);
  expect(stored.map((row) => row.raw.message)).toEqual(["from a browser page"]);
}, 30_000);
