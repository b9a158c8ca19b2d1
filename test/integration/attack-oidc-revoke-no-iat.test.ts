/**
 * Attack: an access token without `iat` outlives `$revoke {sub}` (docs/identity-oidc.md: "`{sub}`
 * every token of the principal issued before"). `iat` is optional in a JWT (RFC 7519 4.1.6) and
 * `OidcIssuer.verify` (src/identity/oidc/issuer.ts) requires only `exp` and `sub`; `grantOf`
 * (src/identity/oidc/trust.ts) then stamps a token that has none with `iat = now`, at each
 * verification, so `Revocations.find` always reads it as issued after the revocation. A token
 * issued before its principal was revoked (stolen, say) keeps working until its `exp`.
 * The issuer here is a minimal OpenID issuer (discovery document and JWKS, ES256 key) that, as
 * some do, puts no `iat` in its access tokens. What must hold: a token with no `iat` is refused,
 * or counted as issued no later than the revocation of its principal.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OidcTrust } from '../../src/identity/oidc/trust.js';
import { Revocations } from '../../src/identity/revocations.js';
import { GrantVerifier } from '../../src/identity/verify.js';
import { type JwksIssuer, startJwksIssuer } from '../harness/jwks-issuer.js';

const RESOURCE = 'https://bus.example/';

describe('$revoke {sub} and an access token without iat', () => {
  let idp: JwksIssuer;

  beforeAll(async () => {
    idp = await startJwksIssuer(RESOURCE);
  });
  afterAll(async () => {
    vi.useRealTimers();
    await idp?.stop();
  });

  it('refuses, after its principal is revoked, a token issued before', async () => {
    const trust = new OidcTrust({
      issuers: [idp.issuer],
      audience: RESOURCE,
      mapping: { principal: { prefix: 'user:' }, rules: [{ profile: 'default' }] },
    });
    expect(await trust.start()).toEqual([]);
    // The clock moves (Date only: sockets and timers run as ever), as it does between a theft and its use.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    let now = Date.now();
    const revocations = new Revocations();
    const verifier = new GrantVerifier([], { oidc: trust, revocations });
    const exp = Math.floor(now / 1000) + 3600;
    // Both issued now, one with iat and one without; then the principal is revoked.
    const withIat = await idp.sign({ sub: 'mallory', jti: 'with-iat', exp, iat: Math.floor(now / 1000) });
    const withoutIat = await idp.sign({ sub: 'mallory', jti: 'without-iat', exp });
    now += 60_000;
    vi.setSystemTime(now);
    revocations.apply('sub.user:mallory', {
      sub: 'user:mallory',
      reason: 'laptop stolen',
      revokedAt: now,
      until: exp * 1000,
    });
    now += 60_000;
    vi.setSystemTime(now);
    await expect(verifier.verifyAsync(withIat)).rejects.toThrow(/revoked/);
    await expect(verifier.verifyAsync(withoutIat)).rejects.toThrow(/revoked|iat/);
    trust.stop();
    vi.useRealTimers();
  });
});
