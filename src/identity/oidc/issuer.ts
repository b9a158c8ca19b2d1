/**
 * One OpenID Connect issuer this service trusts: its keys, found through its discovery document
 * and kept in memory, and the check of an access token it signed (with `jose`: signature, the
 * algorithm bound to the key, `iss`, `aud`, `exp`/`nbf` with a small skew). The keys are fetched
 * once, fetched again for a `kid` they lack (at most once a minute) and every ten minutes in the
 * background; a fetch that fails keeps the keys already known, so tokens keep verifying while the
 * issuer is briefly unreachable.
 */
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTPayload, jwtVerify } from 'jose';

/** The signature algorithms a token may use: asymmetric only (`none` and HMAC never). */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

/** How an issuer's keys are kept. */
export interface OidcIssuerOptions {
  /** Least time between two fetches of the keys for a `kid` they lack, in ms; default 60000. */
  minRefetchMs?: number;
  /** How often the keys are fetched in the background, in ms; default 600000. */
  refreshMs?: number;
  /** How far `nbf`/`iat` may be ahead of this clock and `exp` behind it, in ms; default 10000. */
  clockSkewMs?: number;
  /** The clock, Unix ms; default `Date.now`. */
  now?: () => number;
  /** How long one fetch of the discovery document or the keys may take, in ms; default 5000. */
  fetchTimeoutMs?: number;
}

/** The `typ` values a JWT access token is sent with, lower case and without `application/` (RFC 7515 4.1.9). */
const ACCESS_TOKEN_TYPES: readonly string[] = ['jwt', 'at+jwt'];

/**
 * Why a verified token's header `typ` says it is no access token, or undefined. With `required`
 * `at+jwt` only `at+jwt` passes (RFC 9068 2.1). Without, a `typ` absent, `JWT` or `at+jwt` passes
 * (Keycloak, Entra ID and Auth0's token profile send `JWT`, Okta none) and any other is refused.
 * Not part of `OidcIssuer.verify`: the console verifies ID tokens with it too.
 */
export function accessTokenTypeProblem(typ: unknown, required: 'at+jwt' | undefined): string | undefined {
  const type = typeof typ === 'string' ? typ.toLowerCase().replace(/^application\//, '') : undefined;
  if (required === 'at+jwt')
    return type === 'at+jwt'
      ? undefined
      : `its typ is ${typ === undefined ? 'absent' : JSON.stringify(typ)}, and its issuer's access tokens must say at+jwt (RFC 9068)`;
  if (type === undefined || ACCESS_TOKEN_TYPES.includes(type)) return undefined;
  return `its typ ${JSON.stringify(typ)} says it is no access token`;
}

/** Why a token of a trusted issuer is refused: the words a caller reads, and a code of `GrantFailure`'s. */
export class TokenRefused extends Error {
  override name = 'TokenRefused';
  constructor(
    readonly failure: 'expired' | 'not_yet_valid' | 'audience_mismatch' | 'bad_signature' | 'malformed',
    message: string,
  ) {
    super(message);
  }
}

type KeySelector = ReturnType<typeof createLocalJWKSet>;

/** One trusted issuer and its keys. */
export class OidcIssuer {
  private keys: KeySelector | undefined;
  private jwksUri: string | undefined;
  private discovery: Record<string, unknown> | undefined;
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private fetching: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly minRefetchMs: number;
  private readonly clockSkewMs: number;
  private readonly now: () => number;
  private readonly fetchTimeoutMs: number;

  /** @param issuer the issuer's identifier, exactly as its tokens' `iss` and its discovery document name it. */
  constructor(
    readonly issuer: string,
    private readonly options: OidcIssuerOptions = {},
  ) {
    const url = new URL(issuer);
    if (url.protocol !== 'https:' && !isLoopback(url.hostname))
      throw new Error(`OIDC issuer ${issuer} must be https (http only on loopback, for tests)`);
    this.minRefetchMs = options.minRefetchMs ?? 60_000;
    this.clockSkewMs = options.clockSkewMs ?? 10_000;
    this.now = options.now ?? Date.now;
    this.fetchTimeoutMs = options.fetchTimeoutMs ?? 5_000;
  }

  /** Fetches the discovery document and the keys, then keeps them fresh in the background. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh().catch(() => {}), this.options.refreshMs ?? 600_000);
    this.timer.unref();
  }

  /** The issuer's discovery document (`/.well-known/openid-configuration`), fetched once. */
  async metadata(): Promise<Record<string, unknown>> {
    if (this.discovery === undefined) await this.refresh();
    return this.discovery as Record<string, unknown>;
  }

  /** Stops the background refresh. */
  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * The claims of `token`, an access token this issuer signed for `audience`; `TokenRefused`
   * saying why not. Its `kid` unknown: the keys are fetched again (at most once a minute) before
   * it is refused.
   */
  async verify(token: string, audience: string): Promise<JWTPayload> {
    try {
      const { payload } = await jwtVerify(token, (header, jws) => this.keyFor(header, jws), {
        issuer: this.issuer,
        audience,
        algorithms: [...ASYMMETRIC_ALGORITHMS],
        clockTolerance: this.clockSkewMs / 1000,
        currentDate: new Date(this.now()),
        // iat is required of a JWT access token (RFC 9068 2.2), and `$revoke {sub}` needs it.
        requiredClaims: ['exp', 'iat', 'sub'],
      });
      return payload;
    } catch (err) {
      throw refusalOf(err, this.issuer, audience);
    }
  }

  private async keyFor(...args: Parameters<KeySelector>): Promise<Awaited<ReturnType<KeySelector>>> {
    if (this.keys === undefined) await this.refresh();
    try {
      return await (this.keys as KeySelector)(...args);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey) || this.now() - this.fetchedAt < this.minRefetchMs) throw err;
      await this.refresh().catch(() => {});
      return (this.keys as KeySelector)(...args);
    }
  }

  /** Fetches the keys (one fetch at a time); a failure keeps the keys known so far. */
  private refresh(): Promise<void> {
    this.fetching ??= this.fetchKeys().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  private async fetchKeys(): Promise<void> {
    if (this.jwksUri === undefined) {
      const discovery = await this.getJson(new URL('.well-known/openid-configuration', withSlash(this.issuer)));
      if (discovery.issuer !== this.issuer)
        throw new Error(`the discovery document of ${this.issuer} names issuer ${String(discovery.issuer)}`);
      if (typeof discovery.jwks_uri !== 'string')
        throw new Error(`the discovery document of ${this.issuer} has no jwks_uri`);
      this.jwksUri = discovery.jwks_uri;
      this.discovery = discovery;
    }
    const jwks = (await this.getJson(new URL(this.jwksUri))) as unknown as JSONWebKeySet;
    this.keys = createLocalJWKSet(jwks);
    this.fetchedAt = this.now();
  }

  private async getJson(url: URL): Promise<Record<string, unknown>> {
    const response = await fetch(url, { signal: AbortSignal.timeout(this.fetchTimeoutMs), redirect: 'error' });
    if (!response.ok) throw new Error(`${url.href} answered ${response.status}`);
    const body: unknown = await response.json();
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      throw new Error(`${url.href} is no JSON object`);
    return body as Record<string, unknown>;
  }
}

/** What a failed `jwtVerify` means for the caller. */
function refusalOf(err: unknown, issuer: string, audience: string): TokenRefused {
  if (err instanceof errors.JWTExpired) return new TokenRefused('expired', `the access token expired (${err.message})`);
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.reason === 'missing')
      return new TokenRefused(
        'malformed',
        `the access token has no ${err.claim} claim (${err.claim === 'iat' ? 'RFC 9068 requires it, and $revoke {sub} needs it' : 'it is required'})`,
      );
    if (err.claim === 'aud')
      return new TokenRefused(
        'audience_mismatch',
        `the access token is not for this resource: its aud must name ${audience}`,
      );
    if (err.claim === 'nbf' || err.claim === 'iat')
      return new TokenRefused('not_yet_valid', `the access token is not valid yet (${err.message})`);
    if (err.claim === 'iss') return new TokenRefused('malformed', `the access token is not from ${issuer}`);
    return new TokenRefused('malformed', `the access token's claims do not hold: ${err.message}`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed)
    return new TokenRefused(
      'bad_signature',
      `the access token's algorithm is not allowed (asymmetric signatures only)`,
    );
  if (err instanceof errors.JWKSNoMatchingKey)
    return new TokenRefused('bad_signature', `no key of ${issuer} matches the access token's kid and algorithm`);
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return new TokenRefused('bad_signature', `the access token's signature does not verify with ${issuer}'s key`);
  if (err instanceof errors.JOSEError)
    return new TokenRefused('malformed', `the access token is not a valid JWT: ${err.message}`);
  return new TokenRefused('bad_signature', `the keys of ${issuer} could not be had: ${(err as Error).message}`);
}

function withSlash(url: string): string {
  return url.endsWith('/') ? url : `${url}/`;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
