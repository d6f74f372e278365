// The live-tail page in a real headless Chromium (helpers/browser.ts, driven by puppeteer-core):
// enter the token, pick a source, see rows ingested while the page watches, filter with a query,
// pause and resume without losing rows. Saves a screenshot: docs/live-tail.png (the README's) when
// LIVE_TAIL_SCREENSHOT=1, else in the temporary directory (so a test run leaves the tree clean).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { launchBrowser } from "../helpers/browser";
import { API_TOKEN, startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

// Callbacks given to page.* run in the browser, where `document` exists (tsc has no DOM lib here).
declare const document: any;

const SCREENSHOT = process.env.LIVE_TAIL_SCREENSHOT === "1" ? path.join(import.meta.dir, "..", "..", "docs", "live-tail.png") : path.join(tmpdir(), "logpond-live-tail.png");

let lp: TestLogpond;
let browser: Browser;
let page: Page;
let web: TestSource;
let worker: TestSource;

beforeAll(async () => {
  lp = await startTestLogpond();
  web = await lp.createSource({ name: "web production", live_tail_pattern: "{level} {http.method} {http.path} → {http.status} {message}" });
  worker = await lp.createSource({ name: "billing worker", live_tail_pattern: "{level} [{job}] {message}" });
  browser = await launchBrowser();
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 720 });
});

afterAll(async () => {
  await browser?.close();
  await lp?.stop();
});

const rowTexts = () => page.$$eval("#list li", (items) => items.map((item) => item.textContent ?? ""));
async function waitForRow(text: string): Promise<void> {
  await page.waitForFunction((t) => [...document.querySelectorAll("#list li")].some((li: any) => li.textContent?.includes(t)), { timeout: 20_000 }, text);
}
const clearQuery = () => page.$eval("#query", (input) => ((input as any).value = ""));
const send = (source: TestSource, events: unknown[]) => lp.ingest(source.token, JSON.stringify(events)).then((r) => expect(r.status).toBe(202));

test("token → sources → live rows → query → pause/resume", async () => {
  await page.goto(lp.apiUrl, { waitUntil: "domcontentloaded" });
  await page.type("#token", API_TOKEN);
  await page.click("#connect");
  await page.waitForSelector(`input[data-source-id="${web.id}"]`);
  expect(await page.evaluate(() => sessionStorage.getItem("logpond-token"))).toBe(API_TOKEN);

  await page.click(`input[data-source-id="${web.id}"]`);
  await page.click(`input[data-source-id="${worker.id}"]`);
  await page.waitForFunction(() => document.querySelector("#state")?.textContent === "live");

  // Ingested while the page watches.
  await send(web, [
    { level: "info", message: "GET served", http: { method: "GET", path: "/api/orders", status: 200 } },
    { level: "warn", message: "slow upstream", http: { method: "GET", path: "/api/search", status: 200 } },
    { level: "error", message: "upstream failed", http: { method: "POST", path: "/api/checkout", status: 502 } },
  ]);
  await send(worker, [{ level: "info", job: "invoice-42", message: "invoice sent" }, { level: "debug", job: "invoice-43", message: "retry scheduled" }]);
  await waitForRow("upstream failed");
  await waitForRow("invoice sent");
  const texts = await rowTexts();
  expect(texts.some((t) => t.includes("error POST /api/checkout → 502 upstream failed"))).toBe(true);
  expect(texts.some((t) => t.includes("info [invoice-42] invoice sent"))).toBe(true);
  expect(await page.$eval("#list li .level.error", (el) => el.textContent)).toBe("error");

  // A query filters the stream (and the stored page loaded above it).
  await page.type("#query", "level:error OR http.status>=500");
  await page.click("#apply");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent === "live");
  await send(web, [{ level: "info", message: "quiet row", http: { status: 200 } }, { level: "error", message: "payment declined", http: { method: "POST", path: "/api/pay", status: 500 } }]);
  await waitForRow("payment declined");
  await lp.flusher.flush();
  const filtered = await rowTexts();
  expect(filtered.some((t) => t.includes("quiet row"))).toBe(false);
  expect(filtered.some((t) => t.includes("upstream failed"))).toBe(true); // from the stored page

  // A bad query is shown inline with its position.
  await clearQuery();
  await page.type("#query", "status>=abc");
  await page.click("#apply");
  await page.waitForSelector("#query-error:not([hidden])");
  expect(await page.$eval("#query-error", (el) => el.textContent)).toContain("position 9");

  // Pause: rows sent meanwhile appear on resume (replayed from storage after the last event id).
  await clearQuery();
  await page.click("#apply");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent === "live");
  await send(web, [{ level: "info", message: "before pause", http: { method: "GET", path: "/health", status: 200 } }]);
  await waitForRow("before pause");
  await page.click("#pause");
  await send(web, [{ level: "warn", message: "while paused", http: { method: "GET", path: "/api/cart", status: 429 } }]);
  await lp.flusher.flush();
  expect((await rowTexts()).some((t) => t.includes("while paused"))).toBe(false);
  await page.click("#pause");
  await waitForRow("while paused");
  await send(worker, [{ level: "info", job: "invoice-44", message: "invoice paid" }, { level: "error", job: "invoice-45", message: "card expired" }]);
  await waitForRow("card expired");
  const ids = await page.$$eval("#list li", (items) => items.map((item) => (item as any).dataset.id));
  expect(new Set(ids).size).toBe(ids.length);

  await page.screenshot({ path: SCREENSHOT });
}, 60_000);

test("pause before any live row arrived, resume: the rows sent meanwhile appear", async () => {
  // A new query restarts the view: no row has come live yet, so the only position is the live
  // start the server sends as an id-only block (before it, Resume reconnected from "now").
  await clearQuery();
  await page.type("#query", "paused-gap");
  await page.click("#apply");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent === "live");
  await page.waitForFunction("state.lastEventId !== ''", { timeout: 20_000 });
  await page.click("#pause");
  await send(web, [{ level: "warn", message: "paused-gap row", http: { method: "GET", path: "/gap", status: 200 } }]);
  await lp.flusher.flush();
  await page.click("#pause");
  await waitForRow("paused-gap row");
}, 60_000);

test("a source with more rows than fit opens at the newest row, and live rows arrive in view", async () => {
  const many = await lp.createSource({ name: "chatty" });
  await send(many, Array.from({ length: 80 }, (_, i) => ({ level: "info", message: `chatty ${i}` })));
  await lp.flusher.flush();
  await clearQuery();
  await page.click("#apply");
  for (const id of [web.id, worker.id]) await page.click(`input[data-source-id="${id}"]`); // untick
  await page.reload({ waitUntil: "domcontentloaded" });
  await page.waitForSelector(`input[data-source-id="${many.id}"]`);
  await page.click(`input[data-source-id="${many.id}"]`);
  await waitForRow("chatty 79");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent === "live");
  const inView = (text: string) =>
    page.evaluate((t) => {
      const box = document.getElementById("rows")!.getBoundingClientRect();
      const li = [...document.querySelectorAll("#list li")].find((item) => item.textContent?.includes(t));
      const r = li?.getBoundingClientRect();
      return !!r && r.top >= box.top && r.bottom <= box.bottom;
    }, text);
  expect(await inView("chatty 79")).toBe(true);
  await send(many, [{ level: "info", message: "chatty live" }]);
  await waitForRow("chatty live");
  expect(await inView("chatty live")).toBe(true);
}, 60_000);
