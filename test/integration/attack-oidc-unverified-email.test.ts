/**
 * Attack: an unverified email names who acts ("nOAuth"). The claims mapping's schema
 * (contracts/oidc-mapping.json) offers `{"claim": "email", "prefix": "user:"}` as the principal,
 * and `mapClaims` (src/identity/oidc/mapping.ts) takes the claim as it comes. Where a person may
 * set their own email at the IdP (a self-service profile, an Entra ID guest's mutable `email`, a
 * social login), a token with `email: ana@example.com, email_verified: false` stands for
 * `user:ana@example.com`: the attacker is Ana to the service (her tasks, her place in approvers'
 * `principals` globs, a revocation of her). OpenID Connect Core 5.7: email is no unique
 * identifier, and is the person's only once `email_verified` says so.
 * What must hold: a principal is never taken from an `email` its token does not say is verified.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrantError } from '../../src/identity/errors.js';
import { OidcTrust } from '../../src/identity/oidc/trust.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';

const RESOURCE = 'https://bus.example/';

describe('the principal from the email claim', () => {
  let idp: TestIdp;
  let trust: OidcTrust;

  beforeAll(async () => {
    idp = await startIdp({
      resources: [RESOURCE],
      clients: [
        { id: 'ana-laptop', claims: { groups: ['staff'], email: 'ana@example.com', email_verified: true } },
        // Mallory typed Ana's address into her own profile; the IdP says it is not verified.
        { id: 'mallory-laptop', claims: { groups: ['staff'], email: 'ana@example.com', email_verified: false } },
      ],
    });
    trust = new OidcTrust({
      issuers: [idp.issuer],
      audience: RESOURCE,
      mapping: {
        principal: { claim: 'email', prefix: 'user:' },
        rules: [{ when: { groups: 'staff' }, profile: 'default' }],
      },
    });
    expect(await trust.start()).toEqual([]);
  });
  afterAll(async () => {
    trust?.stop();
    await idp?.stop();
  });

  it('maps the verified address, and refuses a token whose address is not verified', async () => {
    expect((await trust.verify(await idp.token('ana-laptop'))).claims.sub).toBe('user:ana@example.com');
    const mallory = await trust.verify(await idp.token('mallory-laptop')).then(
      (g) => g.claims.sub,
      (err: unknown) => err,
    );
    expect(mallory).toBeInstanceOf(GrantError);
  });
});
