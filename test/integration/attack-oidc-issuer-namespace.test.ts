/**
 * Attack: one trusted issuer speaking for another's principals (docs/identity-oidc.md,
 * `--trust-oidc` takes several issuers). A `sub` (or `client_id`) is unique only within its
 * issuer (OpenID Connect Core 2, "sub"), but `mapClaims` (src/identity/oidc/mapping.ts) makes the
 * principal `<prefix><claim>` whatever the issuer, and `grantOf` (src/identity/oidc/trust.ts)
 * keeps that as the grant's `sub`. So whoever runs the second issuer (a partner's tenant, a test
 * realm) names a client or person `alpha` and acts as the first issuer's `alpha`: its tasks,
 * its calls in traces, its place in approvers' `principals` globs and in self-approval checks.
 * What must hold: two issuers' tokens with the same subject stand for two principals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OidcTrust } from '../../src/identity/oidc/trust.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';

const RESOURCE = 'https://bus.example/';

describe('two trusted OIDC issuers', () => {
  let corporate: TestIdp;
  let partner: TestIdp;
  let trust: OidcTrust;

  beforeAll(async () => {
    const clients = [{ id: 'alpha', claims: { groups: ['agents'] } }];
    corporate = await startIdp({ resources: [RESOURCE], clients });
    partner = await startIdp({ resources: [RESOURCE], clients });
    trust = new OidcTrust({
      issuers: [corporate.issuer, partner.issuer],
      audience: RESOURCE,
      mapping: {
        principal: { claim: 'client_id', prefix: 'agent:' },
        rules: [{ when: { groups: 'agents' }, profile: 'default' }],
      },
    });
    expect(await trust.start()).toEqual([]);
  });
  afterAll(async () => {
    trust?.stop();
    await corporate?.stop();
    await partner?.stop();
  });

  it("maps the partner's alpha to another principal than the corporate alpha", async () => {
    const ours = await trust.verify(await corporate.token('alpha'));
    const theirs = await trust.verify(await partner.token('alpha'));
    expect(ours.claims.iss).not.toBe(theirs.claims.iss);
    expect(theirs.claims.sub).not.toBe(ours.claims.sub);
  });
});
