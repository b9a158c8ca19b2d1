/**
 * What an access token's header and claims must say besides its signature (RFC 9068): `iat`,
 * without which `$revoke {sub}` could not tell it was issued before; and a `typ` that is an access
 * token's. By default a `typ` absent, `JWT` or `at+jwt` passes (what Keycloak, Entra ID, Auth0 and
 * Okta send) and any other is refused; an issuer whose mapping entry says `tokenType: "at+jwt"`
 * must send `at+jwt`, so one of its ID tokens (`typ` `JWT` or none) is no grant even where its
 * `aud` is the service's audience. A real oidc-provider's access tokens say `at+jwt`.
 */
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrantError } from '../../src/identity/errors.js';
import { OidcTrust } from '../../src/identity/oidc/trust.js';
import { GrantFailure } from '../../src/identity/types.js';
import { type JwksIssuer, startJwksIssuer } from '../harness/jwks-issuer.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';

const RESOURCE = 'https://bus.example/';
const rules = [{ profile: 'default' }];

describe('the type and iat of an OIDC access token', () => {
  let minimal: JwksIssuer;
  let idp: TestIdp;
  let lenient: OidcTrust;
  let strict: OidcTrust;
  /** The principal a token maps to, or the words it is refused with. */
  const verdict = (trust: OidcTrust, token: string) =>
    trust.verify(token).then(
      (g) => g.claims.sub,
      (err: unknown) => {
        if (!(err instanceof GrantError)) throw err;
        expect(err.failure).toBe(GrantFailure.Malformed);
        return err.message;
      },
    );
  const claims = () => {
    const now = Math.floor(Date.now() / 1000);
    return { sub: 'alpha', iat: now, exp: now + 300 };
  };

  beforeAll(async () => {
    minimal = await startJwksIssuer(RESOURCE);
    idp = await startIdp({ resources: [RESOURCE], clients: [{ id: 'alpha', claims: {} }] });
    lenient = new OidcTrust({ issuers: [minimal.issuer], audience: RESOURCE, mapping: { rules } });
    const atJwt = { tokenType: 'at+jwt' as const };
    strict = new OidcTrust({
      issuers: [minimal.issuer, idp.issuer],
      audience: RESOURCE,
      mapping: {
        rules,
        issuers: {
          [minimal.issuer]: { principal: { prefix: 'min:' }, ...atJwt },
          [idp.issuer]: { principal: { prefix: 'idp:' }, ...atJwt },
        },
      },
    });
    expect(await lenient.start()).toEqual([]);
    expect(await strict.start()).toEqual([]);
  });
  afterAll(async () => {
    lenient?.stop();
    strict?.stop();
    await minimal?.stop();
    await idp?.stop();
  });

  it('refuses a token without iat, saying so', async () => {
    const { iat: _, ...noIat } = claims();
    expect(await verdict(lenient, await minimal.sign(noIat))).toMatch(/has no iat claim \(RFC 9068 requires it/);
    expect(await verdict(lenient, await minimal.sign(claims()))).toBe('alpha');
  });

  it('takes by default a typ absent, JWT or at+jwt, and refuses any other', async () => {
    for (const typ of [null, 'JWT', 'at+jwt', 'application/at+jwt', 'AT+JWT'])
      expect(await verdict(lenient, await minimal.sign(claims(), { typ }))).toBe('alpha');
    for (const typ of ['logout+jwt', 'dpop+jwt', 'secevent+jwt'])
      expect(await verdict(lenient, await minimal.sign(claims(), { typ }))).toMatch(/says it is no access token/);
  });

  it('takes only at+jwt from an issuer whose mapping says tokenType at+jwt', async () => {
    for (const typ of ['at+jwt', 'application/at+jwt'])
      expect(await verdict(strict, await minimal.sign(claims(), { typ }))).toBe('min:alpha');
    for (const typ of [null, 'JWT'])
      expect(await verdict(strict, await minimal.sign(claims(), { typ }))).toMatch(/must say at\+jwt/);
    const real = await idp.token('alpha');
    expect(decodeProtectedHeader(real).typ).toBe('at+jwt');
    expect(await verdict(strict, real)).toBe('idp:alpha');
  });
});
