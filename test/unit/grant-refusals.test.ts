/**
 * A refused grant text is refused again from memory: a grant from a trusted issuer whose
 * signature fails is no verified grant to cache, and without this every copy of it pays the
 * decode, the parse and the ed25519 check again. The memory is bounded in bytes, its entries
 * lapse, and failures that time cures are never held.
 */
import { createAccount } from '@nats-io/nkeys';
import { describe, expect, it, vi } from 'vitest';
import { GrantError } from '../../src/identity/errors.js';
import { mintGrant } from '../../src/identity/mint.js';
import { GrantVerifier } from '../../src/identity/verify.js';

const signatureChecks = vi.hoisted(() => ({ count: 0 }));
vi.mock('node:crypto', async (importOriginal) => {
  const crypto = await importOriginal<typeof import('node:crypto')>();
  const verify = (...args: Parameters<typeof crypto.verify>) => {
    signatureChecks.count++;
    return crypto.verify(...args);
  };
  return { ...crypto, default: { ...crypto, verify }, verify };
});

const issuer = createAccount();
const T0 = Date.UTC(2026, 0, 1);
const spec = { principal: 'agent:a', session: 's-1', resolve: { profile: 'default' }, ttlSeconds: 3600 };

/** A grant of the issuer's whose claims were changed after signing: `tampered`. */
const signed = mintGrant(issuer, spec, T0);
function tampered(pad: string): string {
  const [header, claims, signature] = signed.split('.') as [string, string, string];
  const changed = { ...JSON.parse(Buffer.from(claims, 'base64url').toString()), pad };
  return `${header}.${Buffer.from(JSON.stringify(changed)).toString('base64url')}.${signature}`;
}

/** The GrantError a verify of `text` throws. */
function refusalOf(verifier: GrantVerifier, text: string): GrantError {
  try {
    verifier.verify(text);
  } catch (err) {
    if (err instanceof GrantError) return err;
    throw err;
  }
  throw new Error('the grant was accepted');
}

function clocked(options: ConstructorParameters<typeof GrantVerifier>[1] = {}) {
  let now = T0;
  const verifier = new GrantVerifier([issuer.getPublicKey()], { ...options, now: () => now });
  return { verifier, advance: (ms: number) => void (now += ms) };
}

describe('refused grant texts', () => {
  it('checks the signature of a tampered 16 KiB grant once, however often it is sent', () => {
    const { verifier } = clocked();
    const text = tampered('x'.repeat(11_500));
    const before = signatureChecks.count;
    const first = refusalOf(verifier, text);
    for (let i = 0; i < 100; i++) expect(refusalOf(verifier, text)).toMatchObject(first);
    // Claims this long that no trusted issuer signed are not read to tell tampering apart.
    expect(first.failure).toBe('bad_signature');
    expect(signatureChecks.count - before).toBe(1);
    expect(verifier.refusedCached).toBe(1);
  });

  it('refuses without capturing a stack: a refusal is no fault to trace', () => {
    const limit = Error.stackTraceLimit;
    const err = refusalOf(clocked().verifier, tampered('z'));
    expect(err.stack ?? '').not.toMatch(/\n\s+at /);
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('x').stack).toMatch(/\n\s+at /);
  });

  it('checks a refused text again once its entry lapses', () => {
    const { verifier, advance } = clocked({ refusalTtlMs: 1000 });
    const text = tampered('y');
    const before = signatureChecks.count;
    refusalOf(verifier, text);
    advance(999);
    refusalOf(verifier, text);
    expect(signatureChecks.count - before).toBe(1);
    advance(1);
    expect(refusalOf(verifier, text).failure).toBe('tampered');
    expect(signatureChecks.count - before).toBe(2);
  });

  it('holds refusals within its bound in bytes, the oldest leaving first', () => {
    const { verifier } = clocked({ refusalCacheBytes: 4096 });
    for (let i = 0; i < 100; i++) refusalOf(verifier, tampered(`pad-${i}`));
    expect(verifier.refusedCached).toBeGreaterThan(0);
    expect(verifier.refusedCached).toBeLessThan(100);
    const before = signatureChecks.count;
    refusalOf(verifier, tampered('pad-99'));
    expect(signatureChecks.count - before).toBe(0);
    refusalOf(verifier, tampered('pad-0'));
    expect(signatureChecks.count - before).toBe(1);
  });

  it('still names whom an expired grant was signed for when refusing it from memory', () => {
    const { verifier, advance } = clocked();
    const grant = mintGrant(issuer, spec, T0);
    advance(3_600_000);
    const first = refusalOf(verifier, grant);
    const again = refusalOf(verifier, grant);
    expect([first.failure, first.subject, first.session]).toEqual(['expired', 'agent:a', 's-1']);
    expect([again.failure, again.subject, again.session, again.message]).toEqual([
      'expired',
      'agent:a',
      's-1',
      first.message,
    ]);
  });

  it('never holds a not-yet-valid grant: it is accepted once its time comes', () => {
    const { verifier, advance } = clocked();
    const later = mintGrant(issuer, { ...spec, notBeforeSeconds: 60 }, T0);
    expect(refusalOf(verifier, later).failure).toBe('not_yet_valid');
    advance(55_000);
    expect(verifier.verify(later).claims.sub).toBe('agent:a');
    expect(verifier.refusedCached).toBe(0);
  });
});
