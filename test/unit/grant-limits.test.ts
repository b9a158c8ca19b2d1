import { createAccount } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import { Revocations, revocationOf } from '../../src/identity/revocations.js';
import { GrantVerifier } from '../../src/identity/verify.js';

const issuer = createAccount();
const now = Date.UTC(2026, 0, 1);
const spec = { principal: 'agent:a', session: 's-1', resolve: { profile: 'default' }, ttlSeconds: 3600 };

/** The failure a verifier at `now` names for a grant, or 'ok'. */
function failure(grant: string, verifier: GrantVerifier): string {
  try {
    verifier.verify(grant);
    return 'ok';
  } catch (err) {
    return String((err as { details?: { grant?: string } }).details?.grant);
  }
}

describe('the limits of a grant', () => {
  it('refuses one that lives longer than the maximum, from its iat or from now', () => {
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now, maxTtlSeconds: 3600 });
    expect(failure(mintGrant(issuer, spec, now), verifier)).toBe('ok');
    expect(failure(mintGrant(issuer, { ...spec, ttlSeconds: 3601 }, now), verifier)).toBe('too_long');
    // Issued "later" than now, to stretch its life past the maximum from now.
    expect(failure(mintGrant(issuer, spec, now + 600_000), verifier)).not.toBe('ok');
  });

  it('refuses a grant issued more than the 10 s of slack ahead of its clock as not yet valid', () => {
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now });
    expect(failure(mintGrant(issuer, spec, now + 10_000), verifier)).toBe('ok');
    expect(failure(mintGrant(issuer, spec, now + 11_000), verifier)).toBe('not_yet_valid');
  });

  it('lets no grant from a fast issuer clock outlive a revocation of its principal', () => {
    const revocations = new Revocations(() => now);
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now, revocations });
    // Minted before the revocation, by an issuer whose clock runs 60 s ahead.
    const fast = mintGrant(issuer, spec, now + 60_000);
    revocations.apply('sub.1', revocationOf({ sub: spec.principal }, now, 86_400_000));
    expect(failure(fast, verifier)).not.toBe('ok');
  });

  it('revokes every spelling of a principal a reader takes for it', () => {
    const revocations = new Revocations(() => now);
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now, revocations });
    const spellings = ['agent:a', 'Agent:A', ' agent:a', 'agent:\u0430', 'agent:\u0251'];
    const grants = spellings.map((principal) => mintGrant(issuer, { ...spec, principal }, now - 5_000));
    revocations.apply('sub.1', revocationOf({ sub: 'agent:a' }, now, 86_400_000));
    for (const [i, grant] of grants.entries()) expect(failure(grant, verifier), spellings[i]).toBe('revoked');
    expect(failure(mintGrant(issuer, { ...spec, principal: 'agent:b' }, now - 5_000), verifier)).toBe('ok');
  });

  it('lets no grant issued within the clock slack of a revocation of its principal survive it', () => {
    const revocations = new Revocations(() => now);
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now, revocations });
    // Issued just before the revocation by a clock 10 s ahead: its iat is past the revocation,
    // inside the slack a valid iat may have.
    const ahead = mintGrant(issuer, spec, now + 10_000);
    expect(failure(ahead, verifier)).toBe('ok');
    revocations.apply('sub.1', revocationOf({ sub: spec.principal }, now, 86_400_000));
    expect(failure(ahead, verifier)).toBe('revoked');
    // Issued after the revocation and past the slack: a new grant of the principal is good.
    const later = new GrantVerifier([issuer.getPublicKey()], { now: () => now + 12_000, revocations });
    expect(failure(mintGrant(issuer, spec, now + 11_000), later)).toBe('ok');
  });

  it('accepts one text per grant: a signature with its spare bits set is malformed', () => {
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now });
    const grant = mintGrant(issuer, spec, now);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(grant.at(-1) as string);
    // The 16 characters that decode to the same last 2 bits of the signature's final byte.
    const variants = [...alphabet].filter((_, i) => i >> 4 === last >> 4).map((c) => grant.slice(0, -1) + c);
    expect(variants).toHaveLength(16);
    expect(variants.filter((text) => failure(text, verifier) === 'ok')).toEqual([grant]);
    expect(failure(variants.find((text) => text !== grant) as string, verifier)).toBe('malformed');
  });

  it('holds a grant to the audience where one is named, a string or one of a list', () => {
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now, audience: 'prod' });
    expect(failure(mintGrant(issuer, { ...spec, audience: 'prod' }, now), verifier)).toBe('ok');
    expect(failure(mintGrant(issuer, { ...spec, audience: 'staging' }, now), verifier)).toBe('audience_mismatch');
    expect(failure(mintGrant(issuer, spec, now), verifier)).toBe('audience_mismatch');
    // A service that names no audience takes only grants that name none: one for staging is not good in prod.
    const open = new GrantVerifier([issuer.getPublicKey()], { now: () => now });
    expect(failure(mintGrant(issuer, { ...spec, audience: 'staging' }, now), open)).toBe('audience_mismatch');
    expect(failure(mintGrant(issuer, spec, now), open)).toBe('ok');
  });

  it('warns at start where issuers are trusted without an audience, and only there', () => {
    expect(IdentityGate.forIssuers([issuer.getPublicKey()]).warning()).toMatch(/no audience.*MATRIX_GRANT_AUDIENCE/);
    expect(IdentityGate.forIssuers([issuer.getPublicKey()], { audience: 'prod' }).warning()).toBeUndefined();
    expect(IdentityGate.trustingCallers().warning()).toBeUndefined();
  });

  it('refuses an inbox that is no inbox prefix as malformed', () => {
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now });
    expect(failure(mintGrant(issuer, { ...spec, inbox: '_INBOX_agent' }, now), verifier)).toBe('ok');
    for (const inbox of ['_INBOX.>', '_INBOX_*', '', 'a..b', 'a b'])
      expect(failure(mintGrant(issuer, { ...spec, inbox }, now), verifier), inbox).toBe('malformed');
  });

  it('refuses a nats.user or nats.account that is no NATS name, and an account without a user, as malformed', () => {
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now });
    expect(failure(mintGrant(issuer, { ...spec, user: 'agent-2', account: 'AGENTS' }, now), verifier)).toBe('ok');
    expect(
      failure(
        mintGrant(issuer, { ...spec, user: 'UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4' }, now),
        verifier,
      ),
    ).toBe('ok');
    for (const user of ['', 'a b', 'a"b', 'x'.repeat(129), 'agent\n'])
      expect(failure(mintGrant(issuer, { ...spec, user }, now), verifier), JSON.stringify(user)).toBe('malformed');
    expect(failure(mintGrant(issuer, { ...spec, user: 'agent', account: 'A B' }, now), verifier)).toBe('malformed');
    expect(failure(mintGrant(issuer, { ...spec, account: 'AGENTS' }, now), verifier)).toBe('malformed');
  });

  it('refuses a revoked grant, cached or not; by principal only those issued before the revocation', () => {
    let clock = now;
    const revocations = new Revocations(() => clock);
    const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => clock, revocations });
    const first = mintGrant(issuer, spec, now);
    const second = mintGrant(issuer, { ...spec, session: 's-2' }, now);
    expect(failure(first, verifier)).toBe('ok');
    expect(verifier.cached).toBe(1);
    const jti = verifier.verify(first).claims.jti;
    revocations.apply('jti.1', revocationOf({ jti }, now, 86_400_000));
    expect(verifier.cached).toBe(0);
    expect(failure(first, verifier)).toBe('revoked');
    expect(failure(second, verifier)).toBe('ok');
    revocations.apply('sub.1', revocationOf({ sub: 'agent:a', reason: 'left' }, now + 500, 86_400_000));
    expect(failure(second, verifier)).toBe('revoked');
    // Issued after the revocation: refused within the 10 s slack an iat may run ahead, good past it.
    clock = now + 2_000;
    expect(failure(mintGrant(issuer, spec, clock), verifier)).toBe('revoked');
    clock = now + 11_000;
    expect(failure(mintGrant(issuer, spec, clock), verifier)).toBe('ok');
    // A revocation past its end refuses nothing more, and is swept.
    clock = now + 86_401_000;
    expect(revocations.expired(clock).sort()).toEqual(['jti.1', 'sub.1']);
  });

  it('lasts at most the longest grant lifetime, never into the past, and names one of jti and sub', () => {
    expect(revocationOf({ sub: 'a' }, now, 1000).until).toBe(now + 1000);
    expect(revocationOf({ sub: 'a', until: new Date(now + 500).toISOString() }, now, 1000).until).toBe(now + 500);
    expect(revocationOf({ sub: 'a', until: new Date(now + 5000).toISOString() }, now, 1000).until).toBe(now + 1000);
    expect(() => revocationOf({ sub: 'a', until: new Date(now - 1).toISOString() }, now, 1000)).toThrow(/future/);
    expect(() => revocationOf({}, now, 1000)).toThrow(/exactly one/);
    expect(() => revocationOf({ jti: 'x', sub: 'a' }, now, 1000)).toThrow(/exactly one/);
  });
});
