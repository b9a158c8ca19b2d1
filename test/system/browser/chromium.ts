/** A real headless Chromium for the console's tests: Debian's `chromium`, driven by playwright-core. */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/** Where Chromium is: `CHROMIUM_PATH`, else Debian's. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Whether the browser tests can run here; when not, says why once on stderr. */
export function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM_PATH)) return true;
  process.stderr.write(
    `browser tests SKIPPED: no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set CHROMIUM_PATH)\n`,
  );
  return false;
}

/** A fresh browser with its own profile directory; `close()` removes both. */
export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'console-chromium-'));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS
  ? fileURLToPath(new URL('../../../docs/console/', import.meta.url))
  : undefined;

/** Saves the top `height` px of the page as docs/console/<name>.png when `CONSOLE_SCREENSHOTS` is set (docs/console.md shows them). */
export async function screenshot(page: Page, name: string, height = 1000): Promise<void> {
  if (SCREENSHOTS === undefined) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  const full = (await page.evaluate('document.documentElement.scrollHeight')) as number;
  await page.screenshot({
    path: `${SCREENSHOTS}${name}.png`,
    fullPage: true,
    clip: { x: 0, y: 0, width: 1360, height: Math.min(height, full) },
  });
}

/**
 * What reaches past the viewport (outside any frame that scrolls or clips), and which frames
 * scroll sideways, each named by tag, classes and the start of its text. A string: the test's
 * tsconfig has no DOM types.
 */
export const MEASURE = `(() => {
  const width = document.documentElement.clientWidth;
  const name = (el) => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().replace(/\\s+/g, '.') : '') + ' "' + (el.textContent || '').trim().slice(0, 40) + '"';
  const scrolls = (el) => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX);
  const framed = (el) => { for (let p = el.parentElement; p; p = p.parentElement) if (scrolls(p)) return true; return false; };
  const past = [];
  const sideways = [];
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if ((box.width === 0 && box.height === 0) || !el.checkVisibility()) continue;
    if (box.right > width + 1 && !framed(el)) past.push(name(el) + ' to ' + Math.round(box.right) + ' px');
    if (scrolls(el) && el.scrollWidth > el.clientWidth + 1) sideways.push(name(el) + ' ' + el.scrollWidth + ' in ' + el.clientWidth + ' px');
  }
  return { width, page: document.documentElement.scrollWidth, past, sideways };
})()`;

/** What MEASURE finds: the viewport's width, the page's, what reaches past it, what scrolls sideways. */
export interface Measured {
  width: number;
  page: number;
  past: string[];
  sideways: string[];
}
