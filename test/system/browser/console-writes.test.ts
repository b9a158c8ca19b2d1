/**
 * The console's write actions in a real browser: trying a tool through the dispatcher (its
 * form made from the tool's schema), registering and unregistering a context — and the
 * guards: a console is read-only unless started with --allow-writes, every write needs the
 * token it printed, and a loopback console answers only to its own Host.
 */
import { request as httpRequest } from 'node:http';
import type { Msg } from '@nats-io/nats-core';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumAvailable, launchChromium, screenshot } from './chromium.js';
import { type ConsoleStack, startConsoleStack } from './stack.js';

/** A POST of form fields, as a browser (or a page on another site) would send it. */
async function post(
  url: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { method: 'POST', body: new URLSearchParams(fields), headers, redirect: 'manual' });
  return { status: res.status, text: await res.text() };
}

/** A GET with a Host header of our choosing (fetch may not set it). */
function getWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { headers: { Host: host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', reject)
      .end();
  });
}

describe.skipIf(!chromiumAvailable())('the web console writes, in Chromium', () => {
  let stack: ConsoleStack;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;

  beforeAll(async () => {
    [stack, browser] = await Promise.all([startConsoleStack(), launchChromium()]);
    page = await browser.context.newPage();
    await page.goto(`${stack.base}contexts`);
    await page.fill('#token', stack.token); // kept for the tab, sent with every write form
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('tries a tool: the form comes from its schema, bad input shows the validation error, good input calls', async () => {
    const seen: Msg[] = [];
    const spy = stack.nc.subscribe('system.dispatcher.$call', {
      callback: (_err, msg) => {
        seen.push(msg);
      },
    });
    await page.goto(`${stack.base}try?profile=default&refs=console-weather`);
    await page.click('a.chip:has-text("forecast")');
    const form = page.locator('#call-form');
    await form.waitFor();
    expect(await form.locator('select[name="arg.units"] option').allTextContents()).toEqual([
      '(absent)',
      'metric',
      'imperial',
    ]);
    expect(await form.locator('label:has(input[name="arg.city"])').textContent()).toContain('required');

    await page.fill('input[name="arg.city"]', 'Oslo');
    await page.fill('input[name="arg.days"]', 'three');
    await page.click('button:has-text("Call forecast")');
    const result = page.locator('#call-result');
    await result.waitFor();
    expect(await result.locator('h2').textContent()).toContain('isError · bad_request');
    expect(await result.locator('pre.content-model').textContent()).toMatch(/days/);
    await screenshot(page, 'try-invalid', 1300);

    await page.fill('input[name="arg.days"]', '3');
    await page.selectOption('select[name="arg.units"]', { label: 'metric' });
    await page.fill('textarea[name=grant]', 'eyJ0eXAiOiJKV1QifQ.pasted.grant');
    await page.fill('input[name=callSession]', 's-try');
    await page.click('button:has-text("Call forecast")');
    await page.locator('#call-result h2:has-text("ok")').waitFor();
    expect(JSON.parse((await page.locator('#call-result pre.content-model').textContent()) as string)).toEqual({
      city: 'Oslo',
      days: 3,
      sky: 'clear',
    });
    await screenshot(page, 'try', 1300);
    spy.unsubscribe();
    expect(seen.at(-1)?.headers?.get('Matrix-Grant')).toBe('eyJ0eXAiOiJKV1QifQ.pasted.grant');

    await page.click('text=open its trace');
    await page.locator('#live tbody tr:has-text("forecast")').waitFor();
    expect(await page.locator('#live tbody tr').first().textContent()).toContain('s-try');
  });

  it('registers a context from the form, says what is wrong with a bad spec, and unregisters', async () => {
    await page.goto(`${stack.base}contexts`);
    await page.click('summary:has-text("Register a context")');
    await page.fill('textarea[name=spec]', JSON.stringify({ key: 'from-form', title: 'From the form' }));
    await page.click('button:has-text("Register")');
    const problem = page.locator('.notice.error');
    await problem.waitFor();
    expect(await problem.textContent()).toMatch(/bad_request[\s\S]*permissions/);

    const spec = {
      key: 'from-form',
      title: 'From the form',
      description: 'Registered in a browser',
      permissions: { approval: 'never' },
    };
    await page.fill('textarea[name=spec]', JSON.stringify(spec));
    await page.click('button:has-text("Register")');
    await page.waitForURL(/\/contexts\/from-form\?registered=\d+/);
    expect(await page.locator('.notice.ok').textContent()).toContain('Registered from-form');

    await page.click('button:has-text("Unregister from-form")');
    await page.waitForURL(/unregistered=from-form/);
    await expect
      .poll(() =>
        stack.client
          .request<{ contexts: unknown[] }>('system.tools', '$list', { keys: ['from-form'] })
          .then((r) => r.contexts.length),
      )
      .toBe(0);
  });

  it('says on the Calls page why a task was not cancelled, and keeps Calls as the address', async () => {
    const refused = await post(`${stack.base}tasks/cancel`, { taskId: 'no-such-task', token: stack.token });
    expect(refused.status).toBeGreaterThanOrEqual(400);
    expect(refused.text).toContain('Task no-such-task was not cancelled');
    expect(refused.text).toContain('data-failed="task:no-such-task"');
    expect(refused.text).toContain('data-address="/calls"');
  });

  it('refuses a write without the right token, and answers only to its own Host', async () => {
    const fields = { profile: 'default', refs: 'console-weather', tool: 'forecast', 'arg.city': 'Oslo' };
    const none = await post(`${stack.base}try`, fields);
    expect(none.status).toBe(403);
    expect(none.text).toContain('needs the token');
    expect((await post(`${stack.base}try`, { ...fields, token: `${stack.token}x` })).status).toBe(403);
    expect((await post(`${stack.base}contexts`, { spec: '{}' }, { 'X-Console-Token': 'wrong' })).status).toBe(403);
    expect((await post(`${stack.base}try`, fields, { 'X-Console-Token': stack.token })).status).toBe(200);
    expect(await getWithHost(`${stack.base}contexts`, 'attacker.example:80')).toBe(421);
  });

  it('answers bad input with a clear error and keeps serving', async () => {
    const get = async (path: string) => {
      const res = await fetch(`${stack.base}${path}`);
      return { status: res.status, text: await res.text() };
    };
    expect(await get('calls?trace=not-hex')).toMatchObject({
      status: 200,
      text: expect.stringContaining('bad_request'),
    });
    expect(await get('resolve?profile=p&environment=%7Boops')).toMatchObject({
      text: expect.stringContaining('not valid JSON'),
    });
    expect(await get('resolve?profile=p&refs=no-such-context')).toMatchObject({
      text: expect.stringMatching(/not_found[\s\S]*no-such-context/),
    });
    expect((await get('contexts/%E0%A4%A')).status).toBe(404);
    expect((await get('contexts/no-such-context')).status).toBe(404);
    expect(
      (await post(`${stack.base}contexts`, { spec: 'x'.repeat(2 * 1024 * 1024) }, { 'X-Console-Token': stack.token }))
        .status,
    ).toBe(413);
    expect((await post(`${stack.base}contexts`, { spec: '{oops' }, { 'X-Console-Token': stack.token })).text).toContain(
      'the spec is not JSON',
    );
    expect((await get('contexts')).status).toBe(200);
  });

  it('is read-only unless started with --allow-writes', async () => {
    const readOnly = await stack.startConsole();
    try {
      expect(readOnly.token).toBeUndefined();
      expect(readOnly.process.output()).toContain('read-only');
      const refused = await post(`${readOnly.base}try`, {
        profile: 'default',
        tool: 'matrix_introspect',
        token: stack.token,
      });
      expect(refused.status).toBe(403);
      expect(refused.text).toContain('read-only');
      await page.goto(`${readOnly.base}try?profile=default&tool=matrix_introspect`);
      expect(await page.locator('.notice.info').first().textContent()).toContain('read-only');
      expect(await page.locator('button:has-text("Call matrix_introspect")').isDisabled()).toBe(true);
      await page.goto(`${readOnly.base}contexts`);
      expect(await page.locator('summary:has-text("Register a context")').count()).toBe(0);
      expect(await page.locator('#token').count()).toBe(0);
    } finally {
      expect(await readOnly.process.stop('SIGTERM')).toBe(0);
    }
  });
});
