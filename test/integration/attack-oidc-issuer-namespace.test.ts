/**
 * Attack: one trusted issuer speaking for another's principals (docs/identity-oidc.md,
 * `--trust-oidc` takes several issuers). A `sub` (or `client_id`) is unique only within its
 * issuer (OpenID Connect Core 2, "sub"), but `mapClaims` (src/identity/oidc/mapping.ts) makes the
 * principal `<prefix><claim>` whatever the issuer, and `grantOf` (src/identity/oidc/trust.ts)
 * keeps that as the grant's `sub`. So whoever runs the second issuer (a partner's tenant, a test
 * realm) names a client or person `alpha` and acts as the first issuer's `alpha`: its tasks,
 * its calls in traces, its place in approvers' `principals` globs and in self-approval checks.
 * What must hold: two issuers' tokens with the same subject stand for two principals. So each
 * issuer has its own principal prefix (the mapping's `issuers`), and a mapping that would let two
 * issuers share principals is refused when the trust is made (the service does not start).
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
        issuers: { [partner.issuer]: { principal: { claim: 'client_id', prefix: 'partner:' } } },
      },
    });
    expect(await trust.start()).toEqual([]);
  });
  afterAll(async () => {
    trust?.stop();
    await corporate?.stop();
    await partner?.stop();
  });

  it('refuses one principal namespace for two issuers', () => {
    const shared = {
      principal: { claim: 'client_id', prefix: 'agent:' },
      rules: [{ when: { groups: 'agents' }, profile: 'default' }],
    };
    const issuers = [corporate.issuer, partner.issuer];
    expect(() => new OidcTrust({ issuers, audience: RESOURCE, mapping: shared })).toThrow(/own principal prefix/);
    // One prefix beginning the other: the corporate p:alpha would be the partner's alpha.
    const nested = { ...shared, issuers: { [partner.issuer]: { principal: { prefix: 'agent:p:' } } } };
    expect(() => new OidcTrust({ issuers, audience: RESOURCE, mapping: nested })).toThrow(/would share principals/);
  });

  it("maps the partner's alpha to another principal than the corporate alpha", async () => {
    const ours = await trust.verify(await corporate.token('alpha'));
    const theirs = await trust.verify(await partner.token('alpha'));
    expect(ours.claims.iss).not.toBe(theirs.claims.iss);
    expect(theirs.claims.sub).not.toBe(ours.claims.sub);
    expect([ours.claims.sub, theirs.claims.sub]).toEqual(['agent:alpha', 'partner:alpha']);
  });
});
