/**
 * The MCP HTTP endpoint as an OAuth 2.1 protected resource (MCP authorization, PROTOCOL 14):
 * Protected Resource Metadata (RFC 9728) at `/.well-known/oauth-protected-resource` and its
 * path-suffixed form, a `401` with `WWW-Authenticate: Bearer resource_metadata="…"` for a request
 * without a valid access token, a `403` with `error="insufficient_scope"` for one without the
 * required scopes. Tokens are checked by `OidcTrust` (the issuer's JWKS; `aud` must name this
 * resource, RFC 8707) and mapped by the claims mapping into the grant they stand for; the bridge
 * then serves the session as a grant's (src/mcp/http.ts), and sends the token to the service as
 * its `Matrix-Grant` (the service trusts the same issuer for the same resource), never to a target.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NatsConnection } from '@nats-io/nats-core';
import { decodeJwt } from 'jose';
import { GrantError } from '../identity/errors.js';
import type { ClaimsMapping } from '../identity/oidc/mapping.js';
import { OidcTrust } from '../identity/oidc/trust.js';
import { RevocationStore, Revocations } from '../identity/revocations.js';
import { DEFAULT_GRANT_MAX_TTL_SECONDS, GrantVerifier } from '../identity/verify.js';

/** Where Protected Resource Metadata is served (RFC 9728 section 3). */
export const PRM_PATH = '/.well-known/oauth-protected-resource';

/** What the endpoint trusts. */
export interface OAuthResourceOptions {
  /** The authorization server (OpenID Connect issuer) whose access tokens it takes. */
  issuer: string;
  /** This resource's identifier, the `aud` a token must name: the endpoint's URL unless told (RFC 8707). */
  resource: string;
  /** Claims → session. */
  mapping: ClaimsMapping;
  /** Scopes every token must carry (space-separated words of its `scope`); default none. */
  scopes?: readonly string[];
  /** The clock, Unix ms; default `Date.now`. */
  now?: () => number;
}

/** The protected resource: its metadata, its challenge and the check of each request's token. */
export class OAuthResource {
  /** The verifier the endpoint's sessions use: this issuer's tokens, revocations as the service's. */
  readonly verifier: GrantVerifier;
  private readonly trust: OidcTrust;
  private readonly revocations = new Revocations();
  private stopWatch: (() => void) | undefined;
  private readonly scopes: readonly string[];

  constructor(private readonly options: OAuthResourceOptions) {
    const url = new URL(options.resource);
    if (url.hash !== '') throw new TypeError(`the resource ${options.resource} must have no fragment (RFC 8707)`);
    this.scopes = options.scopes ?? [];
    const now = options.now ?? Date.now;
    this.trust = new OidcTrust({
      issuers: [options.issuer],
      audience: options.resource,
      mapping: options.mapping,
      issuerOptions: { now },
    });
    this.verifier = new GrantVerifier([], { oidc: this.trust, revocations: this.revocations, now });
  }

  /** The authorization servers whose tokens it takes. */
  get issuers(): readonly string[] {
    return [this.options.issuer];
  }

  /** This resource's identifier. */
  get resource(): string {
    return this.options.resource;
  }

  /** The metadata document's URL, as the challenge names it: the resource's path after the well-known prefix. */
  get metadataUrl(): string {
    const url = new URL(this.options.resource);
    const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
    return `${url.origin}${PRM_PATH}${path}`;
  }

  /** The Protected Resource Metadata (RFC 9728 section 2). */
  metadata(): Record<string, unknown> {
    return {
      resource: this.options.resource,
      authorization_servers: [this.options.issuer],
      bearer_methods_supported: ['header'],
      ...(this.scopes.length > 0 && { scopes_supported: [...this.scopes] }),
      resource_name: 'matrix-tools MCP bridge',
    };
  }

  /**
   * Fetches the issuer's keys, and keeps the service's revocations in step when `nc` may read
   * their bucket (a token revoked by `$revoke` is then refused here with the challenge, not only
   * by the service). Resolves with one line per thing that could not be had now.
   */
  async start(nc?: NatsConnection): Promise<string[]> {
    const failures = await this.trust.start();
    if (nc !== undefined) {
      try {
        const store = await RevocationStore.open(nc, { maxAgeMs: DEFAULT_GRANT_MAX_TTL_SECONDS * 1000 });
        const watch = store.watch(this.revocations);
        this.stopWatch = () => watch.stop();
        await watch.caughtUp;
      } catch (err) {
        failures.push(`revocations: ${(err as Error).message} (the service still refuses a revoked token)`);
      }
    }
    return failures;
  }

  /** Stops keeping the keys and revocations. */
  stop(): void {
    this.trust.stop();
    this.stopWatch?.();
  }

  /**
   * Serves the metadata, or answers a request to `endpointPath` that carries no valid token
   * (`401`) or lacks a scope (`403`); true when it answered. A request it lets through carries a
   * token verified and cached in `verifier`.
   */
  async intercept(req: IncomingMessage, res: ServerResponse, endpointPath: string): Promise<boolean> {
    const path = new URL(req.url ?? '/', 'http://bridge').pathname;
    if (path === PRM_PATH || path.startsWith(`${PRM_PATH}/`)) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { error: 'GET the metadata' });
      return send(res, 200, this.metadata(), { 'Cache-Control': 'max-age=300' });
    }
    if (path !== endpointPath) return false;
    const header = req.headers.authorization;
    const token = header === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    if (token === undefined) return this.challenge(res, 401, undefined, 'an access token is required');
    try {
      await this.verifier.verifyAsync(token);
      // Synchronously again: a cached token is checked against the revocations in force now.
      this.verifier.verify(token);
    } catch (err) {
      if (err instanceof GrantError) return this.challenge(res, 401, 'invalid_token', err.message);
      throw err;
    }
    const held = scopesOf(token);
    const missing = this.scopes.filter((s) => !held.includes(s));
    if (missing.length > 0)
      return this.challenge(res, 403, 'insufficient_scope', `the access token lacks scope ${missing.join(' ')}`);
    return false;
  }

  /** A Bearer challenge (RFC 6750 section 3, RFC 9728 section 5.1) and a JSON-RPC error body. */
  private challenge(res: ServerResponse, status: 401 | 403, error: string | undefined, description: string): true {
    const params = [`resource_metadata="${this.metadataUrl}"`];
    if (this.scopes.length > 0) params.push(`scope="${this.scopes.join(' ')}"`);
    if (error !== undefined) params.push(`error="${error}"`, `error_description="${quoted(description)}"`);
    return send(
      res,
      status,
      { jsonrpc: '2.0', id: null, error: { code: -32000, message: description } },
      { 'WWW-Authenticate': `Bearer ${params.join(', ')}` },
    );
  }
}

/** The scopes a token carries (`scope`, or `scp` as an array or words), read from a token already verified. */
function scopesOf(token: string): string[] {
  const claims = decodeJwt(token);
  const scope = claims.scope ?? claims.scp;
  if (typeof scope === 'string') return scope.split(' ').filter((s) => s !== '');
  return Array.isArray(scope) ? scope.filter((s): s is string => typeof s === 'string') : [];
}

/** Text safe inside a quoted-string of a challenge: no quotes, backslashes or control characters. */
function quoted(text: string): string {
  return text.replace(/["\\\p{Cc}]/gu, ' ').slice(0, 300);
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): true {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
  return true;
}
