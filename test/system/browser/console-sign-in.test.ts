/**
 * Signing in to the console through the organisation's IdP, in Chromium against a real OpenID
 * Provider (oidc-provider, its own sign-in and consent pages): the authorization code flow with
 * PKCE brings a person back signed in, the Approvals page lists what waits, Approve is sent with
 * the person's access token, and the audit trail names the IdP's subject as who approved. An
 * answer whose state is not the browser's sign-in, whose code was used before, or whose ID token
 * carries another nonce starts no session; signing out ends the session. The session cookie is
 * HttpOnly and SameSite=Lax, and a write with it but without the session's secret from the
 * console's page is refused.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../../src/audit/events.js';
import { watchCalls } from '../../../src/audit/log.js';
import { BusClient } from '../../../src/bus/client.js';
import type { ToolResult } from '../../../src/dispatcher/types.js';
import { invokeThroughDispatcher, uniqueApprovalsBucket } from '../../harness/approvals.js';
import { sharedNatsUrl, testConnection } from '../../harness/bus.js';
import { eventually } from '../../harness/eventually.js';
import { freePort } from '../../harness/nats-server.js';
import { startIdp, type TestIdp } from '../../harness/oidc.js';
import { uniqueBucket } from '../../harness/registry.js';
import { type ServiceProcess, startScript } from '../../harness/service.js';
import { chromiumAvailable, launchChromium } from './chromium.js';

const RESOURCE = 'https://bus.example/';

describe.skipIf(!chromiumAvailable())('signing in to the console through the IdP, in Chromium', () => {
  let idp: TestIdp;
  let service: ServiceProcess;
  let consoleProcess: ServiceProcess;
  let nc: NatsConnection;
  let client: BusClient;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  let base: string;
  const events: CallEvent[] = [];
  let stopWatching = () => {};
  /** The callback address of the first sign-in, code and state in it: replayed below. */
  let firstCallback = '';

  beforeAll(async () => {
    const natsUrl = sharedNatsUrl();
    const port = await freePort();
    base = `http://127.0.0.1:${port}/`;
    idp = await startIdp({
      resources: [RESOURCE],
      clients: [{ id: 'alpha', claims: { groups: ['agents'] } }],
      publicClients: [{ id: 'matrix-console', redirectUris: [`${base}auth/callback`] }],
      accounts: { ana: { groups: ['approvers'] } },
    });
    const dir = mkdtempSync(join(tmpdir(), 'console-sign-in-'));
    const mapping = join(dir, 'mapping.json');
    writeFileSync(
      mapping,
      JSON.stringify({
        principal: { claim: 'sub', prefix: 'user:' },
        rules: [
          { when: { groups: 'agents' }, profile: 'edit' },
          { when: { groups: 'approvers' }, profile: 'default', role: 'approver', approve: { tools: ['*'] } },
        ],
      }),
    );
    const policy = join(dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ default: 'ask' }));
    const trust = {
      MATRIX_TRUSTED_OIDC_ISSUERS: idp.issuer,
      MATRIX_OIDC_AUDIENCE: RESOURCE,
      MATRIX_OIDC_MAPPING: mapping,
    };
    service = await startScript(
      'dist/src/cli/main.js',
      natsUrl,
      ' ready ',
      { ...trust, MATRIX_TOOLS_BUCKET: uniqueBucket(), MATRIX_APPROVALS_BUCKET: uniqueApprovalsBucket() },
      ['serve', '--policy', policy],
    );
    consoleProcess = await startScript('dist/src/cli/main.js', natsUrl, 'console ready on', {}, [
      'console',
      '--port',
      String(port),
      '--oidc-issuer',
      idp.issuer,
      '--oidc-client-id',
      'matrix-console',
      '--oidc-audience',
      RESOURCE,
      '--oidc-scope',
      'approve',
    ]);
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 10_000 });
    stopWatching = watchCalls(nc, (e) => void events.push(e));
    await nc.flush();
    browser = await launchChromium();
    page = await browser.context.newPage();
  }, 90_000);

  afterAll(async () => {
    stopWatching();
    await browser?.close();
    const consoleExit = await consoleProcess?.stop('SIGTERM');
    const serviceExit = await service?.stop('SIGTERM');
    client?.close();
    await nc?.close();
    await idp?.stop();
    expect([consoleExit, serviceExit]).toEqual([0, 0]);
  });

  /** The agent's matrix_invoke, its IdP token as the grant, waiting for a person; its result once answered. */
  const gatedCall = async (id: string): Promise<ToolResult> =>
    invokeThroughDispatcher(
      client,
      { id, profile: 'edit', target: 'system.agents', op: '$introspect', args: { mount: 'system.tools' } },
      { grant: await idp.token('alpha'), timeoutMs: 60_000 },
    );

  it('signs ana in with the code flow and PKCE, lists the waiting call, and records her as who approved', async () => {
    await page.goto(`${base}approvals`);
    expect(await page.locator('#live').textContent()).toContain('Sign in to see the pending approvals');
    const authorize: string[] = [];
    const callbacks: string[] = [];
    page.on('request', (r) => {
      if (r.url().startsWith(`${idp.issuer}/auth?`)) authorize.push(r.url());
      if (r.url().startsWith(`${base}auth/callback`)) callbacks.push(r.url());
    });

    await page.locator('header a.signin').click();
    // The IdP's own pages: any login names the account, any password; then consent.
    await page.locator('input[name="login"]').fill('ana');
    await page.locator('input[name="password"]').fill('any password');
    await page.locator('button[type="submit"]').click();
    await page.locator('button:has-text("Continue")').click();
    await page.waitForURL(`${base}approvals`);
    expect(await page.locator('header .status.person').textContent()).toBe('ana');

    const asked = new URL(authorize[0] as string).searchParams;
    expect(asked.get('code_challenge_method')).toBe('S256');
    expect(asked.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asked.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asked.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asked.get('resource')).toBe(RESOURCE);
    expect(asked.has('client_secret')).toBe(false);
    firstCallback = callbacks[0] as string;
    expect(new URL(firstCallback).searchParams.get('state')).toBe(asked.get('state'));

    const session = (await browser.context.cookies(base)).find((c) => c.name === 'matrix-console');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: false, path: '/' });
    // The script cannot read it; the binding of the sign-in is gone once used.
    expect(await page.evaluate('document.cookie')).not.toContain('matrix-console');
    expect((await browser.context.cookies(base)).some((c) => c.name === 'matrix-console-signin')).toBe(false);

    const waiting = gatedCall('sign-in-approve');
    const row = page.locator('[data-approval-id]');
    await row.waitFor({ timeout: 15_000 });
    expect(await row.textContent()).toContain('user:alpha');
    expect(await page.locator('main').textContent()).toContain('You answer as ana');
    // The session's cookie alone, on a form of no page of the console's: refused, nothing answered.
    const approvalId = (await row.getAttribute('data-approval-id')) as string;
    const forged = await browser.context.request.post(`${base}approvals/answer`, {
      form: { approvalId, decision: 'approve' },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    expect(await forged.text()).toContain('did not come from a page of this console');
    await row.locator('button:has-text("Approve")').click();
    const result = await waiting;
    expect(result.isError, JSON.stringify(result)).toBe(false);
    await page.waitForURL(/answered=/);
    expect(await page.locator('#live .notice.ok').first().textContent()).toContain('as user:ana');

    // The audit event names who the IdP says: the agent that called and the person who approved.
    await eventually(() =>
      expect(events.find((e) => e.callId === 'sign-in-approve' && e.approvedBy !== undefined)).toMatchObject({
        principal: 'user:alpha',
        approvedBy: 'user:ana',
      }),
    );
  }, 90_000);

  it('signs out: the session ends, and the page asks to sign in again', async () => {
    await page.goto(`${base}approvals`);
    await page.locator('header form.signout button').click();
    await page.waitForURL(`${base}contexts`);
    expect(await page.locator('header a.signin').count()).toBe(1);
    await notSignedIn();
  });

  it('refuses a code the IdP issued for another nonce, even with this sign-in’s state and challenge', async () => {
    // An attacker's authorization request carrying this browser's state and code challenge (both
    // visible in the address it was sent to) but a nonce of their own: only the nonce differs.
    const begun = await browser.context.request.get(`${base}signin`, { maxRedirects: 0 });
    const asked = new URL(begun.headers().location as string);
    asked.searchParams.set('nonce', 'a-nonce-of-the-attackers-own-choosing-000000');
    const answer = await followToCallback(asked.href);
    const refused = await page.goto(answer);
    expect(refused?.status()).toBe(400);
    expect(await page.locator('#live').textContent()).toContain('nonce does not match');
    await notSignedIn();
  }, 60_000);

  it('refuses an answer whose state is not the sign-in this browser began, and that sign-in after it', async () => {
    // The IdP remembers ana: it answers at once. The answer is held back from the console here.
    const answer = await heldAnswer();
    const wrong = new URL(answer);
    wrong.searchParams.set('state', 'not-the-state-this-browser-was-given-at-all-x');
    const refused = await page.goto(wrong.href);
    expect(refused?.status()).toBe(400);
    expect(await page.locator('#live').textContent()).toContain('state does not match');
    // Used once: the true answer, after it, finds no sign-in waiting.
    const late = await page.goto(answer);
    expect(late?.status()).toBe(400);
    expect(await page.locator('#live').textContent()).toContain('no sign-in of this browser is waiting');
    await notSignedIn();
  }, 60_000);

  it('refuses a replayed code: with no sign-in waiting, and with the state of a new one', async () => {
    const again = await page.goto(firstCallback);
    expect(again?.status()).toBe(400);
    expect(await page.locator('#live').textContent()).toContain('no sign-in of this browser is waiting');

    // A new sign-in waits in this browser; the old code comes back with its state.
    const fresh = new URL(await heldAnswer());
    const replay = new URL(firstCallback);
    replay.searchParams.set('state', fresh.searchParams.get('state') as string);
    const refused = await page.goto(replay.href);
    expect(refused?.status()).toBe(400);
    expect(await page.locator('#live').textContent()).toContain(
      'the identity provider refused the code: invalid_grant',
    );
    await notSignedIn();
  }, 60_000);

  /**
   * Begins a sign-in in the browser (its cookies: the console's binding, the IdP's session) and
   * follows the redirects by hand up to the IdP's answer, which is returned, not delivered.
   */
  async function heldAnswer(): Promise<string> {
    return followToCallback(`${base}signin`);
  }

  /** Follows redirects from `at`, with the browser's cookies, up to the console's callback; its address. */
  async function followToCallback(at: string): Promise<string> {
    for (let hop = 0; hop < 10 && !at.startsWith(`${base}auth/callback?`); hop++) {
      const response = await browser.context.request.get(at, { maxRedirects: 0 });
      const location = response.headers().location;
      expect(location, `${at} answered ${response.status()}`).toBeDefined();
      at = new URL(location as string, at).href;
    }
    expect(at).toContain('code=');
    return at;
  }

  async function notSignedIn(): Promise<void> {
    const response = await page.goto(`${base}approvals`);
    expect(response?.status()).toBe(401);
    expect(await page.locator('header a.signin').count()).toBe(1);
    expect((await browser.context.cookies(base)).some((c) => c.name === 'matrix-console')).toBe(false);
  }
});
