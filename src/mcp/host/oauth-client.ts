/**
 * The host as an OAuth client of a remote MCP server that is a protected resource (MCP
 * authorization; RFC 9728, RFC 8414, RFC 8707): the client-credentials grant with a secret.
 *
 * It is the SDK's `OAuthClientProvider`, given to `StreamableHTTPClientTransport` as its
 * `authProvider`: the transport sends the token with every request and, on a `401` whose
 * `WWW-Authenticate` names the resource's metadata, runs the SDK's `auth()` — discovery of the
 * authorization server, then `prepareTokenRequest` here — and retries. It does what the SDK's
 * `ClientCredentialsProvider` (client/auth-extensions.js) does, and besides:
 * - it renews a token shortly before it expires (a tenth of its life, at most 30 s), once for
 *   every request waiting, so the server's `401` is the exception, not the way tokens end;
 * - `fetchFor` answers a `401` to a token in hand itself, once for every request refused with
 *   that token: the transport's own retry allows one per connection at a time, and refuses
 *   ("401 after successful authentication") the requests that were in flight with the old one;
 * - it checks what discovery found before the secret goes anywhere: the authorization server
 *   must be the configured `issuer` (when one is), and its metadata must name itself as issuer
 *   (RFC 8414 section 3.3);
 * - with no `scope` configured it asks for the one the server's challenge names, else the
 *   resource metadata's `scopes_supported` (the SDK's token request takes neither);
 * - with `tokenUrl` it skips discovery (for a server that publishes no metadata);
 * - it keeps the configured credentials when the authorization server refuses them (no dynamic
 *   registration behind the operator's back), and says why for `$introspect`;
 * - it never puts the secret in a message (`redact`) and `describe()` has none.
 */
import {
  auth,
  extractWWWAuthenticateParams,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  UnauthorizedError,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { OAuthClientCredentials } from './config.js';

/** Renew this long before a token expires at most, in ms. */
const MAX_EARLY_MS = 30_000;

/** What `$introspect` shows of a server's OAuth client (no secret, no token). */
export interface OAuthClientState {
  grant: 'client_credentials';
  clientId: string;
  scope?: string;
  /** The configured issuer. */
  issuer?: string;
  /** The authorization server in use (configured or discovered). */
  authorizationServer?: string;
  /** When the token in hand expires (ISO 8601); absent while there is none. */
  tokenExpiresAt?: string;
  /** Tokens obtained so far. */
  tokensIssued: number;
  /** Why the last token request failed, if it did. */
  lastError?: string;
}

/** One remote server's OAuth client; lives as long as the host, across reconnections. */
export class ClientCredentialsClient implements OAuthClientProvider {
  private stored: OAuthClientInformationMixed;
  private current: OAuthTokens | undefined;
  private expiresAt: number | undefined;
  private earlyMs = 0;
  private discovered: OAuthDiscoveryState | undefined;
  private renewing: Promise<OAuthTokens | undefined> | undefined;
  private issued = 0;
  private lastError: string | undefined;
  /** The scope the server's last challenge asked for. */
  private challengeScope: string | undefined;

  constructor(
    private readonly serverUrl: URL,
    private readonly credentials: OAuthClientCredentials,
    private readonly now: () => number = Date.now,
  ) {
    this.stored = { client_id: credentials.clientId, client_secret: credentials.clientSecret };
    if (credentials.tokenUrl !== undefined) {
      const issuer = credentials.issuer ?? new URL(credentials.tokenUrl).origin;
      // Enough of RFC 8414 metadata for the SDK's token request; nothing is discovered.
      const metadata = {
        issuer,
        token_endpoint: credentials.tokenUrl,
        authorization_endpoint: credentials.tokenUrl,
        response_types_supported: [],
        grant_types_supported: ['client_credentials'],
      } as OAuthMetadata;
      this.discovered = { authorizationServerUrl: issuer, authorizationServerMetadata: metadata };
    }
  }

  get redirectUrl(): undefined {
    return undefined;
  }

  /**
   * The scope asked for: the configured one; else, as MCP's scope selection says, the one the
   * server's challenge names, else the resource metadata's `scopes_supported`; else none.
   */
  get clientMetadata(): OAuthClientMetadata {
    const scope =
      this.credentials.scope ?? this.challengeScope ?? this.discovered?.resourceMetadata?.scopes_supported?.join(' ');
    return {
      client_name: 'matrix-tools MCP host',
      redirect_uris: [],
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
      ...(scope !== undefined && scope !== '' && { scope }),
    };
  }

  clientInformation(): OAuthClientInformationMixed {
    return this.stored;
  }

  /** The SDK stamps the configured credentials with the authorization server that first took them. */
  saveClientInformation(info: OAuthClientInformationMixed): void {
    if (info.client_id === this.credentials.clientId) this.stored = info;
  }

  /** The token in hand; one about to expire is renewed first (once, for every caller waiting). */
  async tokens(): Promise<OAuthTokens | undefined> {
    if (this.current === undefined || this.expiresAt === undefined) return this.current;
    if (this.now() < this.expiresAt - this.earlyMs) return this.current;
    this.renewing ??= this.renew().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.current = tokens;
    this.issued++;
    this.lastError = undefined;
    if (tokens.expires_in === undefined) {
      this.expiresAt = undefined;
      return;
    }
    const lifeMs = tokens.expires_in * 1000;
    this.expiresAt = this.now() + lifeMs;
    this.earlyMs = Math.min(MAX_EARLY_MS, lifeMs / 10);
  }

  /** Refused credentials stay the configured ones (never registered anew); a refused token is dropped. */
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'tokens') this.dropToken();
    if ((scope === 'all' || scope === 'discovery') && this.credentials.tokenUrl === undefined)
      this.discovered = undefined;
  }

  /**
   * What discovery found, checked before any secret is sent: the configured issuer, and metadata
   * that names the server it was fetched from (RFC 8414 section 3.3).
   */
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    const server = trimSlash(String(state.authorizationServerUrl));
    const expected = this.credentials.issuer === undefined ? undefined : trimSlash(this.credentials.issuer);
    if (expected !== undefined && server !== expected)
      throw this.failed(
        `the server names the authorization server ${server}, not the configured issuer ${expected}; the client secret is not sent there`,
      );
    const named = state.authorizationServerMetadata?.issuer;
    if (named !== undefined && trimSlash(named) !== server)
      throw this.failed(`the authorization server ${server} publishes metadata of the issuer ${named}`);
    this.discovered = state;
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.discovered;
  }

  prepareTokenRequest(scope?: string): URLSearchParams {
    const params = new URLSearchParams({ grant_type: 'client_credentials' });
    if (scope) params.set('scope', scope);
    return params;
  }

  redirectToAuthorization(): void {
    throw new Error('the client-credentials grant has no authorization redirect');
  }

  saveCodeVerifier(): void {}

  codeVerifier(): string {
    throw new Error('the client-credentials grant has no code verifier');
  }

  /**
   * The transport's fetch: a request whose bearer token the server refuses (`401`) is sent once
   * more with the token that replaced it — in hand already when another request got there
   * first, else obtained now, once for all. The first request, without a token, is left to the
   * transport (its `401` starts discovery).
   */
  fetchFor(base: FetchLike = fetch): FetchLike {
    return async (url, init) => {
      const response = await base(url, init);
      if (response.status === 401 || response.status === 403) {
        const { scope } = extractWWWAuthenticateParams(response);
        if (scope !== undefined && scope !== '') this.challengeScope = scope;
      }
      if (response.status !== 401) return response;
      const headers = new Headers(init?.headers);
      const sent = /^Bearer (\S+)$/.exec(headers.get('authorization') ?? '')?.[1];
      if (sent === undefined) return response;
      const fresh = await this.replace(sent);
      if (fresh === undefined) return response;
      await response.body?.cancel().catch(() => undefined);
      headers.set('authorization', `Bearer ${fresh}`);
      return base(url, { ...init, headers });
    };
  }

  /** A token other than `refused`: the one in hand when it is newer, else a new one (one request for all). */
  private async replace(refused: string): Promise<string | undefined> {
    if (this.current !== undefined && this.current.access_token !== refused) return this.current.access_token;
    if (this.discovered === undefined) return undefined;
    this.renewing ??= this.renew().finally(() => {
      this.renewing = undefined;
    });
    return (await this.renewing)?.access_token;
  }

  /** Drops the token in hand: the next request gets a new one. */
  dropToken(): void {
    this.current = undefined;
    this.expiresAt = undefined;
  }

  /** A failure of the OAuth flow, recorded for `$introspect`; the message without the secret. */
  noteFailure(err: unknown): string {
    this.lastError = this.redact(err instanceof Error ? err.message : String(err));
    return this.lastError;
  }

  /** `text` with the secret (plain, or in a Basic header) cut out. */
  redact(text: string): string {
    const { clientId, clientSecret } = this.credentials;
    const basic = Buffer.from(`${clientId}:${clientSecret}`).toString('base64');
    return text.split(clientSecret).join('***').split(basic).join('***');
  }

  /** What `$introspect` says of it. */
  describe(): OAuthClientState {
    const state: OAuthClientState = {
      grant: 'client_credentials',
      clientId: this.credentials.clientId,
      tokensIssued: this.issued,
    };
    if (this.credentials.scope !== undefined) state.scope = this.credentials.scope;
    if (this.credentials.issuer !== undefined) state.issuer = this.credentials.issuer;
    if (this.discovered !== undefined) state.authorizationServer = String(this.discovered.authorizationServerUrl);
    if (this.current !== undefined && this.expiresAt !== undefined)
      state.tokenExpiresAt = new Date(this.expiresAt).toISOString();
    if (this.lastError !== undefined) state.lastError = this.lastError;
    return state;
  }

  /** A new token by the SDK's flow on what was discovered; none when that fails (the server's 401 then says why). */
  private async renew(): Promise<OAuthTokens | undefined> {
    try {
      const result = await auth(this, {
        serverUrl: this.serverUrl,
        ...(this.discovered?.resourceMetadataUrl !== undefined && {
          resourceMetadataUrl: new URL(this.discovered.resourceMetadataUrl),
        }),
      });
      if (result === 'AUTHORIZED') return this.current;
    } catch (err) {
      this.noteFailure(err);
    }
    this.dropToken();
    return undefined;
  }

  private failed(message: string): Error {
    this.lastError = message;
    return new Error(message);
  }
}

function trimSlash(url: string): string {
  return url.endsWith('/') ? url.slice(0, -1) : url;
}

/** Whether `err` is a failure of OAuth (a token refused, a token request refused, discovery). */
export function isAuthFailure(err: unknown): boolean {
  if (err instanceof OAuthError || err instanceof UnauthorizedError) return true;
  return err instanceof StreamableHTTPError && (err.code === 401 || err.code === 403);
}

/** `err` said for an operator: which side refused what. */
export function authFailureMessage(err: unknown, client: ClientCredentialsClient): string {
  const server = client.describe().authorizationServer ?? 'the authorization server';
  if (err instanceof OAuthError)
    return `OAuth: ${server} refused the client-credentials token request: ${err.errorCode} (${err.message})`;
  if (err instanceof StreamableHTTPError && err.code === 403)
    return `OAuth: the server wants a scope the access token from ${server} lacks (HTTP 403): ${err.message}`;
  if (err instanceof StreamableHTTPError)
    return `OAuth: the server refused the access token from ${server} (HTTP ${err.code}): ${err.message}`;
  return `OAuth: ${(err as Error).message}`;
}
