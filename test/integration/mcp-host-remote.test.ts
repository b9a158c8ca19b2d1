/**
 * Remote Streamable HTTP servers behind the MCP host, for real: MCP SDK servers on loopback
 * ports, one an OAuth protected resource (the project's `OAuthResource`: RFC 9728 metadata, a
 * `401` with `resource_metadata`, tokens checked against the issuer's JWKS) of a real IdP
 * (oidc-provider, test/harness/oidc.ts), called through `system.dispatcher`.
 *
 * What holds: the host finds the authorization server from the server's `401`, gets a token by
 * the client-credentials grant and calls; a wrong secret or an authorization server other than
 * the configured issuer leaves the server `failed` with the reason in `$introspect` and
 * `mcp servers`, never the secret; without `issuer` or `scope` the host takes what the
 * resource names; a token that expires is renewed, and a token the server refuses is replaced
 * once for all the calls made with it; a slow server is not taken for a gone one; a remote server
 * that goes away is `restarting`/`failed` with calls answered `unavailable` (one in flight too),
 * and `ready` again by itself once it is back.
 */
import { createServer, type Server as HttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMcpServers } from '../../src/cli/mcp-host.js';
import { OAuthResource } from '../../src/mcp/oauth-resource.js';
import { memoryOutput } from '../harness/cli.js';
import { eventually } from '../harness/eventually.js';
import { type HostWorld, startHostWorld } from '../harness/mcp-host.js';
import { freePort } from '../harness/nats-server.js';
import { CLIENT_SECRET, startIdp, type TestIdp } from '../harness/oidc.js';

/** `${env:NAME}` as the mcpServers file writes it. */
const envRef = (name: string): string => ['$', '{env:', name, '}'].join('');

const WRONG_SECRET = 'not-the-secret-of-host-wrong';

/** What `$introspect` of a host mount says. */
interface HostIntrospect {
  state: string;
  restarts: number;
  lastError?: string;
  tools: Array<{ tool: string; name: string }>;
  oauth?: {
    grant: string;
    clientId: string;
    issuer?: string;
    authorizationServer?: string;
    tokenExpiresAt?: string;
    tokensIssued: number;
    lastError?: string;
  };
}

/** A remote MCP server on a fixed port that can be stopped and started again. */
interface Remote {
  url: string;
  /** Every access token it took, in order. */
  tokens: string[];
  /** Tokens it answers with a `401` challenge as if revoked. */
  revoked: Set<string>;
  /** `401`s it answered to /mcp. */
  challenges: number;
  /** Calls of `slow` it started. */
  slowStarted: number;
  /** Every request waits this long before it is answered, in ms. */
  delayMs: number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A stateless SDK server: `whoami` answers the `client_id` of the caller's token; `slow` waits
 * `ms`. With `resource` it is a protected resource that also refuses an expired token at once
 * (no clock tolerance), so a client that does not renew is caught.
 */
function remoteServer(port: number, resource?: OAuthResource): Remote {
  let http: HttpServer | undefined;
  const remote: Remote = {
    url: `http://127.0.0.1:${port}/mcp`,
    tokens: [],
    revoked: new Set(),
    challenges: 0,
    slowStarted: 0,
    delayMs: 0,
    async start() {
      http = createServer((req, res) => void handle(req, res));
      await new Promise<void>((resolve) => http?.listen(port, '127.0.0.1', resolve));
    },
    async stop() {
      const h = http;
      http = undefined;
      h?.closeAllConnections();
      await new Promise<void>((resolve) => (h === undefined ? resolve() : h.close(() => resolve())));
    },
  };
  const challenge = (res: ServerResponse, why: string) => {
    remote.challenges++;
    res
      .writeHead(401, {
        'WWW-Authenticate': `Bearer resource_metadata="${resource?.metadataUrl}", error="invalid_token", error_description="${why}"`,
      })
      .end();
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (remote.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, remote.delayMs));
    if (resource !== undefined) {
      if (await resource.intercept(req, res, '/mcp')) {
        if (res.statusCode === 401) remote.challenges++;
        return;
      }
    }
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (resource !== undefined && token !== undefined) {
      if (remote.revoked.has(token)) return challenge(res, 'revoked');
      if ((decodeJwt(token).exp ?? 0) * 1000 <= Date.now()) return challenge(res, 'expired');
      if (remote.tokens.at(-1) !== token) remote.tokens.push(token);
    }
    const server = new Server({ name: 'remote', version: '2.0.0' }, { capabilities: { tools: {} } });
    const readOnly = { readOnlyHint: true };
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        { name: 'whoami', description: 'Says who called.', inputSchema: { type: 'object' }, annotations: readOnly },
        {
          name: 'slow',
          description: 'Waits.',
          inputSchema: { type: 'object', properties: { ms: { type: 'number' } } },
          annotations: readOnly,
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      if (request.params.name === 'slow') {
        remote.slowStarted++;
        await new Promise((resolve) => setTimeout(resolve, Number(request.params.arguments?.ms ?? 0)).unref());
        return { content: [{ type: 'text', text: 'slept' }] };
      }
      const who = token === undefined ? 'anonymous' : String(decodeJwt(token).client_id);
      return { content: [{ type: 'text', text: `called by ${who}` }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void transport.close());
    await server.connect(transport);
    await transport.handleRequest(req, res);
  };
  return remote;
}

describe('remote MCP servers behind the host: OAuth client credentials, and a server that goes away', () => {
  let idp: TestIdp;
  let stranger: TestIdp;
  let resource: OAuthResource;
  let secured: Remote;
  let flaky: Remote;
  let world: HostWorld;
  const log: string[] = [];
  const introspect = (mount: string) => world.client.request<HostIntrospect>(mount, '$introspect', {});
  const text = (result: { structured?: unknown }) => JSON.stringify(result.structured);

  beforeAll(async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/mcp`;
    idp = await startIdp({
      resources: [url],
      clients: [{ id: 'host' }, { id: 'host-wrong' }, { id: 'short', ttlSeconds: 2 }, { id: 'elsewhere' }],
    });
    stranger = await startIdp({ resources: [url], clients: [{ id: 'elsewhere' }] });
    resource = new OAuthResource({
      issuer: idp.issuer,
      resource: url,
      mapping: { principal: { claim: 'client_id' }, rules: [{ profile: 'default', toolContextRefs: ['remote'] }] },
      scopes: ['tools'],
    });
    expect(await resource.start()).toEqual([]);
    secured = remoteServer(port, resource);
    await secured.start();
    flaky = remoteServer(await freePort());
    await flaky.start();

    process.env.MCP_REMOTE_TEST_SECRET = CLIENT_SECRET;
    process.env.MCP_REMOTE_TEST_WRONG = WRONG_SECRET;
    const oauth = (clientId: string, secretVar = 'MCP_REMOTE_TEST_SECRET', issuer = idp.issuer) => ({
      url,
      oauth: { clientId, clientSecret: envRef(secretVar), scope: 'tools', issuer },
    });
    world = await startHostWorld(
      {
        secured: oauth('host'),
        trusting: { url, oauth: { clientId: 'host', clientSecret: envRef('MCP_REMOTE_TEST_SECRET') } },
        wrong: oauth('host-wrong', 'MCP_REMOTE_TEST_WRONG'),
        short: oauth('short'),
        elsewhere: oauth('elsewhere', 'MCP_REMOTE_TEST_SECRET', stranger.issuer),
        flaky: { url: flaky.url },
      },
      {
        timing: { initializeTimeoutMs: 10_000, firstBackoffMs: 200, maxBackoffMs: 1_000, pingIntervalMs: 300 },
        logger: { info: (m) => log.push(m), error: (m) => log.push(m) },
      },
    );
  }, 60_000);
  afterAll(async () => {
    if (process.env.MCP_HOST_DEBUG) console.log(log.join('\n'));
    await world?.stop();
    await secured?.stop();
    await flaky?.stop();
    resource?.stop();
    await idp?.stop();
    await stranger?.stop();
  });

  it('finds the authorization server from the 401, gets a client-credentials token and calls through the dispatcher', async () => {
    const result = await world.call(['mcp.secured'], 'secured_whoami', {});
    expect(result.isError).toBe(false);
    expect(text(result)).toContain('called by host');
    expect(secured.challenges).toBeGreaterThan(0);
    expect(idp.issued('host')).toBeGreaterThan(0);
    const info = await introspect('mcp.secured');
    expect(info.state).toBe('ready');
    expect(info.oauth).toMatchObject({
      grant: 'client_credentials',
      clientId: 'host',
      issuer: idp.issuer,
      authorizationServer: idp.issuer,
    });
    expect(info.oauth?.tokensIssued).toBeGreaterThan(0);
    expect(JSON.stringify(info)).not.toContain(CLIENT_SECRET);
    expect(JSON.stringify(info)).not.toContain(secured.tokens.at(-1));
    const registered = await world.registry.registry.resolve({ profile: 'test', toolContextRefs: ['mcp.secured'] });
    expect(registered.matrixTools.map((t) => t.name).sort()).toEqual(['secured_slow', 'secured_whoami']);
    expect(JSON.stringify(registered)).not.toContain(CLIENT_SECRET);
    expect(log.join('\n')).not.toContain(CLIENT_SECRET);
  });

  it('without an issuer, takes the authorization server the resource names', async () => {
    const result = await world.call(['mcp.trusting'], 'trusting_whoami', {});
    expect(text(result)).toContain('called by host');
    const info = await introspect('mcp.trusting');
    expect(info.oauth?.issuer).toBeUndefined();
    expect(info.oauth?.authorizationServer).toBe(idp.issuer);
  });

  it('leaves a server whose secret is wrong failed, and says why in $introspect and mcp servers, without the secret', async () => {
    const info = await eventually(async () => {
      const i = await introspect('mcp.wrong');
      expect(i.state).toBe('failed');
      expect(i.lastError).toMatch(/refused the client-credentials token request: invalid_client/);
      return i;
    });
    expect(info.oauth?.lastError).toMatch(/invalid_client/);
    expect(info.oauth?.tokensIssued).toBe(0);
    expect(idp.tokenRequests('host-wrong')).toBeGreaterThan(0);
    expect(JSON.stringify(info)).not.toContain(WRONG_SECRET);
    const out = memoryOutput();
    await listMcpServers(world.client, {}, out);
    expect(out.stdout).toMatch(/^mcp\.wrong\s+failed\s.*invalid_client/m);
    expect(out.stdout).toMatch(/^mcp\.secured\s+ready\s/m);
    expect(out.stdout + out.stderr).not.toContain(WRONG_SECRET);
    expect(log.join('\n')).not.toContain(WRONG_SECRET);
  });

  it('sends no secret to an authorization server other than the configured issuer', async () => {
    const info = await eventually(async () => {
      const i = await introspect('mcp.elsewhere');
      expect(i.state).toBe('failed');
      return i;
    });
    expect(info.lastError).toMatch(/names the authorization server .* not the configured issuer/);
    expect(idp.tokenRequests('elsewhere')).toBe(0);
    expect(stranger.tokenRequests('elsewhere')).toBe(0);
  });

  it('renews a token that expires: calls go on past its life', async () => {
    const first = await world.call(['mcp.short'], 'short_whoami', {});
    expect(text(first)).toContain('called by short');
    const issued = idp.issued('short');
    const seen = secured.tokens.filter((t) => decodeJwt(t).client_id === 'short');
    const exp = Math.max(...seen.map((t) => (decodeJwt(t).exp ?? 0) * 1000));
    // The server refuses a token past its exp at once; wait till the last one seen is past it.
    await eventually(() => Date.now() > exp + 100, { timeoutMs: 10_000, intervalMs: 100 });
    const later = await world.call(['mcp.short'], 'short_whoami', {});
    expect(later.isError, later.content).toBe(false);
    expect(text(later)).toContain('called by short');
    expect(idp.issued('short')).toBeGreaterThan(issued);
    const renewed = secured.tokens.filter((t) => decodeJwt(t).client_id === 'short');
    expect(new Set(renewed).size).toBeGreaterThan(new Set(seen).size);
    expect((await introspect('mcp.short')).state).toBe('ready');
  });

  it('gets a new token when the server answers 401 to the one in hand, and the call goes through', async () => {
    await world.call(['mcp.secured'], 'secured_whoami', {});
    const inHand = secured.tokens.filter((t) => decodeJwt(t).client_id === 'host').at(-1) as string;
    const issued = idp.issued('host');
    const challenges = secured.challenges;
    secured.revoked.add(inHand);
    const result = await world.call(['mcp.secured'], 'secured_whoami', {});
    expect(result.isError, result.content).toBe(false);
    expect(text(result)).toContain('called by host');
    expect(secured.challenges).toBeGreaterThan(challenges);
    expect(idp.issued('host')).toBeGreaterThan(issued);
    expect(secured.tokens.at(-1)).not.toBe(inHand);
  });

  it('replaces a refused token under calls made together: every one goes through, the server stays ready', async () => {
    await world.call(['mcp.secured'], 'secured_whoami', {});
    const inHand = secured.tokens.filter((t) => decodeJwt(t).client_id === 'host').at(-1) as string;
    const restarts = (await introspect('mcp.secured')).restarts;
    secured.revoked.add(inHand);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => world.call(['mcp.secured'], 'secured_whoami', {})),
    );
    for (const r of results) expect(r.isError, r.content).toBe(false);
    const info = await introspect('mcp.secured');
    expect(info.state).toBe('ready');
    expect(info.restarts).toBe(restarts);
  });

  it('does not take a slow server for a gone one: pings slower than their interval leave it ready', async () => {
    const before = await introspect('mcp.flaky');
    expect(before.state).toBe('ready');
    const pings = log.length;
    flaky.delayMs = 1_000; // over three ping intervals (300 ms) per request
    try {
      const slow = await world.call(['mcp.flaky'], 'flaky_whoami', {});
      expect(slow.isError, slow.content).toBe(false);
    } finally {
      flaky.delayMs = 0;
    }
    const after = await introspect('mcp.flaky');
    expect(after.state).toBe('ready');
    expect(after.restarts).toBe(before.restarts);
    expect(log.slice(pings).join('\n')).not.toMatch(/mcp\.flaky closed/);
  });

  it('restarts a remote server that goes away: calls unavailable meanwhile, ready again once it is back', async () => {
    expect(text(await world.call(['mcp.flaky'], 'flaky_whoami', {}))).toContain('called by anonymous');
    const before = (await introspect('mcp.flaky')).restarts;
    // A call in flight when the server goes.
    const started = flaky.slowStarted;
    const running = world.call(['mcp.flaky'], 'flaky_slow', { ms: 30_000 });
    await eventually(() => flaky.slowStarted > started);
    await flaky.stop();
    const cut = await running;
    expect(cut.error?.code, cut.content).toBe('unavailable');

    const down = await eventually(async () => {
      const i = await introspect('mcp.flaky');
      expect(['restarting', 'failed']).toContain(i.state);
      return i;
    });
    expect(down.lastError).toBeDefined();
    // While it is down the host answers at once, without reaching for the server.
    const refused = await world.call(['mcp.flaky'], 'flaky_whoami', {});
    expect(refused.error?.code).toBe('unavailable');
    expect(refused.content).toMatch(/mcp\.flaky is (restarting|failed)/);

    await flaky.start();
    await eventually(async () => expect((await introspect('mcp.flaky')).state).toBe('ready'), { timeoutMs: 15_000 });
    const back = await world.call(['mcp.flaky'], 'flaky_whoami', {});
    expect(back.isError, back.content).toBe(false);
    expect(text(back)).toContain('called by anonymous');
    expect((await introspect('mcp.flaky')).restarts).toBeGreaterThan(before);
  }, 60_000);
});
