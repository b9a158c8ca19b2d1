/**
 * The shapes of session grants (PROTOCOL 3.1): a NATS-style JWT that binds a principal and a
 * session to the authority of a `$resolve` request.
 */
import type { ResolveRequest } from '../registry/types.js';

/** `nats.type` of a grant. */
export const GRANT_TYPE = 'matrix-grant';
/** `nats.version` of a grant (NATS JWT v2). */
export const GRANT_VERSION = 2;
/** The JWT header of every grant, as NATS writes its own. */
export const GRANT_HEADER = { typ: 'JWT', alg: 'ed25519-nkey' } as const;

/** The fields of a `$resolve` request that decide which tools a session gets: the grant's to set. */
export const AUTHORITY_FIELDS = ['profile', 'worker', 'skills', 'toolContextRefs', 'requires', 'environment'] as const;
/** A field of the authority part. */
export type AuthorityField = (typeof AUTHORITY_FIELDS)[number];

/** The authority part of a `$resolve` request: profile, worker?, skills?, toolContextRefs?, requires?, environment?. */
export type GrantAuthority = Pick<ResolveRequest, AuthorityField>;

/** The `nats` claim of a grant. */
export interface GrantNatsClaim {
  type: typeof GRANT_TYPE;
  version: typeof GRANT_VERSION;
  /** The session id the grant is for; becomes `Matrix-Session` downstream. */
  session: string;
  /** What the session may resolve. */
  resolve: GrantAuthority;
  /** Other sessions whose state `session_state_read` may read (this project's addition; absent = only its own). */
  readSessions?: string[];
  /** Which pending approvals its holder may list and answer (PROTOCOL 8); absent = none. */
  approve?: ApproveClaim;
  /**
   * The reply prefix of its holder's NATS user (e.g. `_INBOX_agent`, as deploy/nats.conf gives
   * each agent its own): where the grant names no `user`, a request whose reply subject is not
   * under it is refused (`wrong_holder`), so a copy gets no replies elsewhere; absent = any reply.
   */
  inbox?: string;
  /**
   * Its holder's NATS user, as nats-server attests it: a request is served under the grant only
   * when the last `Nats-Request-Info` it carries names this user (and `account`), which the
   * server appends to a request crossing a service import with `share: true`. A copy sent by
   * another user is refused (`wrong_holder`), blind requests included. Supersedes `inbox` as
   * the service's check (across an import the reply subject is the server's, `_R_.…`).
   */
  user?: string;
  /** The account `user` is in (the `acc` of `Nats-Request-Info`, e.g. `AGENTS`); absent = the user alone. */
  account?: string;
}

/**
 * `nats.approve` of an approver's grant: lists, each present one must match the call, an absent
 * one matches any. `{}` covers every approval.
 */
export interface ApproveClaim {
  /** Tool names: globs (`*` any run of characters, `?` one). */
  tools?: string[];
  /** Target mounts: NATS subject patterns, as the policy's `target` (`*` one token, `>` the rest). */
  targets?: string[];
  /** Principals whose calls it may answer (never its own): globs. */
  principals?: string[];
}

/** The claims of a grant, as they travel. */
export interface GrantClaims {
  /** The issuer's public nkey. */
  iss: string;
  /** The principal; becomes `Matrix-Principal` downstream. */
  sub: string;
  /** Issued at, Unix seconds. */
  iat: number;
  /** Expires at, Unix seconds (required: a grant always ends). */
  exp: number;
  /** Not valid before, Unix seconds. */
  nbf?: number;
  /** The grant's id (a hash of its other claims, as `@nats-io/jwt` writes it). */
  jti: string;
  /** The audience: the deployment it is for; it must name `MATRIX_GRANT_AUDIENCE` where that is set, and be absent where not. */
  aud?: string | string[];
  nats: GrantNatsClaim;
}

/** A grant whose signature, issuer and times were checked. */
export interface VerifiedGrant {
  /** The grant's text, as it came in `Matrix-Grant`. */
  text: string;
  claims: GrantClaims;
  /** `exp` in Unix ms: past it the grant is refused, cached or not. */
  expiresAtMs: number;
}

/** Why a grant was refused; each is a `forbidden` with this in `details.grant`. */
export const GrantFailure = {
  Missing: 'missing',
  Malformed: 'malformed',
  UntrustedIssuer: 'untrusted_issuer',
  BadSignature: 'bad_signature',
  Tampered: 'tampered',
  Expired: 'expired',
  NotYetValid: 'not_yet_valid',
  Authority: 'authority_mismatch',
  /**
   * Not its holder's request: the sender nats-server attests is not its `nats.user` (or none is
   * attested), or, with only `nats.inbox`, the reply subject is not under that prefix.
   */
  WrongHolder: 'wrong_holder',
  /**
   * Bound by `nats.user`, on a nats-server without the fixes for CVE-2026-33223 and
   * CVE-2026-33246 (any client could forge its holder there), and the service does not run with
   * `--allow-unsafe-nats`.
   */
  UnsafeServer: 'unsafe_server',
  /** Its `aud` does not name this deployment's `MATRIX_GRANT_AUDIENCE`, or names one where the service has none. */
  AudienceMismatch: 'audience_mismatch',
  /** It lives longer than `MATRIX_GRANT_MAX_TTL` (from `iat`, or from now). */
  TooLong: 'too_long',
  /** It, or every grant of its principal issued before the revocation, was revoked (`system.tools.$revoke`). */
  Revoked: 'revoked',
} as const;
export type GrantFailure = (typeof GrantFailure)[keyof typeof GrantFailure];
