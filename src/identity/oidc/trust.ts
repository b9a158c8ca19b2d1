/**
 * OIDC access tokens as grants on the bus (PROTOCOL 14): a token of a trusted issuer in
 * `Matrix-Grant`, for this service's audience, verified by its issuer's keys and mapped by the
 * claims mapping into the grant it stands for, so that everything downstream (authority,
 * approvals, tasks, revocation by `jti` or `sub`) treats it as any grant.
 */
import { createHash } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { GrantError } from '../errors.js';
import { GRANT_TYPE, GRANT_VERSION, type GrantClaims, GrantFailure, type VerifiedGrant } from '../types.js';
import { accessTokenTypeProblem, OidcIssuer, type OidcIssuerOptions, TokenRefused } from './issuer.js';
import {
  type ClaimsMapping,
  issuerNamespaceProblem,
  type MappedToken,
  mapClaims,
  mappingFor,
  tokenTypeFor,
} from './mapping.js';

/** What the service trusts of OpenID Connect. */
export interface OidcTrustOptions {
  /** Issuer identifiers, as their tokens' `iss` names them. */
  issuers: readonly string[];
  /** The audience a token must name (RFC 8707: this deployment's resource identifier). */
  audience: string;
  /** Claims → session; with more than one issuer, each needs its own principal prefix (`issuers`). */
  mapping: ClaimsMapping;
  /** How each issuer's keys are kept. */
  issuerOptions?: OidcIssuerOptions;
}

/** The trusted issuers, the audience and the mapping. */
export class OidcTrust {
  private readonly byIssuer: ReadonlyMap<string, OidcIssuer>;
  /** Each issuer's mapping, its `issuers` entry applied. */
  private readonly mappings: ReadonlyMap<string, ClaimsMapping>;

  constructor(private readonly options: OidcTrustOptions) {
    if (options.issuers.length === 0) throw new Error('no OIDC issuer to trust');
    if (options.audience.trim() === '') throw new Error('an OIDC audience is needed: the resource tokens must name');
    const problem = issuerNamespaceProblem(options.mapping, options.issuers);
    if (problem !== undefined) throw new Error(problem);
    this.mappings = new Map(options.issuers.map((iss) => [iss, mappingFor(options.mapping, iss)]));
    this.byIssuer = new Map(options.issuers.map((iss) => [iss, new OidcIssuer(iss, options.issuerOptions)]));
  }

  /** The audience a token must name. */
  get audience(): string {
    return this.options.audience;
  }

  /** The issuers trusted. */
  get issuers(): readonly string[] {
    return [...this.byIssuer.keys()];
  }

  /**
   * Fetches every issuer's keys; an issuer that cannot be reached now is reported, not fatal (its
   * keys are fetched again on its first token). Resolves with one line per unreachable issuer.
   */
  async start(): Promise<string[]> {
    const failures: string[] = [];
    await Promise.all(
      [...this.byIssuer.values()].map((issuer) =>
        issuer.start().catch((err: Error) => failures.push(`OIDC issuer ${issuer.issuer}: ${err.message}`)),
      ),
    );
    return failures;
  }

  /** Stops keeping the keys fresh. */
  stop(): void {
    for (const issuer of this.byIssuer.values()) issuer.stop();
  }

  /**
   * The issuer a JWT names when it is no NATS-signed grant, read without verifying (only to choose
   * the check, or to say why it is refused); undefined for anything else.
   */
  issuerOf(text: string): string | undefined {
    try {
      if (decodeProtectedHeader(text).alg === 'ed25519-nkey') return undefined;
      const iss = decodeJwt(text).iss;
      return typeof iss === 'string' ? iss : undefined;
    } catch {
      return undefined;
    }
  }

  /** Is `text` a JWT of a trusted issuer that is not a NATS-signed grant (`issuerOf`)? */
  claims(text: string): boolean {
    const iss = this.issuerOf(text);
    return iss !== undefined && this.byIssuer.has(iss);
  }

  /** The grant a token stands for; a `GrantError` saying why it stands for none. */
  async verify(text: string): Promise<VerifiedGrant> {
    return (await this.verifyMapped(text)).grant;
  }

  /** The grant a token stands for and what the mapping made of it (its NATS role too); a `GrantError` as `verify`. */
  async verifyMapped(text: string): Promise<{ grant: VerifiedGrant; mapped: MappedToken }> {
    let iss: unknown;
    try {
      iss = decodeJwt(text).iss;
    } catch {
      throw new GrantError(GrantFailure.Malformed, 'Matrix-Grant is not a JWT');
    }
    const issuer = typeof iss === 'string' ? this.byIssuer.get(iss) : undefined;
    if (issuer === undefined)
      throw new GrantError(
        GrantFailure.UntrustedIssuer,
        `Matrix-Grant comes from an untrusted issuer: ${String(iss).slice(0, 100)}`,
      );
    let payload: Record<string, unknown>;
    try {
      payload = await issuer.verify(text, this.options.audience);
    } catch (err) {
      if (err instanceof TokenRefused)
        throw new GrantError(failureOf(err), `Matrix-Grant (an access token): ${err.message}`);
      throw err;
    }
    const typeProblem = accessTokenTypeProblem(
      decodeProtectedHeader(text).typ,
      tokenTypeFor(this.options.mapping, issuer.issuer),
    );
    if (typeProblem !== undefined)
      throw new GrantError(GrantFailure.Malformed, `Matrix-Grant (a token of ${issuer.issuer}): ${typeProblem}`);
    return grantOf(text, issuer.issuer, payload, this.mappings.get(issuer.issuer) as ClaimsMapping);
  }

  /**
   * The grant a token stood for when it was verified, read again from its claims without checking
   * its signature (for a token this service verified before and kept in its own records); undefined
   * for one that is no token of a trusted issuer, or that maps to no session.
   */
  unverified(text: string): VerifiedGrant | undefined {
    try {
      const payload = decodeJwt(text);
      const iss = payload.iss;
      if (typeof iss !== 'string' || !this.byIssuer.has(iss)) return undefined;
      if (typeof payload.exp !== 'number' || typeof payload.iat !== 'number') return undefined;
      return grantOf(text, iss, payload, this.mappings.get(iss) as ClaimsMapping).grant;
    } catch {
      return undefined;
    }
  }
}

/** The grant a verified token's claims map to, and the mapping's result; a `GrantError` (`authority_mismatch`) when they map to no session. */
function grantOf(
  text: string,
  iss: string,
  payload: Record<string, unknown>,
  mapping: ClaimsMapping,
): { grant: VerifiedGrant; mapped: MappedToken } {
  const mapped = mapClaims(payload, mapping);
  if (typeof mapped === 'string')
    throw new GrantError(
      GrantFailure.Authority,
      `Matrix-Grant (an access token of ${iss}) gives no session: ${mapped}`,
    );
  const claims: GrantClaims = {
    iss,
    sub: mapped.principal,
    // OidcIssuer.verify requires iat (RFC 9068 2.2): `$revoke {sub}` compares it with the revocation.
    iat: payload.iat as number,
    exp: payload.exp as number,
    jti: typeof payload.jti === 'string' ? payload.jti : createHash('sha256').update(text).digest('base64url'),
    nats: { type: GRANT_TYPE, version: GRANT_VERSION, session: mapped.session, resolve: mapped.authority },
  };
  if (payload.aud !== undefined) claims.aud = payload.aud as string | string[];
  if (mapped.approve !== undefined) claims.nats.approve = mapped.approve;
  return { grant: { text, claims, expiresAtMs: claims.exp * 1000 }, mapped };
}

function failureOf(err: TokenRefused): GrantFailure {
  switch (err.failure) {
    case 'expired':
      return GrantFailure.Expired;
    case 'not_yet_valid':
      return GrantFailure.NotYetValid;
    case 'audience_mismatch':
      return GrantFailure.AudienceMismatch;
    case 'bad_signature':
      return GrantFailure.BadSignature;
    default:
      return GrantFailure.Malformed;
  }
}
