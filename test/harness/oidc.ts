/**
 * A real OpenID Provider for the tests: `oidc-provider` (a certified OpenID Connect
 * implementation) on a free loopback port, issuing JWT access tokens for resource indicators
 * (RFC 8707) by the client-credentials grant, and to people by the authorization code flow with
 * PKCE for public clients (its development sign-in and consent pages, which a browser fills in:
 * any login, any password, the login naming the account). Its keys can be rotated and it can be stopped and
 * started again on the same issuer, so key rotation and an unreachable issuer are tested for real.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider, { type ClientMetadata, errors } from 'oidc-provider';
import { freePort } from './nats-server.js';

/** A client of the test IdP, and the claims its tokens carry beside the standard ones. */
export interface TestClient {
  id: string;
  /** Scopes it may ask for, space-separated. */
  scope?: string;
  /** Extra claims of its access tokens (e.g. groups). */
  claims?: Record<string, unknown>;
  /** Its client secret (client_secret_basic or _post); default `CLIENT_SECRET`. */
  secret?: string;
  /** Life of its access tokens, in s; default the IdP's `ttlSeconds`. */
  ttlSeconds?: number;
}

/** A public client of the test IdP (no secret): authorization code with PKCE, back to `redirectUris`. */
export interface TestPublicClient {
  id: string;
  redirectUris: string[];
}

/** A running test IdP. */
export interface TestIdp {
  /** The issuer identifier (`http://127.0.0.1:<port>`). */
  issuer: string;
  /** An access token for `client`, for `resource` (default the IdP's first resource). */
  token(client: string, options?: { scope?: string; resource?: string }): Promise<string>;
  /** Adds a new signing key, used from now on (the old one stays in the JWKS). */
  rotate(): Promise<string>;
  /** Stops serving (the issuer is unreachable until `start`). */
  stop(): Promise<void>;
  /** Serves again on the same port, with the same keys. */
  start(): Promise<void>;
  /** Access tokens issued so far, per client (the token endpoint's successful answers). */
  issued(client: string): number;
  /** Requests to the token endpoint so far that authenticated (HTTP Basic) as `client`, whatever the answer. */
  tokenRequests(client: string): number;
}

/** The secret of a client that names none. */
export const CLIENT_SECRET = 'test-client-secret';
const SECRET = CLIENT_SECRET;

/** Starts an IdP that issues tokens for each of `resources`, to `clients`, living `ttlSeconds`. */
export async function startIdp(options: {
  resources: string[];
  clients: TestClient[];
  ttlSeconds?: number;
  /** Clients people sign in to (authorization code with PKCE); the IdP's dev pages are on with them. */
  publicClients?: TestPublicClient[];
  /** Extra claims of the access tokens of a person signed in, by account (the login typed). */
  accounts?: Record<string, Record<string, unknown>>;
}): Promise<TestIdp> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const keys: JWK[] = [await signingKey('k1')];
  const byId = new Map(options.clients.map((c) => [c.id, c]));
  const publicClients = options.publicClients ?? [];
  const issued = new Map<string, number>();
  const requests = new Map<string, number>();
  const countRequest = (req: IncomingMessage) => {
    const basic = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (req.method !== 'POST' || !req.url?.startsWith('/token') || basic === undefined) return;
    const id = decodeURIComponent(Buffer.from(basic, 'base64').toString().split(':')[0] ?? '');
    requests.set(id, (requests.get(id) ?? 0) + 1);
  };
  let provider = makeProvider();
  let server: Server | undefined;

  function makeProvider(): Provider {
    const p = new Provider(issuer, {
      clients: [
        ...options.clients.map(
          (c): ClientMetadata => ({
            client_id: c.id,
            client_secret: c.secret ?? SECRET,
            grant_types: ['client_credentials'],
            token_endpoint_auth_method: 'client_secret_basic',
            redirect_uris: [],
            response_types: [],
            id_token_signed_response_alg: 'ES256',
            scope: c.scope ?? 'tools',
          }),
        ),
        ...publicClients.map(
          (c): ClientMetadata => ({
            client_id: c.id,
            token_endpoint_auth_method: 'none',
            grant_types: ['authorization_code'],
            response_types: ['code'],
            redirect_uris: c.redirectUris,
            id_token_signed_response_alg: 'ES256',
            scope: 'openid tools approve',
          }),
        ),
      ],
      // The newest key signs; every key is published.
      jwks: { keys: [...keys].reverse() },
      scopes: ['tools', 'approve'],
      features: {
        devInteractions: { enabled: publicClients.length > 0 },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => options.resources[0] as string,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, resource, client) => {
            if (!options.resources.includes(resource)) throw new errors.InvalidTarget();
            return {
              scope: 'tools approve',
              audience: resource,
              accessTokenTTL: byId.get(client.clientId)?.ttlSeconds ?? options.ttlSeconds ?? 300,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: 'ES256' } },
            };
          },
        },
      },
      // A person's token carries their account's claims; a client's, the client's.
      extraTokenClaims: (ctx, token) =>
        'accountId' in token && typeof token.accountId === 'string'
          ? options.accounts?.[token.accountId]
          : byId.get(ctx.oidc.client?.clientId ?? '')?.claims,
    });
    p.on('grant.success', (ctx) => {
      const id = ctx.oidc.client?.clientId ?? '';
      issued.set(id, (issued.get(id) ?? 0) + 1);
    });
    return p;
  }

  // One server for the IdP's life; a rotation swaps the provider behind it.
  const start = async () => {
    server = createServer((req, res) => {
      countRequest(req);
      return provider.callback()(req, res);
    });
    await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', resolve));
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    if (s === undefined) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  await start();

  return {
    issuer,
    start,
    stop,
    issued: (client) => issued.get(client) ?? 0,
    tokenRequests: (client) => requests.get(client) ?? 0,
    async rotate() {
      const kid = `k${keys.length + 1}`;
      keys.push(await signingKey(kid));
      provider = makeProvider();
      return kid;
    },
    async token(client, asked = {}) {
      const body = new URLSearchParams({ grant_type: 'client_credentials' });
      body.set('resource', asked.resource ?? (options.resources[0] as string));
      if (asked.scope !== undefined) body.set('scope', asked.scope);
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${client}:${byId.get(client)?.secret ?? SECRET}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body,
      });
      const reply = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
      if (reply.access_token === undefined)
        throw new Error(`the test IdP gave no token: ${reply.error} ${reply.error_description ?? ''}`);
      return reply.access_token;
    },
  };
}

/** A new ES256 signing key as a private JWK with `kid`. */
async function signingKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'ES256', use: 'sig' };
}
