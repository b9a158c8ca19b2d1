/**
 * NATS auth callout (ADR-26, nats-server ≥ 2.10; PROTOCOL 14): answers `$SYS.REQ.USER.AUTH` for
 * the account the server calls out to. A client that connects with an access token of a trusted
 * OpenID Connect issuer (as its token, or as its password) gets a user JWT with exactly the
 * permissions of the role the claims mapping gives it, expiring with the token; any other client,
 * and one whose token was revoked (`$revoke`, by `jti` or principal), is refused, and the server
 * closes its connection. Requests encrypted to this service's xkey
 * (`auth_callout { xkey }`) are opened with it, and their answers sealed to the server's xkey.
 */
import { type AuthorizationRequest, decode, encodeAuthorizationResponse, encodeUser } from '@nats-io/jwt';
import type { Msg, NatsConnection, Subscription } from '@nats-io/nats-core';
import type { KeyPair } from '@nats-io/nkeys';
import { GrantError } from '../errors.js';
import type { OidcTrust } from '../oidc/trust.js';
import type { Revocations } from '../revocations.js';
import { accessTokenLifetimeRefusal, DEFAULT_GRANT_MAX_TTL_SECONDS } from '../verify.js';
import { type CalloutAccounts, DEFAULT_ACCOUNTS, roleUser } from './roles.js';

/** The subject nats-server sends authorization requests on. */
export const AUTH_CALLOUT_SUBJECT = '$SYS.REQ.USER.AUTH';
/** The header naming the server's xkey when the request is encrypted. */
const SERVER_XKEY_HEADER = 'Nats-Server-Xkey';

/** What the callout service needs. */
export interface AuthCalloutOptions {
  /** The OIDC issuers, audience and claims mapping a token is checked and mapped by. */
  trust: OidcTrust;
  /** The account key pair (with its seed) named `issuer` in the server's `auth_callout` block. */
  issuer: KeyPair;
  /** The curve key pair whose public key is `auth_callout { xkey }`, when the server encrypts. */
  xkey?: KeyPair;
  /** The accounts roles are placed in; default `AGENTS` and `MATRIX`. */
  accounts?: CalloutAccounts;
  /**
   * The revocations in force (`$revoke`, kept in step with the service's bucket): a token revoked
   * by its `jti`, or its principal's, cannot connect. Without it revocation is not checked here.
   */
  revocations?: Revocations;
  /** How far a token's `iat` may run ahead of this clock, in ms (a revocation by principal reaches that far); default 10000. */
  clockSkewMs?: number;
  /**
   * Longest a token may live, from its `iat` and from now, in seconds (`MATRIX_GRANT_MAX_TTL`, as
   * the service has it): a token the service would refuse as a grant does not connect; default 24 h.
   */
  maxTtlSeconds?: number;
  /** Each decision, for the log: who connected as what, or why one was refused. */
  onDecision?: (decision: CalloutDecision) => void;
}

/** One answered authorization request. */
export type CalloutDecision =
  | { allowed: true; principal: string; role: string; account: string; expiresAt: number }
  | { allowed: false; reason: string };

/** The running callout service. */
export class AuthCallout {
  private sub: Subscription | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: AuthCalloutOptions,
  ) {}

  /** Subscribes to the authorization requests. */
  start(): this {
    this.sub = this.nc.subscribe(AUTH_CALLOUT_SUBJECT, {
      callback: (err, msg) => {
        if (err === null) void this.answer(msg);
      },
    });
    return this;
  }

  /** Stops answering (connections already made keep their user JWTs). */
  async stop(): Promise<void> {
    await this.sub?.drain();
  }

  private async answer(msg: Msg): Promise<void> {
    const serverXkey = msg.headers?.get(SERVER_XKEY_HEADER) || undefined;
    let request: AuthorizationRequest;
    try {
      const claims = decode<AuthorizationRequest>(this.open(msg.data, serverXkey)).nats;
      if (typeof claims?.user_nkey !== 'string' || typeof claims.server_id?.id !== 'string')
        throw new CalloutRefusal('no user_nkey or server_id');
      request = claims as AuthorizationRequest;
    } catch (err) {
      // Without a readable request there is no user nkey and server to answer for.
      this.options.onDecision?.({ allowed: false, reason: `unreadable request: ${(err as Error).message}` });
      return;
    }
    const { user_nkey: user, server_id: server } = request;
    let response: string;
    try {
      const { jwt, decision } = await this.authorize(request);
      response = await encodeAuthorizationResponse(user, server.id, this.options.issuer, { jwt }, {});
      this.options.onDecision?.(decision);
    } catch (err) {
      // The client reads only "Authorization Violation"; the reason goes to this service's log.
      const reason = err instanceof GrantError || err instanceof CalloutRefusal ? err.message : 'internal error';
      this.options.onDecision?.({ allowed: false, reason: err instanceof Error ? err.message : String(err) });
      response = await encodeAuthorizationResponse(user, server.id, this.options.issuer, { error: reason }, {});
    }
    const bytes = new TextEncoder().encode(response);
    msg.respond(
      serverXkey !== undefined && this.options.xkey !== undefined ? this.options.xkey.seal(bytes, serverXkey) : bytes,
    );
  }

  /** The request's JWT, opened with this service's xkey when the server sealed it. */
  private open(data: Uint8Array, serverXkey: string | undefined): string {
    if (serverXkey === undefined) return new TextDecoder().decode(data);
    if (this.options.xkey === undefined)
      throw new CalloutRefusal('the server encrypts its requests (auth_callout xkey) and this service has no xkey');
    const opened = this.options.xkey.open(data, serverXkey);
    if (opened === null) throw new CalloutRefusal('the request does not open with this service xkey');
    return new TextDecoder().decode(opened);
  }

  /** The user JWT the client's token stands for; a `GrantError` or `CalloutRefusal` saying why none. */
  private async authorize(request: AuthorizationRequest): Promise<{ jwt: string; decision: CalloutDecision }> {
    const opts = request.connect_opts ?? {};
    const token = opts.auth_token || opts.pass;
    if (!token) throw new CalloutRefusal('connect with an access token of a trusted issuer, as token or password');
    const { grant, mapped } = await this.options.trust.verifyMapped(token);
    const skewMs = this.options.clockSkewMs ?? 10_000;
    const maxTtlSeconds = this.options.maxTtlSeconds ?? DEFAULT_GRANT_MAX_TTL_SECONDS;
    // The service's own lifetime checks (GrantVerifier.verifyAsync): a token it refuses as a
    // grant, issued in the future or living past MATRIX_GRANT_MAX_TTL, opens no connection.
    const refusal = accessTokenLifetimeRefusal(grant, Date.now(), skewMs, maxTtlSeconds);
    if (refusal !== undefined) throw refusal;
    const revoked = this.options.revocations?.find(grant.claims, skewMs);
    if (revoked !== undefined)
      throw new CalloutRefusal(
        `the token was revoked (${revoked.jti !== undefined ? `jti ${revoked.jti}` : `every token of ${revoked.sub} issued until ${new Date(revoked.revokedAt).toISOString()}`})${revoked.reason ? `: ${revoked.reason}` : ''}`,
      );
    const user = roleUser(mapped.role, mapped.principal, this.options.accounts ?? DEFAULT_ACCOUNTS);
    // The user's name is the principal: nats-server reports it as the user (Nats-Request-Info).
    const jwt = await encodeUser(mapped.principal, request.user_nkey, this.options.issuer, user.permissions, {
      aud: user.account,
      // Never past the token's own end, nor MATRIX_GRANT_MAX_TTL from its issue.
      exp: Math.min(grant.claims.exp, Math.floor(grant.expiresAtMs / 1000), grant.claims.iat + maxTtlSeconds),
    });
    return {
      jwt,
      decision: {
        allowed: true,
        principal: mapped.principal,
        role: mapped.role,
        account: user.account,
        expiresAt: Math.min(grant.expiresAtMs, (grant.claims.iat + maxTtlSeconds) * 1000),
      },
    };
  }
}

/** A request refused for a reason of the callout's own (no token, an unreadable request). */
export class CalloutRefusal extends Error {
  override name = 'CalloutRefusal';
}
