/**
 * The web console in a real browser (headless Chromium) against the real service on a real
 * nats-server, with 10,004 contexts in the registry: every page renders, registrations and
 * calls show without a reload, and nothing a registrant writes runs as script.
 * `CONSOLE_SCREENSHOTS=1` also saves each page under docs/console/.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newTraceparent } from '../../../src/bus/headers.js';
import type { ToolResult } from '../../../src/dispatcher/types.js';
import type { ResolvedToolContext } from '../../../src/registry/types.js';
import { contextSpec } from '../../harness/registry.js';
import { cli } from '../../harness/service.js';
import { chromiumAvailable, launchChromium, screenshot } from './chromium.js';
import { type ConsoleStack, startConsoleStack } from './stack.js';

/** What a figure measured here looks like in the test output. */
function report(line: string): void {
  process.stderr.write(`console figure: ${line}\n`);
}

describe.skipIf(!chromiumAvailable())('the web console, in Chromium', () => {
  let stack: ConsoleStack;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startConsoleStack(10_000), launchChromium()]);
    page = await browser.context.newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('loads the Contexts page of 10,000 registered contexts in under a second, paged and searched on the server', async () => {
    await page.goto(`${stack.base}contexts`);
    report(stack.readyLine);
    // 10,000 registered, the built-ins, and whatever other tests registered.
    const total = /([\d,]+) contexts/.exec((await page.locator('#live p.muted').textContent()) ?? '')?.[1] as string;
    expect(Number(total.replaceAll(',', ''))).toBeGreaterThan(10_000);
    // The browser's own navigation timing (the test's tsconfig has no DOM types, hence the string).
    const timing = (await page.evaluate("performance.getEntriesByType('navigation')[0].toJSON()")) as Record<
      string,
      number
    >;
    const loaded = (timing.loadEventEnd as number) - (timing.startTime as number);
    report(
      `/contexts with ${total} contexts: response ${((timing.responseEnd as number) - (timing.startTime as number)).toFixed(0)} ms, loaded ${loaded.toFixed(0)} ms`,
    );
    expect(await page.locator('#live tbody tr').count()).toBe(50);
    expect(await page.locator('.pager').textContent()).toContain(`1–50 of ${total}`);

    const started = Date.now();
    await page.goto(`${stack.base}contexts?q=ctx-0999`);
    const searched = Date.now() - started;
    report(`search over ${total} contexts, page to screen: ${searched} ms`);
    expect(await page.locator('#live tbody tr').count()).toBe(10); // ctx-09990 … ctx-09999
    // The control, in this run: the same page with no row to show (a search that finds nothing).
    // A page of 50 rows or a search's 10 costs about as much; all 10,000 rows, many times more.
    // The margin (10×, at least 1 s) is for a busy machine; speed itself is the figure reported.
    const noneAt = Date.now();
    await page.goto(`${stack.base}contexts?q=no-such-context-anywhere`);
    const control = Math.max(Date.now() - noneAt, 100);
    expect(loaded).toBeLessThan(10 * control);
    expect(searched).toBeLessThan(10 * control);

    // Typing searches as one goes, without a page load.
    await page.goto(`${stack.base}contexts`);
    await page.fill('input[name=q]', 'weather.read');
    await expect.poll(() => page.locator('#live tbody tr').count()).toBe(1);
    expect(page.url()).toContain('q=weather.read');
    await page.locator('tr[data-key="console-weather"]').waitFor();
    await page.goto(`${stack.base}contexts?q=ctx-00042`);
    await page.click('text=ctx-00042 >> nth=0');
    await page.locator('tr[data-tool="ctx_00042_tool"]').waitFor();
  });

  it('shows a registration without a reload', async () => {
    await page.goto(`${stack.base}contexts?q=live-reg`);
    await page.evaluate(() => {
      (globalThis as { stayed?: boolean }).stayed = true;
    });
    expect(await page.locator('#live tbody tr').count()).toBe(0);
    const started = Date.now();
    await stack.register(contextSpec('live-reg', { title: 'Registered while you looked', provides: ['live.cap'] }));
    await page.locator('tr[data-key="live-reg"]').waitFor({ timeout: 10_000 });
    report(`registration to screen: ${Date.now() - started} ms`);
    expect(await page.evaluate(() => (globalThis as { stayed?: boolean }).stayed)).toBe(true);
    expect(await page.locator('tr[data-key="live-reg"]').textContent()).toContain('live.cap');
  });

  it('escapes what registrants write: a <script> title is text, never script', async () => {
    const hostile = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">';
    await stack.register(
      contextSpec('xss-probe', {
        title: hostile,
        description: `"><svg onload="window.pwned=3">`,
        matrixTools: [
          {
            name: 'probe',
            description: hostile,
            inputSchema: { type: 'object', properties: { '<b>x</b>': { type: 'string', description: hostile } } },
            target: 'app.x',
            op: '$y',
          },
        ],
      }),
    );
    for (const path of [
      'contexts?q=xss-probe',
      'contexts/xss-probe',
      'resolve?profile=p&refs=xss-probe',
      'try?profile=p&refs=xss-probe&tool=probe',
    ]) {
      const response = await page.goto(`${stack.base}${path}`);
      expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
      await page.locator('main').getByText(hostile).first().waitFor({ timeout: 5_000 });
      expect(await page.locator('#live script, #live img, #live svg, #live b').count()).toBe(0);
      expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    }
  });

  it('shows a call in Calls within a second, and opens its trace', async () => {
    const opening = Date.now();
    await page.goto(`${stack.base}calls`);
    // The control, in this run: what loading the page anew takes (what a reload would cost).
    const reload = Math.max(Date.now() - opening, 100);
    await expect.poll(() => page.locator('#status').textContent()).toBe('live');
    const started = Date.now();
    const result = await stack.client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'default', toolContextRefs: ['console-weather'] },
        call: { id: 'browser-call-1', name: 'forecast', arguments: { city: 'Oslo' } },
      },
      { traceparent: newTraceparent(), session: 's-42', principal: 'agent:alpha' },
    );
    const replied = Date.now();
    expect(result.isError).toBe(false);
    const row = page.locator('tr[data-call-id="browser-call-1"]');
    await row.waitFor({ timeout: 5_000 });
    const shown = Date.now();
    report(
      `call to Calls row: ${shown - started} ms from sending the call, ${shown - replied} ms after its reply (call ${result.durationMs.toFixed(1)} ms)`,
    );
    // Live, not on the next reload or poll: within a wide margin of one page load.
    expect(shown - replied).toBeLessThan(10 * reload);
    expect(await row.textContent()).toMatch(/forecast[\s\S]*ok[\s\S]*s-42[\s\S]*agent:alpha/);

    // A call the CLI makes shows too; its trace opens from the row.
    const made = Date.now();
    const byCli = await cli(stack.natsUrl, 'call', 'no_such_tool', '--profile', 'default', '--session', 's-cli');
    const traceId = /trace ([0-9a-f]{32})/.exec(byCli.stderr)?.[1] as string;
    const cliRow = page.locator(`tr:has(a[title="${traceId}"])`);
    await cliRow.waitFor({ timeout: 5_000 });
    report(`CLI call to Calls row: ${Date.now() - made} ms from spawning the CLI (Node's start included)`);
    expect(await cliRow.textContent()).toContain('error not_found');
    await cliRow.locator(`a[title="${traceId}"]`).click();
    await page.waitForURL(/trace=/);
    expect(await page.locator('#live h2').textContent()).toContain(`Trace ${traceId}: 1 call`);

    // Searching by session is done on the server.
    await page.goto(`${stack.base}calls?session=s-42`);
    expect(await page.locator('#live tbody tr').count()).toBe(1);

    // Why was that matrix_invoke refused? The row says: no approver said yes (no terminal to ask).
    await page.goto(`${stack.base}calls`);
    const denied = await stack.client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'edit' },
        call: {
          id: 'browser-denied',
          name: 'matrix_invoke',
          arguments: { target: 'app.notes', op: '$delete', args: {} },
        },
      },
      { session: 's-43', principal: 'agent:beta' },
    );
    expect(denied.error?.code).toBe('approval_denied');
    await page.locator('tr[data-call-id="browser-denied"]:has-text("approval denied")').waitFor({ timeout: 5_000 });
    await screenshot(page, 'calls', 700);
  });

  it('resolves a session exactly as $resolve does, and diffs two side by side', async () => {
    const a = { profile: 'propose', worker: 'codex' };
    const expected = await stack.client.request<ResolvedToolContext>('system.tools', '$resolve', a);
    await page.goto(`${stack.base}resolve`);
    await page.fill('input[name=profile]', 'propose');
    await page.fill('input[name=worker]', 'codex');
    await page.click('button:has-text("Resolve")');
    await page.locator('code.digest').waitFor();
    expect(await page.locator('code.digest').textContent()).toBe(expected.digest);
    const reply = JSON.parse((await page.locator('pre.reply').textContent()) as string);
    expect(reply).toEqual(expected);

    await page.fill('input[name="b.profile"]', 'propose');
    await page.fill('input[name="b.worker"]', 'codex');
    await page.fill('input[name="b.requires"]', 'weather.read');
    await page.click('button:has-text("Resolve")');
    await page.locator('#diff-summary').waitFor();
    expect(await page.locator('#diff-summary').textContent()).toMatch(/tools only in B\s*forecast/);
    expect(await page.locator('table.diff tr.add, table.diff tr.change').count()).toBeGreaterThan(0);
    await screenshot(page, 'resolve', 1900);
  });

  it('lists the live mounts with their ops, instances and request counts, refreshed', async () => {
    await stack.client.request('system.tools', '$list', { limit: 1 });
    await page.goto(`${stack.base}mounts`);
    const tools = page.locator('section[data-mount="system.tools"]');
    await tools.waitFor();
    expect(await tools.textContent()).toMatch(/\$list[\s\S]*\$resolve/);
    const requests = async () =>
      Number((await tools.locator('tr:has-text("$list") td.num').first().textContent())?.replaceAll(',', ''));
    const before = await requests();
    expect(before).toBeGreaterThan(0);
    await stack.client.request('system.tools', '$list', { limit: 1 });
    await expect.poll(requests, { timeout: 10_000 }).toBeGreaterThan(before);
    expect(await page.locator('section.card[data-mount]').count()).toBeGreaterThanOrEqual(8);
    await screenshot(page, 'mounts', 1250);
  });

  it('renders each page for the screenshots in docs/console.md', async () => {
    await page.goto(`${stack.base}contexts`);
    await page.locator('#live tbody tr').first().waitFor();
    await screenshot(page, 'contexts', 1100);
    await page.goto(`${stack.base}contexts/console-weather`);
    await page.locator('tr[data-tool="forecast"]').waitFor();
    await page.click('tr[data-tool="forecast"] summary');
    await screenshot(page, 'context', 1100);
    expect(await page.locator('dl.facts').textContent()).toContain('weather.read');
  });
});
