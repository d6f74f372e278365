// A headless Chromium for the browser tests, brought by `npm install` itself: the binary inside
// @sparticuz/chromium (unpacked to the temporary directory on first use, ~2 s), or a system one
// named by CHROMIUM_PATH. Each browser gets a profile folder of its own, removed at close.
import chromium from "@sparticuz/chromium";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";

/**
 * @sparticuz/chromium's flags, less the two that would turn off what the tests check (CORS is
 * enforced by the browser), plus the ones a closed network needs: without them Chromium tries
 * Google's hosts at every start.
 */
const OFF = new Set(["--disable-web-security", "--allow-running-insecure-content"]);
const QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

export async function launchBrowser(): Promise<Browser> {
  const system = process.env.CHROMIUM_PATH;
  const executablePath = system ?? (await chromium.executablePath());
  const profile = mkdtempSync(path.join(tmpdir(), "logpond-chromium-"));
  const args = system ? ["--no-sandbox", "--headless", "--disable-gpu", ...QUIET] : [...chromium.args.filter((arg) => !OFF.has(arg)), ...QUIET];
  const browser = await puppeteer.launch({ executablePath, headless: true, args: [...args, `--user-data-dir=${profile}`] });
  browser.once("disconnected", () => rmSync(profile, { recursive: true, force: true }));
  return browser;
}

/** A fresh browser and one page in it at the suite's desktop size (1280 × 720). */
export async function openPage(): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchBrowser();
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 720 });
  return { browser, page };
}
