/**
 * The console's Approvals page in Chromium: nothing is listed until the token is pasted; then a
 * gated call arrives live with its arguments, Approve makes the waiting call complete, its row
 * leaves, and Calls shows who approved.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../../src/dispatcher/types.js';
import { chromiumAvailable, launchChromium, screenshot } from './chromium.js';
import { type ConsoleStack, startConsoleStack } from './stack.js';

describe.skipIf(!chromiumAvailable())('the Approvals page, in Chromium', () => {
  let stack: ConsoleStack;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  /** A matrix_invoke of agent:beta to the weather mount, waiting for a person; its result once answered. */
  const gatedCall = (id: string, city: string): Promise<ToolResult> =>
    stack.client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'edit' },
        call: {
          id,
          name: 'matrix_invoke',
          arguments: { target: stack.weather.matrixTools?.[0]?.target, op: '$forecast', args: { city, days: 2 } },
        },
      },
      { session: 's-77', principal: 'agent:beta', timeoutMs: 30_000 },
    );

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startConsoleStack(), launchChromium()]);
    page = await browser.context.newPage();
    await page.goto(`${stack.base}approvals`);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('lists nothing until the token is pasted, then says it has no approver grant and that nothing waits', async () => {
    expect(await page.locator('#live').textContent()).toContain('Paste the token to see the pending approvals');
    await page.fill('#token', stack.token);
    await page.locator('#live :text("Nothing waits for approval")').waitFor();
    expect(await page.locator('main').textContent()).toContain('This console has no approver grant');
  });

  it('shows a pending call arriving live; Approve makes it complete and its row leave', async () => {
    const waiting = gatedCall('browser-approve', 'Bergen');
    const row = page.locator('[data-approval-id]');
    await row.waitFor({ timeout: 10_000 }); // no reload: the page hears system.approvals.events.pending
    const text = (await row.textContent()) ?? '';
    expect(text).toContain('matrix_invoke');
    expect(text).toContain('agent:beta');
    expect(text).toContain('s-77');
    expect(text).toMatch(/\d+s left/);
    expect(await row.locator('pre').textContent()).toContain('"city": "Bergen"');
    await screenshot(page, 'approvals', 700);

    // The redirect after Approve renders the page without the token; holding one, the script
    // shows the list loading, never the plea to paste a token the operator already pasted.
    await page.addInitScript(
      "document.addEventListener('DOMContentLoaded', () => { window.liveAtReady = document.getElementById('live').textContent; })",
    );
    await row.locator('button:has-text("Approve")').click();
    const result = await waiting;
    expect(result).toMatchObject({ isError: false, structured: { city: 'Bergen', days: 2 } });
    await page.waitForURL(/answered=/, { waitUntil: 'domcontentloaded' });
    const atReady = (await page.evaluate('window.liveAtReady')) as string;
    expect(atReady).toContain('Loading with your token');
    expect(atReady).not.toContain('Paste the token');
    await page.locator('#live :text("Approved")').waitFor({ timeout: 10_000 });
    expect(await page.locator('[data-approval-id]').count()).toBe(0);

    await page.goto(`${stack.base}calls`);
    await page
      .locator('tr[data-call-id="browser-approve"] .approval:has-text("approved by")')
      .waitFor({ timeout: 10_000 });
    await page.goto(`${stack.base}approvals`);
  });

  it('rejects with a reason, which the model reads', async () => {
    const waiting = gatedCall('browser-reject', 'Tromsø');
    const row = page.locator('[data-approval-id]');
    await row.waitFor({ timeout: 10_000 });
    await row.locator('input[name="reason"]').fill('not in the polar night');
    await row.locator('button:has-text("Reject")').click();
    const result = await waiting;
    expect(result.error?.code).toBe('approval_denied');
    expect(result.content).toContain('not in the polar night');
    await row.waitFor({ state: 'detached', timeout: 10_000 });
  });
});
