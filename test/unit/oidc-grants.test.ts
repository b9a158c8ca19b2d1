/**
 * OIDC access tokens as grants (PROTOCOL 14), against a real OpenID Provider (oidc-provider) on
 * loopback: a token of a trusted issuer, for this service's audience, maps to the session its
 * claims say; every other token is refused with the failure that names why, and the issuer's
 * keys follow a rotation and outlive the issuer being unreachable.
 */
import { createPublicKey, createSecretKey } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrantError } from '../../src/identity/errors.js';
import type { ClaimsMapping } from '../../src/identity/oidc/mapping.js';
import { OidcTrust } from '../../src/identity/oidc/trust.js';
import { Revocations, revocationOf } from '../../src/identity/revocations.js';
import { GrantVerifier } from '../../src/identity/verify.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';

const RESOURCE = 'https://bus.example/';
const mapping: ClaimsMapping = {
  principal: { claim: 'client_id', prefix: 'agent:' },
  rules: [
    { when: { groups: 'approvers' }, profile: 'default', approve: { tools: ['*'] } },
    { when: { groups: 'agents', scope: 'tools' }, profile: 'default', toolContextRefs: ['actor-readonly'] },
  ],
};

describe('OIDC access tokens as grants', () => {
  let idp: TestIdp;
  let other: TestIdp;
  let clock = Date.now();
  let trust: OidcTrust;
  const revocations = new Revocations(() => clock);
  let verifier: GrantVerifier;
  /** The failure a token is refused with, or 'ok'. */
  const verdict = async (token: string, by = verifier) => {
    try {
      await by.verifyAsync(token);
      return 'ok';
    } catch (err) {
      if (err instanceof GrantError) return err.failure;
      throw err;
    }
  };

  beforeAll(async () => {
    const clients = [
      { id: 'alpha', claims: { groups: ['agents'] } },
      { id: 'ops', claims: { groups: ['approvers'] } },
      { id: 'stranger', claims: { groups: ['visitors'] } },
    ];
    idp = await startIdp({ resources: [RESOURCE, 'https://elsewhere.example/'], clients });
    other = await startIdp({ resources: [RESOURCE], clients });
    trust = new OidcTrust({
      issuers: [idp.issuer],
      audience: RESOURCE,
      mapping,
      issuerOptions: { now: () => clock, minRefetchMs: 0 },
    });
    expect(await trust.start()).toEqual([]);
    verifier = new GrantVerifier([], { oidc: trust, revocations, now: () => clock });
  });
  afterAll(async () => {
    trust?.stop();
    await idp?.stop();
    await other?.stop();
  });

  it('maps a trusted token to the session, principal and authority its claims give', async () => {
    const token = await idp.token('alpha', { scope: 'tools' });
    expect(verifier.needsAsync(token)).toBe(true);
    const grant = await verifier.verifyAsync(token);
    expect(grant.claims).toMatchObject({
      iss: idp.issuer,
      sub: 'agent:alpha',
      jti: decodeJwt(token).jti,
      nats: { session: decodeJwt(token).jti, resolve: { profile: 'default', toolContextRefs: ['actor-readonly'] } },
    });
    // Cached: the synchronous checks of every later op find it.
    expect(verifier.needsAsync(token)).toBe(false);
    expect(verifier.verify(token).claims.sub).toBe('agent:alpha');
    const approver = await verifier.verifyAsync(await idp.token('ops'));
    expect(approver.claims.nats.approve).toEqual({ tools: ['*'] });
  });

  it('refuses a token no rule maps, for another resource, or of an issuer it does not trust', async () => {
    expect(await verdict(await idp.token('stranger', { scope: 'tools' }))).toBe('authority_mismatch');
    expect(await verdict(await idp.token('alpha', { scope: 'tools', resource: 'https://elsewhere.example/' }))).toBe(
      'audience_mismatch',
    );
    const foreign = await other.token('alpha', { scope: 'tools' });
    expect(verifier.needsAsync(foreign)).toBe(false);
    expect(await verdict(foreign)).toBe('untrusted_issuer');
  });

  it('refuses an expired token, and one issued ahead of the clock, with 10 s of slack', async () => {
    const token = await idp.token('alpha', { scope: 'tools' });
    const { iat, exp } = decodeJwt(token) as { iat: number; exp: number };
    const at = (ms: number) => new GrantVerifier([], { oidc: trust, now: () => ms });
    const saved = clock;
    try {
      clock = exp * 1000 + 11_000;
      expect(await verdict(token, at(clock))).toBe('expired');
      clock = iat * 1000 - 60_000;
      expect(await verdict(token, at(clock))).toBe('not_yet_valid');
      clock = exp * 1000 + 5_000;
      expect(await verdict(token, at(clock))).toBe('ok');
    } finally {
      clock = saved;
    }
  });

  it('refuses alg none, an HMAC signed with the public key, and a key not in the JWKS', async () => {
    const real = await idp.token('alpha', { scope: 'tools' });
    const [, payload] = real.split('.');
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    expect(await verdict(`${b64({ alg: 'none', typ: 'at+jwt' })}.${payload}.`)).toBe('bad_signature');

    const jwks = (await (await fetch(`${idp.issuer}/jwks`)).json()) as { keys: Array<Record<string, unknown>> };
    const publicJwk = jwks.keys.find((k) => k.kid === decodeProtectedHeader(real).kid);
    const pem = createPublicKey({ key: publicJwk as never, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
    const claims = decodeJwt(real);
    const hmac = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', kid: publicJwk?.kid as string })
      .sign(createSecretKey(Buffer.from(pem)));
    expect(await verdict(hmac)).toBe('bad_signature');

    const { privateKey } = await generateKeyPair('ES256');
    for (const kid of [publicJwk?.kid as string, 'not-in-the-jwks']) {
      const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid }).sign(privateKey);
      expect(await verdict(forged), kid).toBe('bad_signature');
    }
  });

  it('refuses a token after its revocation by jti, and every token of the principal after one by sub', async () => {
    const token = await idp.token('alpha', { scope: 'tools' });
    expect(await verdict(token)).toBe('ok');
    revocations.apply('jti.1', revocationOf({ jti: decodeJwt(token).jti as string }, clock, 3_600_000));
    expect(await verdict(token)).toBe('revoked');
    const again = await idp.token('alpha', { scope: 'tools' });
    expect(await verdict(again)).toBe('ok');
    revocations.apply('sub.1', revocationOf({ sub: 'agent:alpha' }, clock + 60_000, 3_600_000));
    expect(await verdict(await idp.token('alpha', { scope: 'tools' }))).toBe('revoked');
    revocations.remove('sub.1');
  });

  it('picks up a rotated key by its new kid, and keeps verifying while the issuer is down', async () => {
    const before = await idp.token('alpha', { scope: 'tools' });
    const kid = await idp.rotate();
    const rotated = await idp.token('alpha', { scope: 'tools' });
    expect(decodeProtectedHeader(rotated).kid).toBe(kid);
    expect(await verdict(rotated)).toBe('ok');
    const unseen = await idp.token('alpha', { scope: 'tools' });
    await idp.stop();
    try {
      expect(await verdict(unseen)).toBe('ok');
      expect(await verdict(before)).toBe('ok');
    } finally {
      await idp.start();
    }
  });
});
