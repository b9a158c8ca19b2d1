/**
 * The console's sign-in under a flood of sign-ins begun (docs/identity-oidc.md, "Signing in to
 * the console"). `GET /signin` needs no credential, so anyone may begin sign-ins by the thousand;
 * the console kept each begun sign-in in memory, at most 1000, dropping the oldest, so a flood
 * pushed a real person's out while they were at the IdP and their answer came back to "no
 * sign-in of this browser is waiting". What holds now: a sign-in begun lives in its own
 * browser's cookie (sealed), so the server keeps nothing per sign-in begun, and a person's
 * answer is read whatever was begun elsewhere; a cookie not sealed by this console, or one
 * already answered, still finds nothing waiting. The IdP is the real one of test/harness/oidc.ts;
 * the answers are built from the state the console sent it (the person's login there is
 * test/system/browser/console-sign-in.test.ts's).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleSignIn, cookiesOf } from '../../src/console/sign-in.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';

const RESOURCE = 'https://bus.example/';
const CALLBACK = 'http://127.0.0.1:1/auth/callback';

describe('console sign-in, flooded with sign-ins begun', () => {
  let idp: TestIdp;
  let signIn: ConsoleSignIn;
  beforeAll(async () => {
    idp = await startIdp({
      resources: [RESOURCE],
      clients: [],
      publicClients: [{ id: 'matrix-console', redirectUris: [CALLBACK] }],
    });
    signIn = new ConsoleSignIn({
      issuer: idp.issuer,
      clientId: 'matrix-console',
      redirectUri: CALLBACK,
      audience: RESOURCE,
    });
    await signIn.start();
  }, 60_000);
  afterAll(async () => {
    signIn?.stop();
    await idp?.stop();
  });

  /** A sign-in begun: the browser's cookies after it, and the state sent to the IdP. */
  async function begun(): Promise<{ cookies: Map<string, string>; state: string }> {
    const { location, cookie } = await signIn.begin('/approvals');
    return {
      cookies: cookiesOf(cookie.split(';')[0]),
      state: new URL(location).searchParams.get('state') as string,
    };
  }

  it("reads a person's answer after 5000 sign-ins were begun elsewhere", async () => {
    const person = await begun();
    for (let i = 0; i < 5000; i++) await signIn.begin('/approvals');
    // The IdP's answer without a code: past the state check, refused only for the missing code.
    const answer = new URLSearchParams({ state: person.state, iss: idp.issuer });
    await expect(signIn.finish(answer, person.cookies)).rejects.toThrow('the answer carries no code');
    // Used once: the same answer, with the same cookie, finds nothing waiting.
    await expect(signIn.finish(answer, person.cookies)).rejects.toThrow('no sign-in of this browser is waiting');
  }, 60_000);

  it('finds nothing waiting under a cookie this console did not seal, or one altered', async () => {
    const person = await begun();
    const [name, value] = [...person.cookies][0] as [string, string];
    const answer = new URLSearchParams({ state: person.state, iss: idp.issuer });
    const flipped = `${value.slice(0, 20)}${value[20] === 'A' ? 'B' : 'A'}${value.slice(21)}`;
    for (const forged of [flipped, 'not-a-sealed-sign-in', ''])
      await expect(signIn.finish(answer, new Map([[name, forged]]))).rejects.toThrow(
        'no sign-in of this browser is waiting',
      );
    // Another console (another process's key) cannot open it either.
    const other = new ConsoleSignIn({
      issuer: idp.issuer,
      clientId: 'matrix-console',
      redirectUri: CALLBACK,
      audience: RESOURCE,
    });
    await expect(other.finish(answer, person.cookies)).rejects.toThrow('no sign-in of this browser is waiting');
  });
});
