// A link to a view, opened as whoever receives it would: in a fresh browser (a new profile: no
// token in sessionStorage), the token typed after the page has read the link — first a wrong one.
// The view the link names (sources, query, range, the opened event with its context) must be the
// one shown once connected, in a real headless Chromium (helpers/browser.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser, Page } from "puppeteer-core";
import { openPage } from "../helpers/browser";
import { API_TOKEN, startTestLogpond, type TestLogpond, type TestSource } from "../helpers/logpond";

declare const document: any;
declare const location: any;

let lp: TestLogpond;
let browser: Browser;
let page: Page;
let shop: TestSource;
let other: TestSource;
const NOW = Date.now();

beforeAll(async () => {
  lp = await startTestLogpond();
  shop = await lp.createSource({ name: "shop" });
  other = await lp.createSource({ name: "other" });
  // 40 events over the last 40 minutes, every fourth an error.
  const events = Array.from({ length: 40 }, (_, n) => ({
    dt: new Date(NOW - (40 - n) * 60_000).toISOString(),
    n,
    level: n % 4 === 0 ? "error" : "info",
    message: `order ${n}`,
  }));
  expect((await lp.ingest(shop.token, JSON.stringify(events))).status).toBe(202);
  expect((await lp.ingest(other.token, JSON.stringify([{ level: "error", message: "elsewhere" }]))).status).toBe(202);
  await lp.flusher.flush();
  // A browser of its own (a profile folder of its own): nothing in its storage.
  ({ browser, page } = await openPage());
});

afterAll(async () => {
  await browser?.close();
  await lp?.stop();
});

test("a shared link opened in a fresh browser: after a wrong token, then the right one, the link's view and event are shown", async () => {
  const response = await lp.api("GET", `/api/v2/query/live-tail?source_ids=${shop.id}&query=n%3D20&from=now-24h`);
  const [event] = ((await response.json()) as any).data;
  expect(event).toMatchObject({ n: 20, level: "error" });
  const search = new URLSearchParams({ sources: shop.id, q: "level:error", range: "24h", event: `${shop.id}:${event.id}@${event.dt}` });
  const link = `${lp.apiUrl}/?${search}`;

  await page.goto(link, { waitUntil: "domcontentloaded" });
  expect(await page.$eval("#state", (el) => el.textContent)).toBe("not connected");
  expect(await page.$eval("#query", (el) => el.value)).toBe("level:error");
  expect(await page.evaluate(() => location.search)).toBe(`?${search}`);

  await page.type("#token", "not-the-token-0123456789");
  await page.click("#connect");
  await page.waitForFunction(() => document.querySelector("#state")?.textContent === "token not accepted", { timeout: 20_000 });
  expect(await page.evaluate(() => location.search)).toBe(`?${search}`);

  await page.$eval("#token", (input) => (input.value = ""));
  await page.type("#token", API_TOKEN);
  await page.click("#connect");
  await page.waitForSelector("#context[open] #context-list li.anchor", { timeout: 20_000 });
  expect(await page.$eval("#context-list li.anchor", (el) => el.dataset.id)).toBe(event.id);
  // Its neighbours are every event of its source around it, whatever the query: 20 before, 19 after.
  expect(await page.$$eval("#context-list li[data-id]", (items) => items.length)).toBe(40);
  expect(await page.$eval(`input[data-source-id="${shop.id}"]`, (el) => el.checked)).toBe(true);
  expect(await page.$eval(`input[data-source-id="${other.id}"]`, (el) => el.checked)).toBe(false);
  expect(await page.$eval('#ranges button[aria-checked="true"]', (el) => el.dataset.range)).toBe("24h");

  await page.click("#context-close");
  await page.waitForFunction(() => !new URLSearchParams(location.search).has("event"), { timeout: 20_000 });
  // Behind it, the list is the link's search: the shop's errors of the last 24 hours.
  await page.waitForFunction(() => document.querySelectorAll("#list li[data-id]").length === 10, { timeout: 20_000 });
  const shown = await page.$$eval("#list li[data-id]", (items) => items.map((item) => item.textContent));
  expect(shown.every((text) => text.includes("error"))).toBe(true);
  expect(Object.fromEntries(new URLSearchParams(await page.evaluate(() => location.search)))).toEqual({
    sources: shop.id,
    q: "level:error",
    range: "24h",
  });
}, 90_000);
