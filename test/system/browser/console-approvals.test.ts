/**
 * The console's Approvals page in Chromium: nothing is listed until the token is pasted; then a
 * gated call arrives live with its arguments, Approve makes the waiting call complete, its row
 * leaves, and Calls shows who approved.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApprovalEvent, PENDING_EVENTS } from '../../../src/approvals/types.js';
import { subscribeEvents } from '../../../src/bus/events.js';
import type { ToolResult } from '../../../src/dispatcher/types.js';
import { invokeThroughDispatcher } from '../../harness/approvals.js';
import { chromiumAvailable, launchChromium, screenshot } from './chromium.js';
import { type ConsoleStack, startConsoleStack } from './stack.js';

describe.skipIf(!chromiumAvailable())('the Approvals page, in Chromium', () => {
  let stack: ConsoleStack;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  /** A matrix_invoke of agent:beta to the weather mount, waiting for a person; its result once answered. */
  const gatedCall = (id: string, city: string): Promise<ToolResult> =>
    invokeThroughDispatcher(
      stack.client,
      {
        id,
        profile: 'edit',
        target: stack.weather.matrixTools?.[0]?.target,
        op: '$forecast',
        args: { city, days: 2 },
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

  it('lists nothing until the token is pasted, then that nothing waits, asking no grant in development', async () => {
    expect(await page.locator('#live').textContent()).toContain('Paste the token to see the pending approvals');
    await page.fill('#token', stack.token);
    await page.locator('#live :text("Nothing waits for approval")').waitFor();
    // The service trusts no issuers: anyone may answer, and the page asks for no grant.
    expect(await page.locator('main').textContent()).not.toContain('has no approver grant');
  });

  it('says in the approval’s card why a Reject without a reason was refused, through the page’s refreshes', async () => {
    await page.goto(`${stack.base}approvals`);
    const first = gatedCall('browser-no-reason', 'Alta');
    const rows = page.locator('[data-approval-id]');
    await rows.first().waitFor({ timeout: 10_000 });
    await rows.first().locator('button:has-text("Reject")').click();
    const refusal = rows.first().locator('[data-failed] .notice.error');
    await refusal.waitFor({ timeout: 10_000 });
    expect(await refusal.textContent()).toContain('a reject needs a reason');
    // The address is the list's, not the write's: a refresh or a reload reads the list.
    expect(new URL(page.url()).pathname).toBe('/approvals');

    // Another approval arrives: the page refreshes, and the refusal stays in its card.
    const second = gatedCall('browser-no-reason-b', 'Vadsø');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);
    expect(await rows.first().locator('[data-failed] .notice.error').textContent()).toContain(
      'a reject needs a reason',
    );

    for (const [waiting, row] of [
      [first, rows.first()],
      [second, rows.first()],
    ] as const) {
      await row.locator('input[name="reason"]').fill('tested');
      await row.locator('button:has-text("Reject")').click();
      expect((await waiting).error?.code).toBe('approval_denied');
      await page.goto(`${stack.base}approvals`);
    }
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

  // A refresh leaves alone a form a person is filling in, and keeps what they typed: were the
  // reason lost, a Reject sent without one would be refused while the call waits on.
  it('keeps a reason being typed while another approval arrives, and lists it once focus leaves', async () => {
    await page.goto(`${stack.base}approvals`);
    const first = gatedCall('browser-typing-a', 'Oslo');
    const rows = page.locator('[data-approval-id]');
    await rows.first().waitFor({ timeout: 10_000 });
    const reason = rows.first().locator('input[name="reason"]');
    await reason.fill('half a thought');
    const typedInto = await reason.elementHandle();

    let seen = () => {};
    const heard = new Promise<void>((resolve) => (seen = resolve));
    const stop = subscribeEvents<ApprovalEvent>(stack.nc, PENDING_EVENTS, (e) => {
      if (e?.callId === 'browser-typing-b') seen();
    });
    const second = gatedCall('browser-typing-b', 'Narvik');
    await heard;
    stop();
    // Past the page's 150 ms throttle and its fetch: a refresh that would swap has done so by now.
    await page.waitForTimeout(1000);
    expect(await typedInto?.evaluate((e) => e.isConnected)).toBe(true);
    expect(await reason.inputValue()).toBe('half a thought');
    expect(await rows.count()).toBe(1);

    // Focus leaves the form: the held refresh runs, and what was typed is typed still.
    await page.locator('h1').click();
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);
    expect(await page.locator('[data-approval-id] input[name="reason"]').first().inputValue()).toBe('half a thought');

    await page.locator('[data-approval-id] button:has-text("Reject")').first().click();
    const rejected = await first;
    expect(rejected.error?.code).toBe('approval_denied');
    expect(rejected.content).toContain('half a thought');
    await page.goto(`${stack.base}approvals`);
    const left = page.locator('[data-approval-id]');
    await left.locator('input[name="reason"]').fill('not today');
    await left.locator('button:has-text("Reject")').click();
    expect((await second).error?.code).toBe('approval_denied');
  });
});
