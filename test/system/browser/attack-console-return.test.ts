/**
 * Attack: an open redirect through the console's sign-in `return` page (docs/identity-oidc.md,
 * "Signing in to the console"). `localPath` (src/console/sign-in.ts) takes any value that starts
 * with one `/` and holds no `\`; a tab after that slash (`/%09/evil.example/phish`) passes, is sent
 * back verbatim in the `Location` of the callback's 303, and the browser's URL parser drops the
 * tab, reading `//evil.example/phish`: a link to the console's real /signin, which the person signs in
 * through at the real IdP, lands them on the attacker's site (a phishing page dressed as the
 * console, "session expired, sign in again"). What must hold: after signing in, the browser is on
 * a page of the console, whatever `return` said.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedNatsUrl } from '../../harness/bus.js';
import { freePort } from '../../harness/nats-server.js';
import { startIdp, type TestIdp } from '../../harness/oidc.js';
import { type ServiceProcess, startScript } from '../../harness/service.js';
import { chromiumAvailable, launchChromium } from './chromium.js';

const RESOURCE = 'https://bus.example/';

describe.skipIf(!chromiumAvailable())('the console sign-in return page, in Chromium', () => {
  let idp: TestIdp;
  let consoleProcess: ServiceProcess;
  let browser: Awaited<ReturnType<typeof launchChromium>>;
  let page: Page;
  let base: string;
  /** Every navigation the attacker's site received. */
  const landed: string[] = [];
  let evil: Server;
  let evilHost: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}/`;
    idp = await startIdp({
      resources: [RESOURCE],
      clients: [],
      publicClients: [{ id: 'matrix-console', redirectUris: [`${base}auth/callback`] }],
      accounts: { ana: { groups: ['approvers'] } },
    });
    consoleProcess = await startScript('dist/src/cli/main.js', sharedNatsUrl(), 'console ready on', {}, [
      'console',
      '--port',
      String(port),
      '--oidc-issuer',
      idp.issuer,
      '--oidc-client-id',
      'matrix-console',
      '--oidc-audience',
      RESOURCE,
    ]);
    browser = await launchChromium();
    page = await browser.context.newPage();
    // The attacker's site: another origin (localhost, another port) on this machine.
    evil = createServer((req, res) => {
      landed.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Session expired, sign in again</h1>');
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    evilHost = `localhost:${(evil.address() as AddressInfo).port}`;
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await consoleProcess?.stop('SIGTERM');
    await idp?.stop();
    evil?.close();
  });

  it('brings a person back to a page of the console, never to another site named by return', async () => {
    // The link the attacker sends: the console's own sign-in, at its real address.
    await page.goto(`${base}signin?return=/%09/${evilHost}/phish`);
    await page.locator('input[name="login"]').fill('ana');
    await page.locator('input[name="password"]').fill('any password');
    await page.locator('button[type="submit"]').click();
    const callback = page.waitForResponse((r) => r.url().startsWith(`${base}auth/callback`));
    await page.locator('button:has-text("Continue")').click();
    // The console's answer to the IdP's redirect: the session cookie, and where to go next.
    const location = (await callback).headers().location ?? '';
    await page.waitForLoadState('load');
    expect(landed).toEqual([]);
    expect(new URL(location, base).origin).toBe(new URL(base).origin);
    expect(new URL(page.url()).origin).toBe(new URL(base).origin);
  }, 60_000);
});
