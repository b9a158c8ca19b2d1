import { Algorithms, encode } from '@nats-io/jwt';
import { createAccount, createUser } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { decideByPolicy, globMatches } from '../../src/approvals/policy.js';
import { isInboxSubject, isReservedSubject } from '../../src/bus/subjects.js';
import { grantedRequest, sameValue } from '../../src/identity/authorize.js';
import { GrantCache } from '../../src/identity/cache.js';
import { GrantError } from '../../src/identity/errors.js';
import { IdentityGate, parseIssuers } from '../../src/identity/gate.js';
import { GrantedSession } from '../../src/identity/granted.js';
import { claimsHash, encodeGrant, MAX_GRANT_LENGTH, splitGrant } from '../../src/identity/jwt.js';
import { mintGrant, parseDuration } from '../../src/identity/mint.js';
import { nkeyPublicKey } from '../../src/identity/nkey.js';
import { GrantFailure, type VerifiedGrant } from '../../src/identity/types.js';
import { GrantVerifier } from '../../src/identity/verify.js';

const issuer = createAccount();
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const spec = { principal: 'agent:alpha', session: 'sess-1', resolve: { profile: 'default' }, ttlSeconds: 60 };

/** A verifier on a clock the test moves. */
function clocked(start = T0) {
  let now = start;
  const verifier = new GrantVerifier([issuer.getPublicKey()], { now: () => now });
  return { verifier, advance: (ms: number) => void (now += ms) };
}

/** The GrantError `fn` throws (anything else is thrown on). */
function refusal(fn: () => unknown): GrantError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GrantError) return err;
    throw err;
  }
  throw new Error('not refused');
}

function failureOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof GrantError) return err.failure;
    throw err;
  }
  return undefined;
}

describe('session grants (PROTOCOL 3.1)', () => {
  it('writes exactly what @nats-io/jwt encode writes for ASCII claims, and verifies grants it made', async () => {
    const unsigned = {
      sub: 'agent:alpha',
      exp: T0 / 1000 + 60,
      nats: { type: 'matrix-grant' as const, session: 'sess-1', resolve: { profile: 'default' } },
    };
    const mine = encodeGrant(unsigned, issuer, T0);
    const realNow = Date.now;
    Date.now = () => T0;
    let theirs: string;
    try {
      theirs = await encode(Algorithms.v2, structuredClone(unsigned) as never, issuer);
    } finally {
      Date.now = realNow;
    }
    expect(mine).toBe(theirs);
    const { header, claims } = splitGrant(mine);
    expect(header).toEqual({ typ: 'JWT', alg: 'ed25519-nkey' });
    expect(claims).toMatchObject({
      iss: issuer.getPublicKey(),
      sub: 'agent:alpha',
      iat: T0 / 1000,
      nats: { type: 'matrix-grant', version: 2, session: 'sess-1' },
    });
    expect(claims.jti).toBe(claimsHash(claims));
    expect(clocked().verifier.verify(theirs).claims.sub).toBe('agent:alpha');
  });

  it('writes principals past Latin-1 in UTF-8, where @nats-io/jwt encode throws', async () => {
    const grant = mintGrant(issuer, { ...spec, principal: 'user:Zoë 🙂' }, T0);
    expect(clocked().verifier.verify(grant).claims.sub).toBe('user:Zoë 🙂');
    await expect(
      encode(Algorithms.v2, { sub: 'user:🙂', nats: { type: 'matrix-grant' } } as never, issuer),
    ).rejects.toThrow();
  });

  it('checks a signature once: the second verify is the cached grant', () => {
    const { verifier } = clocked();
    const grant = mintGrant(issuer, spec, T0);
    const first = verifier.verify(grant);
    expect(verifier.verify(grant)).toBe(first);
    expect(verifier.cached).toBe(1);
  });

  it('never serves a grant past its exp, cached or not; nbf has 10 s of slack, exp none', () => {
    const { verifier, advance } = clocked();
    const grant = mintGrant(issuer, spec, T0);
    verifier.verify(grant);
    advance(59_999);
    expect(verifier.verify(grant).claims.sub).toBe('agent:alpha');
    advance(1);
    expect(failureOf(() => verifier.verify(grant))).toBe(GrantFailure.Expired);
    expect(verifier.cached).toBe(0);
    const soon = mintGrant(issuer, { ...spec, notBeforeSeconds: 5 }, T0);
    const later = mintGrant(issuer, { ...spec, notBeforeSeconds: 60 }, T0);
    const fresh = clocked().verifier;
    expect(fresh.verify(soon).claims.nbf).toBe(T0 / 1000 + 5);
    expect(failureOf(() => fresh.verify(later))).toBe(GrantFailure.NotYetValid);
  });

  it('names each failure: missing, malformed, untrusted issuer, bad signature, tampered', () => {
    const { verifier } = clocked();
    const grant = mintGrant(issuer, spec, T0);
    const [h, c, s] = grant.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const stranger = createAccount();
    const resigned = (body: unknown) =>
      `${h}.${b64(body)}.${Buffer.from(stranger.sign(Buffer.from(`${h}.${b64(body)}`))).toString('base64url')}`;
    expect(failureOf(() => verifier.verify(undefined))).toBe(GrantFailure.Missing);
    expect(failureOf(() => verifier.verify(''))).toBe(GrantFailure.Missing);
    for (const bad of [
      'x',
      'a.b',
      `${h}.${c}.${s}.x`,
      `${h}.${c}.!!`,
      `${b64({ typ: 'JWT', alg: 'HS256' })}.${c}.${s}`,
      `${h}.${b64([1])}.${s}`,
      `${h}.${c}.${s.slice(4)}`,
    ]) {
      expect(
        failureOf(() => verifier.verify(bad)),
        bad,
      ).toBe(GrantFailure.Malformed);
    }
    expect(failureOf(() => verifier.verify('a'.repeat(20_000)))).toBe(GrantFailure.Malformed);
    expect(failureOf(() => verifier.verify(mintGrant(stranger, spec, T0)))).toBe(GrantFailure.UntrustedIssuer);
    expect(failureOf(() => verifier.verify(resigned(claims)))).toBe(GrantFailure.BadSignature);
    expect(failureOf(() => verifier.verify(`${h}.${b64({ ...claims, sub: 'user:root-admin' })}.${s}`))).toBe(
      GrantFailure.Tampered,
    );
    expect(failureOf(() => verifier.verify(`${h}.${b64({ ...claims, exp: claims.exp + 86_400 })}.${s}`))).toBe(
      GrantFailure.Tampered,
    );
  });

  it('refuses well-signed claims that are not a grant', () => {
    const { verifier } = clocked();
    const exp = T0 / 1000 + 60;
    const nats = { type: 'matrix-grant' as const, session: 'sess-1', resolve: { profile: 'default' } };
    const bad = [
      { sub: 'agent:alpha', exp, nats: { ...nats, type: 'user' } },
      { sub: 'agent:alpha', nats },
      { sub: '', exp, nats },
      { sub: 'a\nb', exp, nats },
      { sub: 'agent:alpha', exp, nats: { ...nats, session: 'has space' } },
      { sub: 'agent:alpha', exp, nats: { ...nats, resolve: { worker: 'codex' } } },
      { sub: 'agent:alpha', exp, nats: { ...nats, resolve: { profile: 'default', extra: 1 } } },
      { sub: 'agent:alpha', exp, nats: { ...nats, readSessions: ['a,b'] } },
      { sub: 'agent:alpha', exp, nbf: 'soon', nats },
    ];
    for (const claims of bad) {
      expect(
        failureOf(() => verifier.verify(encodeGrant(claims as never, issuer, T0))),
        JSON.stringify(claims),
      ).toBe(GrantFailure.Malformed);
    }
    const presentation = encodeGrant(
      { sub: 'agent:alpha', exp, nats: { ...nats, resolve: { profile: 'default', format: 'openai' } as never } },
      issuer,
      T0,
    );
    expect(verifier.verify(presentation).claims.nats.resolve).toEqual({ profile: 'default' });
  });

  it('takes only public nkeys as issuers', () => {
    expect(() => nkeyPublicKey('not-a-key')).toThrow(/not a public nkey/);
    expect(() => nkeyPublicKey(new TextDecoder().decode(issuer.getSeed()))).toThrow(/not a public nkey/);
    expect(nkeyPublicKey(createUser().getPublicKey()).asymmetricKeyType).toBe('ed25519');
    expect(parseIssuers(' A1 , ,A2,')).toEqual(['A1', 'A2']);
    expect(() => IdentityGate.forIssuers(['AXXX'])).toThrow(/not a public nkey/);
  });
});

describe('the verified-grant cache', () => {
  const entry = (i: number, expiresAtMs = T0 + 60_000): VerifiedGrant => ({
    text: `grant-${i}-${'x'.repeat(500)}`,
    claims: {} as never,
    expiresAtMs,
  });

  it('stays within its bound in bytes, dropping the oldest first', () => {
    const cache = new GrantCache(20_000);
    for (let i = 0; i < 100; i++) cache.set(entry(i));
    expect(cache.bytes).toBeLessThanOrEqual(20_000);
    expect(cache.size).toBeGreaterThan(5);
    expect(cache.get(entry(99).text, T0)).toBeDefined();
    expect(cache.get(entry(0).text, T0)).toBeUndefined();
  });

  it('does not serve the grant it found last once that grant is evicted', () => {
    const cache = new GrantCache(20_000);
    cache.set(entry(0));
    expect(cache.get(entry(0).text, T0)).toBeDefined();
    for (let i = 1; i < 100; i++) cache.set(entry(i));
    expect(cache.get(entry(0).text, T0)).toBeUndefined();
  });

  it('drops an entry at its expiry', () => {
    const cache = new GrantCache();
    cache.set(entry(1, T0 + 10));
    expect(cache.get(entry(1).text, T0 + 9)).toBeDefined();
    expect(cache.get(entry(1).text, T0 + 10)).toBeUndefined();
    expect(cache.bytes).toBe(0);
  });
});

describe('a request body against its grant', () => {
  const grant = clocked().verifier.verify(
    mintGrant(
      issuer,
      {
        ...spec,
        resolve: {
          profile: 'propose',
          worker: 'codex',
          skills: [{ name: 'review', toolContextRefs: ['repo-coding'] }],
        },
      },
      T0,
    ),
  );

  it('takes the grant’s authority for what the body leaves out, and the body’s presentation', () => {
    const request = grantedRequest(grant, { profile: 'propose', format: 'openai' });
    expect(request).toEqual({
      profile: 'propose',
      worker: 'codex',
      skills: [{ name: 'review', toolContextRefs: ['repo-coding'] }],
      format: 'openai',
    });
    expect(grantedRequest(grant, { profile: 'propose', worker: 'codex', format: 'openai' })).toBe(request);
    expect(grantedRequest(grant, { profile: 'propose' })).not.toBe(request);
  });

  it('refuses every field that asks for other authority', () => {
    const asks = [
      { profile: 'edit' },
      { profile: 'propose', worker: 'claude-code' },
      { profile: 'propose', skills: [{ name: 'review', toolContextRefs: ['repo-coding', 'actor-edit'] }] },
      { profile: 'propose', skills: [] },
      { profile: 'propose', toolContextRefs: ['actor-edit'] },
      { profile: 'propose', requires: ['actor.edit'] },
      { profile: 'propose', environment: { repoRoot: '/' } },
    ];
    for (const body of asks)
      expect(
        failureOf(() => grantedRequest(grant, body)),
        JSON.stringify(body),
      ).toBe(GrantFailure.Authority);
  });

  it('compares JSON values deeply, arrays in order', () => {
    expect(sameValue({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toBe(true);
    expect(sameValue(['a', 'b'], ['b', 'a'])).toBe(false);
    expect(sameValue({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(sameValue({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(sameValue([], {})).toBe(false);
  });
});

describe('a library session under a grant', () => {
  it('takes the grant’s authority, principal and session, and checks the grant when given a verifier', () => {
    const grant = mintGrant(issuer, { ...spec, ttlSeconds: 3600 });
    const session = new GrantedSession(grant, { format: 'openai' });
    expect(session.request).toEqual({ profile: 'default', format: 'openai' });
    expect(session.context({ principal: 'user:root-admin' })).toEqual({
      principal: 'agent:alpha',
      session: 'sess-1',
      grant,
    });
    const forged = mintGrant(createAccount(), { ...spec, ttlSeconds: 3600 });
    expect(new GrantedSession(forged).principal).toBe('agent:alpha');
    expect(failureOf(() => new GrantedSession(forged, {}, new GrantVerifier([issuer.getPublicKey()])))).toBe(
      GrantFailure.UntrustedIssuer,
    );
  });
});

describe('the identity gate', () => {
  it('trusts callers without issuers, and says so', () => {
    const gate = IdentityGate.forIssuers([]);
    const ctx = { principal: 'user:root-admin', session: 'victim-42' };
    expect(gate.admit({ profile: 'edit' }, ctx)).toEqual({ request: { profile: 'edit' }, ctx });
    expect(gate.describe()).toBe('identity: trusting callers (development)');
  });

  it('replaces principal, session and read sessions with the grant’s', () => {
    const gate = IdentityGate.forIssuers([issuer.getPublicKey()]);
    expect(gate.describe()).toBe(`identity: grants from 1 issuer(s): ${issuer.getPublicKey()}`);
    const grant = mintGrant(issuer, { ...spec, readSessions: ['s-2', 's-3'], ttlSeconds: 3600 });
    const admitted = gate.admit(
      { profile: 'default' },
      { grant, principal: 'user:root-admin', session: 'victim-42', readSessions: 'victim-42', traceparent: 't' },
    );
    expect(admitted.ctx).toEqual({
      traceparent: 't',
      deadline: undefined,
      principal: 'agent:alpha',
      session: 'sess-1',
      readSessions: 's-2,s-3',
      grant,
    });
    expect(failureOf(() => gate.admit({ profile: 'default' }, { principal: 'agent:alpha' }))).toBe(
      GrantFailure.Missing,
    );
  });
});

describe('whom a refused grant names', () => {
  it('names the signed sub of an expired or not yet valid grant, and nothing of one whose signature fails', () => {
    const { verifier, advance } = clocked();
    const grant = mintGrant(issuer, spec, T0);
    const early = mintGrant(issuer, { ...spec, notBeforeSeconds: 600 }, T0);
    expect(refusal(() => verifier.verify(early))).toMatchObject({
      failure: GrantFailure.NotYetValid,
      subject: 'agent:alpha',
      session: 'sess-1',
    });
    advance(61_000);
    expect(refusal(() => verifier.verify(grant))).toMatchObject({
      failure: GrantFailure.Expired,
      subject: 'agent:alpha',
      session: 'sess-1',
    });
    const [h, c] = grant.split('.') as [string, string];
    const stranger = createAccount();
    const resigned = `${h}.${c}.${Buffer.from(stranger.sign(Buffer.from(`${h}.${c}`))).toString('base64url')}`;
    for (const unsigned of [resigned, mintGrant(stranger, spec, T0 + 61_000), 'x', undefined]) {
      expect(refusal(() => verifier.verify(unsigned))).toMatchObject({ subject: undefined, session: undefined });
    }
  });

  it('names the valid grant of a body that asks for other authority, and finds the holder of a valid grant only', () => {
    const gate = IdentityGate.forIssuers([issuer.getPublicKey()]);
    const grant = mintGrant(issuer, { ...spec, ttlSeconds: 3600 });
    expect(refusal(() => gate.admit({ profile: 'admin' }, { grant }))).toMatchObject({
      failure: GrantFailure.Authority,
      subject: 'agent:alpha',
      session: 'sess-1',
    });
    expect(gate.holder(grant)).toEqual({ principal: 'agent:alpha', session: 'sess-1' });
    expect(gate.holder(mintGrant(issuer, spec, Date.now() - 3_600_000))).toBeUndefined();
    expect(gate.holder(undefined)).toBeUndefined();
    expect(IdentityGate.trustingCallers().holder(grant)).toBeUndefined();
  });
});

describe('grants built to break the verifier', () => {
  it('refuses large claims no trusted issuer signed unread, and small ones of a shape no grant has as malformed', () => {
    const unsigned = (claims: unknown) =>
      [JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }), JSON.stringify(claims)]
        .map((p) => Buffer.from(p).toString('base64url'))
        .concat(Buffer.alloc(64).toString('base64url'))
        .join('.');
    const wide = (keys: number) => {
      const claims: Record<string, unknown> = { iss: issuer.getPublicKey(), jti: 'x', sub: 'a' };
      for (let i = 0; i < keys; i++) claims[`k${i}`] = 0;
      return claims;
    };
    const verifier = new GrantVerifier([issuer.getPublicKey()]);
    // 1,300 keys in one object (16 KiB): parsed, walked and hashed, ~1 ms a refusal; refused unread.
    const large = unsigned(wide(1_300));
    expect(large.length).toBeLessThan(MAX_GRANT_LENGTH);
    const err = refusal(() => verifier.verify(large));
    expect(err).toMatchObject({ failure: GrantFailure.BadSignature });
    expect(err.message).toContain('no issuer this service trusts signed it');
    // Small claims are read to say why: wider than a grant's objects are, or changed after signing.
    const small = refusal(() => verifier.verify(unsigned(wide(100))));
    expect(small).toMatchObject({ failure: GrantFailure.Malformed });
    expect(small.message).toContain('its claims hold a map of more than 32 entries');
    expect(refusal(() => verifier.verify(unsigned(wide(29))))).toMatchObject({ failure: GrantFailure.Tampered });
    // With more issuers than are tried first, the claims name the one key tried, as before.
    const others = Array.from({ length: 4 }, () => createAccount().getPublicKey());
    const many = refusal(() => new GrantVerifier([issuer.getPublicKey(), ...others]).verify(large));
    expect(many).toMatchObject({ failure: GrantFailure.Malformed });
  });

  it('refuses claims nested deeper than a grant has, and tells the refusal to the audit', () => {
    // A trusted issuer's name, 64 zero bytes for a signature, and claims an array 6,000 deep.
    // Hashing such claims to tell tampering from a bad signature would overflow the stack (a
    // RangeError, audited as no refusal): claims longer than CLASSIFIED_CLAIMS_CHARS that no
    // trusted issuer signed are refused unread. Claims 1,000 deep are short enough to be read,
    // and are malformed (a grant nests at most 16 levels).
    for (const [levels, failure, words] of [
      [6_000, GrantFailure.BadSignature, /no issuer this service trusts signed it/],
      [1_000, GrantFailure.Malformed, /nest deeper than 16 levels/],
    ] as const) {
      const deep = `${'['.repeat(levels)}${']'.repeat(levels)}`;
      const claims = `{"iss":"${issuer.getPublicKey()}","jti":"x","sub":"a","deep":${deep}}`;
      const grant = [JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }), claims]
        .map((p) => Buffer.from(p).toString('base64url'))
        .join('.');
      const text = `${grant}.${Buffer.alloc(64).toString('base64url')}`;
      const gate = IdentityGate.forIssuers([issuer.getPublicKey()]);
      const heard: GrantError[] = [];
      expect(
        refusal(() => gate.admit({ profile: 'default' }, { grant: text }, (err) => heard.push(err))),
      ).toMatchObject({ failure });
      expect(heard.map((e) => e.failure)).toEqual([failure]);
      expect(heard[0]?.message).toMatch(words);
    }
  });

  it('refuses, and tells, whatever else goes wrong while admitting a grant: it fails closed', () => {
    const gate = IdentityGate.forIssuers([issuer.getPublicKey()]);
    const grant = mintGrant(issuer, { ...spec, ttlSeconds: 3600 });
    const heard: GrantError[] = [];
    // A body whose authority fields throw when read: not a GrantError, still a refusal.
    const hostile = Object.defineProperty({}, 'profile', {
      enumerable: true,
      get: () => {
        throw new RangeError('boom');
      },
    });
    expect(refusal(() => gate.admit(hostile as never, { grant }, (err) => heard.push(err)))).toMatchObject({
      failure: GrantFailure.Malformed,
    });
    expect(heard).toHaveLength(1);
  });
});

describe('approval rules on the principal', () => {
  it('match globs: * any run, ? one character, the rest literal', () => {
    expect(globMatches('user:ops-*', 'user:ops-ann')).toBe(true);
    expect(globMatches('user:ops-*', 'user:opsann')).toBe(false);
    expect(globMatches('user:ops-*', 'xuser:ops-ann')).toBe(false);
    expect(globMatches('user:ops-*', undefined)).toBe(false);
    expect(globMatches('agent.?', 'agent.a')).toBe(true);
    expect(globMatches('agent.?', 'agentxa')).toBe(false);
    expect(globMatches('a+(b)', 'a+(b)')).toBe(true);
  });

  it('let only user:ops-* matrix_invoke $delete', () => {
    const policy = {
      rules: [
        { tool: 'matrix_invoke', op: '$delete', principal: 'user:ops-*', decision: 'allow' as const },
        { tool: 'matrix_invoke', op: '$delete', decision: 'deny' as const },
      ],
      default: 'ask' as const,
    };
    const request = { callId: '1', tool: 'matrix_invoke', target: 'app.notes', op: '$delete', arguments: {} };
    expect(decideByPolicy(policy, { ...request, principal: 'user:ops-ann' }).decision).toBe('allow');
    expect(decideByPolicy(policy, { ...request, principal: 'agent:alpha' }).decision).toBe('deny');
    expect(decideByPolicy(policy, request).decision).toBe('deny');
  });
});

describe('grant durations', () => {
  it('reads seconds, minutes, hours and days', () => {
    expect([
      parseDuration('90'),
      parseDuration('90s'),
      parseDuration('15m'),
      parseDuration('1h'),
      parseDuration('7d'),
    ]).toEqual([90, 90, 900, 3600, 604_800]);
    expect(() => parseDuration('0')).toThrow();
    expect(() => parseDuration('1w')).toThrow(/not a duration/);
  });
});

describe('reply subjects', () => {
  it('are inboxes only: the default prefix, per-user ones, and an import’s reply subjects', () => {
    for (const inbox of ['_INBOX.abc', '_INBOX.abc.7', '_INBOX_agent.abc.1', '_INBOX_operator.x', '_R_.Abc.xYz'])
      expect(isInboxSubject(inbox), inbox).toBe(true);
    for (const other of [
      '$KV.matrix-sessions.victim',
      '$JS.API.STREAM.DELETE.KV_x',
      'app.spy.$run',
      'system.tools.events.changed',
      '_INBOX',
      '_INBOX.',
      'x._INBOX.y',
      '_R_',
      '_R_x.y',
      '_R_.',
    ]) {
      expect(isInboxSubject(other), other).toBe(false);
    }
  });

  it('per-user inboxes are reserved like _INBOX.>: no tool may target them', () => {
    expect(isReservedSubject('_INBOX_operator.abc.$x')).toBe(true);
    expect(isReservedSubject('_INBOX.abc.$x')).toBe(true);
    expect(isReservedSubject('app.inbox.$x')).toBe(false);
    expect(isReservedSubject('_R_.abc.$x')).toBe(true);
  });
});
