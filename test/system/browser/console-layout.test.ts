/**
 * Every console page at a desktop's width (1,440 px) and a phone's (390 px), in Chromium, with
 * rows in its tables: no element reaches past the viewport, nothing is cut off at 1,440 px (no
 * table or block scrolls sideways), and on a phone only a wide table may scroll within its own
 * frame — never the Approvals page, where people answer from their phones.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newTraceparent } from '../../../src/bus/headers.js';
import type { ToolResult } from '../../../src/dispatcher/types.js';
import { chromiumAvailable, launchChromium, MEASURE, type Measured } from './chromium.js';
import { type ConsoleStack, startConsoleStack } from './stack.js';

describe.skipIf(!chromiumAvailable())('the console’s layout at 1,440 and 390 px, in Chromium', () => {
  let stack: ConsoleStack;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  let waiting: Promise<ToolResult>;
  const pages = [
    'contexts',
    'contexts/console-weather',
    'resolve?profile=default&refs=console-weather',
    'resolve?profile=default&refs=console-weather&b.profile=edit',
    'calls',
    'approvals',
    'mounts',
    'mcp',
    'try?profile=default&refs=console-weather&tool=forecast',
  ];

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startConsoleStack(), launchChromium()]);
    const target = stack.weather.matrixTools?.[0]?.target;
    // A call with a trace for Calls, and one waiting for a person for Approvals.
    await stack.client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'default', toolContextRefs: ['console-weather'] },
        call: { id: 'layout-call', name: 'forecast', arguments: { city: 'Trondheim', days: 3 } },
      },
      { traceparent: newTraceparent(), session: 'session-with-a-long-name-0001', principal: 'agent:layout' },
    );
    waiting = stack.client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'edit' },
        call: {
          id: 'layout-approval',
          name: 'matrix_invoke',
          arguments: { target, op: '$forecast', args: { city: 'Kristiansund', days: 7, units: 'metric' } },
        },
      },
      { session: 's-layout', principal: 'agent:layout', timeoutMs: 120_000 },
    );
    page = await browser.context.newPage();
    await page.goto(`${stack.base}approvals`);
    await page.fill('#token', stack.token);
    await page.locator('[data-approval-id]').waitFor({ timeout: 10_000 });
  }, 60_000);
  afterAll(async () => {
    await page?.goto(`${stack.base}approvals`);
    const row = page?.locator('[data-approval-id]');
    if (row && (await row.count()) > 0) {
      await row.locator('input[name="reason"]').fill('layout checked');
      await row.locator('button:has-text("Reject")').click();
      await waiting.catch(() => undefined);
    }
    await browser?.close();
    await stack?.stop();
  });

  async function measure(path: string): Promise<Measured> {
    await page.goto(`${stack.base}${path}`);
    if (path === 'approvals') await page.locator('[data-approval-id]').waitFor({ timeout: 10_000 });
    return (await page.evaluate(MEASURE)) as Measured;
  }

  /** Every page at this width, each as what reaches past the edge and what scrolls sideways but may not. */
  async function measureAll(width: number, height: number, mayScroll: (frame: string) => boolean) {
    await page.setViewportSize({ width, height });
    const found: Record<string, Measured> = {};
    for (const path of pages) found[path] = await measure(path);
    return Object.entries(found).map(([path, m]) => ({
      path,
      past: m.past,
      sideways: m.sideways.filter((frame) => !mayScroll(frame)),
      page: m.page - m.width,
    }));
  }

  it('cuts nothing off at 1,440 px: no element past the edge, no table scrolling sideways', async () => {
    const found = await measureAll(1440, 900, () => false);
    expect(found).toEqual(pages.map((path) => ({ path, past: [], sideways: [], page: 0 })));
  });

  it('fits a 390 px phone: nothing past the edge, the navigation wrapped, Approvals without sideways scrolling', async () => {
    // A wide table may scroll within its own frame (Approvals has none); nothing else may.
    const found = await measureAll(390, 844, (frame) => frame.startsWith('div.table-wrap '));
    expect(found).toEqual(pages.map((path) => ({ path, past: [], sideways: [], page: 0 })));
    // Every navigation link is on screen, and the answer's buttons are large enough for a thumb.
    await measure('approvals');
    for (const link of await page.locator('header.top nav a').all()) {
      const box = await link.boundingBox();
      expect(box && box.x >= 0 && box.x + box.width <= 390).toBe(true);
    }
    const reject = await page.locator('[data-approval-id] button:has-text("Reject")').boundingBox();
    expect(reject?.height).toBeGreaterThanOrEqual(36);
  });
});
