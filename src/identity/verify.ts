/**
 * Checking a grant (PROTOCOL 3.1): its form, a trusted issuer, the issuer's ed25519 signature
 * (native, `node:crypto`), its claims, its times. Each failure is a `GrantError` naming it.
 * Verified grants are cached by text, so a warm call pays a map lookup and a clock read; refused
 * ones by the hash of their text, so a refused text sent again pays a hash, not a signature check.
 */
import { type KeyObject, verify } from 'node:crypto';
import { contracts, SchemaId } from '../bus/contracts.js';
import { describeViolations } from '../bus/schema-compiler.js';
import { cacheLookups } from '../telemetry/caches.js';
import { DEFAULT_GRANT_CACHE_BYTES, GrantCache } from './cache.js';
import { GrantError } from './errors.js';
import { claimsHash, readClaims, splitSigned } from './jwt.js';
import { nkeyPublicKey } from './nkey.js';
import type { OidcTrust } from './oidc/trust.js';
import { DEFAULT_REFUSAL_CACHE_BYTES, DEFAULT_REFUSAL_TTL_MS, isLasting, RefusalCache } from './refusal-cache.js';
import type { Revocations } from './revocations.js';
import {
  AUTHORITY_FIELDS,
  GRANT_TYPE,
  GRANT_VERSION,
  type GrantClaims,
  GrantFailure,
  type VerifiedGrant,
} from './types.js';

/** How a verifier behaves. */
export interface GrantVerifierOptions {
  /** Bound of the verified-grant cache, in bytes; default 8 MiB. */
  cacheBytes?: number;
  /** Bound of the cache of refused grant texts, in bytes; default 4 MiB. */
  refusalCacheBytes?: number;
  /** How long a refused grant text is refused from memory, in ms; default 60000. */
  refusalTtlMs?: number;
  /**
   * How far `nbf` and `iat` may be ahead of this clock, in ms (issuers' clocks drift); default
   * 10000. `exp` has no slack.
   */
  clockSkewMs?: number;
  /** The clock, Unix ms; default `Date.now`. */
  now?: () => number;
  /**
   * Where set, a grant must carry this `aud` (`MATRIX_GRANT_AUDIENCE`); where not, a grant must carry
   * none. Else `audience_mismatch`.
   */
  audience?: string;
  /** Longest a grant may live, from its `iat` and from now, in seconds (`MATRIX_GRANT_MAX_TTL`); default 24 h. */
  maxTtlSeconds?: number;
  /** Revocations in force, consulted on every call (cached grant or not); default none. */
  revocations?: Revocations;
  /**
   * OpenID Connect issuers whose access tokens are grants too (PROTOCOL 14), verified
   * asynchronously (`verifyAsync`) and cached as any grant; default none.
   */
  oidc?: OidcTrust;
}

/** Default of `maxTtlSeconds`: a day. */
export const DEFAULT_GRANT_MAX_TTL_SECONDS = 86_400;

/** A grant's `nats.inbox`: a NATS subject of plain tokens (no wildcards), as an inbox prefix is. */
export const INBOX_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

/** A grant's `nats.user` and `nats.account`: a NATS user or account name as nats-server attests it (an nkey too). */
export const HOLDER_NAME = /^[A-Za-z0-9_.@:-]{1,128}$/;

/** Session ids and the ids a grant lets it read: header-safe, no commas. */
export const SESSION_ID = /^[A-Za-z0-9_.:@-]{1,128}$/;
/** A principal (a grant's `sub`): 1 to 256 characters, no control characters. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what a principal may not hold
export const PRINCIPAL = /^[^\u0000-\u001f\u007f]{1,256}$/;

/**
 * Up to this many trusted issuers, a grant's signature is checked against each before its claims
 * are read (one ed25519 check each, ~40 µs over 16 KiB); with more, against its `iss` alone.
 */
export const SIGNATURE_FIRST_ISSUERS = 4;

/**
 * Claims of at most this many base64url characters that no trusted issuer signed are read all
 * the same, to say why they are refused (a typical grant's are ~500); longer ones are refused
 * as `bad_signature` unread. 16 KiB of claims cost 0.3-0.9 ms a refusal to read and hash.
 */
export const CLASSIFIED_CLAIMS_CHARS = 4096;

const malformed = (why: string) => new GrantError(GrantFailure.Malformed, `Matrix-Grant is malformed: ${why}`);

/** Verifies grants against a fixed set of trusted issuers. */
export class GrantVerifier {
  private readonly keys: ReadonlyMap<string, KeyObject>;
  private readonly cache: GrantCache;
  private readonly refused: RefusalCache;
  private readonly skewMs: number;
  private readonly now: () => number;
  private readonly audience: string | undefined;
  private readonly maxTtlSeconds: number;
  private readonly revocations: Revocations | undefined;
  private readonly oidc: OidcTrust | undefined;

  /** `issuers`: public nkeys; throws if one is not a public nkey. */
  constructor(issuers: readonly string[], options: GrantVerifierOptions = {}) {
    this.keys = new Map(issuers.map((nkey) => [nkey, nkeyPublicKey(nkey)]));
    this.cache = new GrantCache(options.cacheBytes ?? DEFAULT_GRANT_CACHE_BYTES);
    this.refused = new RefusalCache(
      options.refusalCacheBytes ?? DEFAULT_REFUSAL_CACHE_BYTES,
      options.refusalTtlMs ?? DEFAULT_REFUSAL_TTL_MS,
    );
    this.skewMs = options.clockSkewMs ?? 10_000;
    this.now = options.now ?? Date.now;
    this.audience = options.audience;
    this.maxTtlSeconds = options.maxTtlSeconds ?? DEFAULT_GRANT_MAX_TTL_SECONDS;
    this.revocations = options.revocations;
    this.oidc = options.oidc;
    // A revoked grant leaves the cache at once (it would be refused there all the same).
    this.revocations?.onRevoked(() =>
      this.cache.dropWhere((g) => this.revocations?.find(g.claims, this.skewMs) !== undefined),
    );
  }

  /** The audience a grant must name (`MATRIX_GRANT_AUDIENCE`), if any. */
  get requiredAudience(): string | undefined {
    return this.audience;
  }

  /** How many issuers are trusted: nkeys, and OIDC issuers. */
  get issuers(): number {
    return this.keys.size + (this.oidc?.issuers.length ?? 0);
  }

  /** The public nkeys of the trusted issuers, in the order given. */
  get issuerKeys(): string[] {
    return [...this.keys.keys()];
  }

  /** Grants held verified. */
  get cached(): number {
    return this.cache.size;
  }

  /** Grant texts held refused. */
  get refusedCached(): number {
    return this.refused.size;
  }

  /** The verified grant of `text`, or a `GrantError` saying why not. */
  verify(text: string | undefined): VerifiedGrant {
    if (text === undefined || text === '') {
      throw new GrantError(
        GrantFailure.Missing,
        'Matrix-Grant is missing: this service takes identity only from a grant signed by an issuer it trusts',
      );
    }
    const now = this.now();
    const hit = this.cache.get(text, now);
    if (hit !== undefined) {
      cacheLookups.grants.hit++;
      return this.notRevoked(hit);
    }
    cacheLookups.grants.miss++;
    const refusal = this.refused.get(text, now);
    if (refusal !== undefined) throw refusal;
    const oidcIssuer = this.oidc?.issuerOf(text);
    if (oidcIssuer !== undefined && this.oidc?.issuers.includes(oidcIssuer))
      throw new GrantError(
        GrantFailure.Malformed,
        'Matrix-Grant is an access token that was not verified before this check (it is verified before a body is read)',
      );
    if (oidcIssuer !== undefined)
      throw new GrantError(
        GrantFailure.UntrustedIssuer,
        `Matrix-Grant comes from an untrusted issuer: ${oidcIssuer.slice(0, 100)} is not among the OIDC issuers this service trusts`,
      );
    let grant: VerifiedGrant;
    try {
      grant = this.verifyFresh(text, now);
    } catch (err) {
      if (err instanceof GrantError && isLasting(err.failure)) this.refused.set(text, err, now);
      throw err;
    }
    this.notRevoked(grant);
    this.cache.set(grant);
    return grant;
  }

  /**
   * Must `text` be verified with `verifyAsync` first: an access token of a trusted OIDC issuer not
   * yet cached? (Its issuer's keys are checked asynchronously; every other grant synchronously.)
   */
  needsAsync(text: string | undefined): boolean {
    if (this.oidc === undefined || text === undefined || text === '') return false;
    if (this.cache.get(text, this.now()) !== undefined) return false;
    return this.oidc.claims(text);
  }

  /**
   * `verify`, for an access token of a trusted OIDC issuer too: verified by its issuer's keys,
   * mapped to the grant it stands for, checked for lifetime and revocation, then cached, so the
   * synchronous `verify` finds it until it expires.
   */
  async verifyAsync(text: string | undefined): Promise<VerifiedGrant> {
    if (!this.needsAsync(text)) return this.verify(text);
    const now = this.now();
    const refusal = this.refused.get(text as string, now);
    if (refusal !== undefined) throw refusal;
    let grant: VerifiedGrant;
    try {
      grant = await (this.oidc as OidcTrust).verify(text as string);
      const refusal = accessTokenLifetimeRefusal(grant, this.now(), this.skewMs, this.maxTtlSeconds);
      if (refusal !== undefined) throw signedFor(refusal, grant.claims);
    } catch (err) {
      if (err instanceof GrantError && isLasting(err.failure)) this.refused.set(text as string, err, now);
      throw err;
    }
    this.notRevoked(grant);
    this.cache.set(grant);
    return grant;
  }

  /**
   * Whether an access token verified earlier (a task's, after a restart emptied the cache) has
   * lapsed since: its `exp` passed or a revocation names it, read from its claims without a fresh
   * check of its signature (it was checked when its call was admitted, and the record it comes
   * from is this service's own). Undefined while it holds.
   */
  lapsedUnverified(text: string): GrantError | undefined {
    const grant = this.oidc?.unverified(text);
    if (grant === undefined)
      return new GrantError(GrantFailure.Malformed, 'Matrix-Grant is no access token this service trusts');
    if (this.now() >= grant.expiresAtMs)
      return new GrantError(
        GrantFailure.Expired,
        `Matrix-Grant (an access token) expired at ${new Date(grant.expiresAtMs).toISOString()}`,
      );
    try {
      this.notRevoked(grant);
      return undefined;
    } catch (err) {
      if (err instanceof GrantError) return err;
      throw err;
    }
  }

  /** The grant, unless a revocation in force names it (`revoked`). */
  private notRevoked(grant: VerifiedGrant): VerifiedGrant {
    const revocation = this.revocations?.find(grant.claims, this.skewMs);
    if (revocation === undefined) return grant;
    const what = revocation.jti !== undefined ? 'this grant' : `every grant of ${grant.claims.sub} issued before`;
    const reason = revocation.reason ? ` (${revocation.reason.slice(0, 200)})` : '';
    throw signedFor(
      new GrantError(
        GrantFailure.Revoked,
        `Matrix-Grant was revoked: ${what} ${new Date(revocation.revokedAt).toISOString()}${reason}; ask its issuer for a new one`,
      ),
      grant.claims,
    );
  }

  private verifyFresh(text: string, now: number): VerifiedGrant {
    const parts = splitSigned(text);
    // With few issuers, the signature is checked against each before the claims are read: a grant
    // none of them signed costs no parse of claims its sender shaped. Only a small one's claims
    // are read then, to tell an untrusted issuer, tampering or a bad signature apart.
    let signer: string | undefined;
    const signatureFirst = this.keys.size <= SIGNATURE_FIRST_ISSUERS;
    if (signatureFirst) {
      for (const [nkey, key] of this.keys)
        if (verify(null, parts.signed, key, parts.signature)) {
          signer = nkey;
          break;
        }
      if (signer === undefined && parts.claimsSegment.length > CLASSIFIED_CLAIMS_CHARS)
        throw new GrantError(
          GrantFailure.BadSignature,
          `Matrix-Grant has a bad signature: no issuer this service trusts signed it (claims of more than ${CLASSIFIED_CLAIMS_CHARS} characters are not read unsigned)`,
        );
    }
    const claims = readClaims(parts.claimsSegment);
    const iss = claims.iss;
    if (typeof iss !== 'string') throw malformed('it names no issuer (iss)');
    const key = this.keys.get(iss);
    if (key === undefined)
      throw new GrantError(
        GrantFailure.UntrustedIssuer,
        `Matrix-Grant comes from an untrusted issuer: ${iss.slice(0, 60)} is not among the ${this.keys.size} this service trusts`,
      );
    const signed = signatureFirst ? signer === iss : verify(null, parts.signed, key, parts.signature);
    if (!signed) throw signatureFailure(claims, iss);
    try {
      return this.checkSigned(text, claims, now);
    } catch (err) {
      throw err instanceof GrantError ? signedFor(err, claims) : err;
    }
  }

  /** The claims of a grant whose signature verified, checked, and its times against `now`. */
  private checkSigned(text: string, claims: Record<string, unknown>, now: number): VerifiedGrant {
    const checked = checkClaims(claims);
    // Issued in the future by more than the slack `nbf` has: an issuer's clock ahead would otherwise
    // mint grants that outlive a revocation of their principal (which refuses those issued before it).
    if (checked.iat * 1000 > now + this.skewMs)
      throw new GrantError(
        GrantFailure.NotYetValid,
        `Matrix-Grant is issued in the future (iat ${new Date(checked.iat * 1000).toISOString()}, more than ${this.skewMs / 1000} s ahead of this service's clock); check its issuer's clock`,
      );
    const expiresAtMs = checked.exp * 1000;
    // Too long from its issue, or from now (an iat set ahead cannot stretch it).
    const lifetime = Math.max(checked.exp - checked.iat, Math.floor((expiresAtMs - now - this.skewMs) / 1000));
    if (lifetime > this.maxTtlSeconds)
      throw new GrantError(
        GrantFailure.TooLong,
        `Matrix-Grant lives ${lifetime} s, longer than the ${this.maxTtlSeconds} s this service accepts (MATRIX_GRANT_MAX_TTL); ask its issuer for a shorter one`,
      );
    if (this.audience !== undefined && !names(checked.aud, this.audience))
      throw new GrantError(
        GrantFailure.AudienceMismatch,
        `Matrix-Grant is for another audience: its aud must name ${JSON.stringify(this.audience.slice(0, 100))}`,
      );
    // A grant minted for one deployment (`staging`) is not good in one that names none (`prod`
    // without MATRIX_GRANT_AUDIENCE): an audience it names must be this service's.
    if (this.audience === undefined && checked.aud !== undefined)
      throw new GrantError(
        GrantFailure.AudienceMismatch,
        `Matrix-Grant is for audience ${JSON.stringify(String(checked.aud).slice(0, 100))}, and this service names none (MATRIX_GRANT_AUDIENCE); ask for a grant without aud, or set the audience`,
      );
    if (now >= expiresAtMs)
      throw new GrantError(
        GrantFailure.Expired,
        `Matrix-Grant expired at ${new Date(expiresAtMs).toISOString()}; ask its issuer for a new one`,
      );
    if (checked.nbf !== undefined && now + this.skewMs < checked.nbf * 1000) {
      throw new GrantError(
        GrantFailure.NotYetValid,
        `Matrix-Grant is not valid before ${new Date(checked.nbf * 1000).toISOString()}`,
      );
    }
    return { text, claims: checked, expiresAtMs };
  }
}

/** A refusal of a grant whose issuer's signature verified, naming its `sub` and session where they are well formed. */
/**
 * Why an access token of a trusted OIDC issuer, its signature already checked, may not be a grant
 * for its lifetime: issued more than `skewMs` ahead of `now` (`not_yet_valid`), or living longer
 * than `maxTtlSeconds` (`MATRIX_GRANT_MAX_TTL`), from its `iat` or from now (`too_long`).
 * Undefined when it may. The service (`GrantVerifier.verifyAsync`) and the auth callout both ask.
 */
export function accessTokenLifetimeRefusal(
  grant: Pick<VerifiedGrant, 'claims' | 'expiresAtMs'>,
  now: number,
  skewMs: number,
  maxTtlSeconds: number,
): GrantError | undefined {
  const { iat, exp } = grant.claims;
  if (iat * 1000 > now + skewMs)
    return new GrantError(
      GrantFailure.NotYetValid,
      `Matrix-Grant (an access token) is issued in the future (iat ${new Date(iat * 1000).toISOString()}); check its issuer's clock`,
    );
  const lifetime = Math.max(exp - iat, Math.floor((grant.expiresAtMs - now - skewMs) / 1000));
  if (lifetime > maxTtlSeconds)
    return new GrantError(
      GrantFailure.TooLong,
      `Matrix-Grant (an access token) lives ${lifetime} s, longer than the ${maxTtlSeconds} s this service accepts (MATRIX_GRANT_MAX_TTL)`,
    );
  return undefined;
}

export function signedFor(err: GrantError, claims: { sub?: unknown; nats?: unknown }): GrantError {
  if (typeof claims.sub === 'string' && PRINCIPAL.test(claims.sub)) err.subject = claims.sub;
  const session = (claims.nats as { session?: unknown } | null | undefined)?.session;
  if (typeof session === 'string' && SESSION_ID.test(session)) err.session = session;
  return err;
}

/**
 * A signature that does not verify: claims that no longer hash to their own `jti` were changed
 * after signing (tampered); claims that still do were signed by another key (bad signature).
 */
function signatureFailure(claims: Record<string, unknown>, iss: string): GrantError {
  if (typeof claims.jti === 'string' && claims.jti !== claimsHash(claims)) {
    return new GrantError(
      GrantFailure.Tampered,
      'Matrix-Grant was tampered with: its claims were changed after signing (they match neither its jti nor its signature)',
    );
  }
  return new GrantError(
    GrantFailure.BadSignature,
    `Matrix-Grant has a bad signature: it is not ${iss.slice(0, 60)}'s signature of its header and claims`,
  );
}

/** The claims, checked field by field; a `malformed` GrantError names the first that is wrong. */
function checkClaims(claims: Record<string, unknown>): GrantClaims {
  const nats = claims.nats as Record<string, unknown> | undefined;
  if (nats === null || typeof nats !== 'object') throw malformed('it has no nats claim');
  if (nats.type !== GRANT_TYPE) throw malformed(`its nats.type is ${JSON.stringify(nats.type)}, not "${GRANT_TYPE}"`);
  if (nats.version !== GRANT_VERSION)
    throw malformed(`its nats.version is ${JSON.stringify(nats.version)}, not ${GRANT_VERSION}`);
  if (typeof claims.sub !== 'string' || !PRINCIPAL.test(claims.sub))
    throw malformed('its sub (the principal) must be 1 to 256 characters, no control characters');
  if (typeof nats.session !== 'string' || !SESSION_ID.test(nats.session))
    throw malformed('its nats.session must be 1 to 128 of A-Z a-z 0-9 _ . : @ -');
  if (!Number.isSafeInteger(claims.exp)) throw malformed('it has no exp: a grant must expire');
  if (!Number.isSafeInteger(claims.iat)) throw malformed('it has no iat (when it was issued, Unix seconds)');
  if (claims.aud !== undefined && !isAudience(claims.aud)) throw malformed('its aud must be a string or strings');
  if (
    nats.inbox !== undefined &&
    !(typeof nats.inbox === 'string' && nats.inbox.length <= 128 && INBOX_PREFIX.test(nats.inbox))
  )
    throw malformed('its nats.inbox must be an inbox prefix: tokens of A-Z a-z 0-9 _ - joined by dots, at most 128');
  for (const field of ['user', 'account'] as const) {
    const name = nats[field];
    if (name !== undefined && !(typeof name === 'string' && HOLDER_NAME.test(name)))
      throw malformed(`its nats.${field} must be a NATS ${field} name: 1 to 128 of A-Z a-z 0-9 _ . @ : -`);
  }
  if (nats.account !== undefined && nats.user === undefined)
    throw malformed('its nats.account binds nothing without nats.user (the user in that account)');
  if (claims.nbf !== undefined && !Number.isSafeInteger(claims.nbf)) throw malformed('its nbf is not Unix seconds');
  const readSessions = nats.readSessions;
  if (
    readSessions !== undefined &&
    !(
      Array.isArray(readSessions) &&
      readSessions.length <= 64 &&
      readSessions.every((s) => typeof s === 'string' && SESSION_ID.test(s))
    )
  ) {
    throw malformed('its nats.readSessions must be at most 64 session ids');
  }
  if (nats.approve !== undefined && !isApproveClaim(nats.approve))
    throw malformed(
      'its nats.approve must be {tools?, targets?, principals?}, each at most 64 globs of 1 to 256 characters',
    );
  return {
    ...(claims as unknown as GrantClaims),
    nats: { ...(nats as unknown as GrantClaims['nats']), resolve: checkAuthority(nats.resolve) },
  };
}

/** Is it `{tools?, targets?, principals?}`, each a list of at most 64 globs of 1 to 256 characters? */
function isApproveClaim(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  return Object.entries(value).every(
    ([field, globs]) =>
      (field === 'tools' || field === 'targets' || field === 'principals') &&
      Array.isArray(globs) &&
      globs.length <= 64 &&
      globs.every((g) => typeof g === 'string' && g.length >= 1 && g.length <= 256),
  );
}

/** An `aud` claim: a string, or at most 16 strings. */
function isAudience(aud: unknown): boolean {
  if (typeof aud === 'string') return aud.length <= 256;
  return Array.isArray(aud) && aud.length <= 16 && aud.every((a) => typeof a === 'string' && a.length <= 256);
}

/** Does an `aud` claim name `audience`? */
function names(aud: string | string[] | undefined, audience: string): boolean {
  return aud === audience || (Array.isArray(aud) && aud.includes(audience));
}

/** The grant's `resolve`: a valid `$resolve` request; only its authority fields are kept. */
function checkAuthority(resolve: unknown): GrantClaims['nats']['resolve'] {
  if (resolve === null || typeof resolve !== 'object' || Array.isArray(resolve))
    throw malformed('its nats.resolve is not an object');
  const violations = contracts().check(SchemaId.ResolveRequest)(resolve);
  if (violations !== undefined) {
    throw malformed(
      `its nats.resolve is not a valid $resolve request: ${describeViolations(violations, { empty: '(resolve)' })}`,
    );
  }
  const source = resolve as Record<string, unknown>;
  const authority: Record<string, unknown> = {};
  for (const field of AUTHORITY_FIELDS) if (source[field] !== undefined) authority[field] = source[field];
  return authority as unknown as GrantClaims['nats']['resolve'];
}
