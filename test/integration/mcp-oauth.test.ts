/**
 * OAuth 2.1 on the MCP HTTP endpoint (PROTOCOL 14) against a real IdP: the MCP SDK's own client,
 * with its client-credentials provider, finds the authorization server through the bridge's
 * Protected Resource Metadata, gets a token for the bridge's resource and lists and calls tools
 * as the principal the claims mapping gives; the service, trusting the same issuer for the same
 * resource, takes the token as the session's grant, and no target sees it. Every refusal answers
 * with its status and its challenge.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { silentLogger } from '../../src/bus/log.js';
import { serveConfig } from '../../src/cli/config.js';
import { type ServeHandle, serve } from '../../src/cli/serve.js';
import { type McpHttpBridge, startMcpHttp } from '../../src/mcp/http.js';
import { OAuthResource } from '../../src/mcp/oauth-resource.js';
import { eventually } from '../harness/eventually.js';
import { freePort, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';
import { startTarget, type Target } from '../harness/targets.js';

const mapping = {
  principal: { claim: 'client_id', prefix: 'agent:' },
  rules: [{ when: { groups: 'agents' }, profile: 'default', toolContextRefs: ['echo-tools'] }],
};
const echoContext = {
  key: 'echo-tools',
  title: 'Echo',
  description: 'a tool that reaches app.echo',
  matrixTools: [
    {
      name: 'echo_run',
      description: 'runs on app.echo',
      inputSchema: { type: 'object' },
      target: 'app.echo',
      op: '$run',
    },
  ],
  permissions: { approval: 'never' },
};

describe('the MCP HTTP endpoint as an OAuth 2.1 protected resource', () => {
  let nats: ProcessNats;
  let idp: TestIdp;
  let stranger: TestIdp;
  let served: ServeHandle;
  let oauth: OAuthResource;
  let bridge: McpHttpBridge;
  let operator: BusClient;
  let echo: Target;
  let resource: string;

  beforeAll(async () => {
    nats = await startNatsProcess();
    const port = await freePort();
    resource = `http://127.0.0.1:${port}/mcp`;
    const clients = [
      { id: 'alpha', scope: 'tools approve', claims: { groups: ['agents'] } },
      { id: 'nobody', claims: { groups: ['visitors'] } },
    ];
    idp = await startIdp({ resources: [resource, 'https://other.example/'], clients });
    stranger = await startIdp({ resources: [resource], clients });
    const dir = mkdtempSync(join(tmpdir(), 'mcp-oauth-'));
    const mappingFile = join(dir, 'mapping.json');
    writeFileSync(mappingFile, JSON.stringify(mapping));
    served = await serve(
      serveConfig(
        { server: nats.url },
        { MATRIX_TRUSTED_OIDC_ISSUERS: idp.issuer, MATRIX_OIDC_AUDIENCE: resource, MATRIX_OIDC_MAPPING: mappingFile },
      ),
      silentLogger,
    );
    operator = new BusClient(await connectBus({ servers: nats.url }), { timeoutMs: 10_000 });
    await operator.request('system.tools', '$register', { spec: echoContext });
    echo = await startTarget(operator.nc, 'app.echo', { $run: (args) => ({ echoed: args }) });
    oauth = new OAuthResource({ issuer: idp.issuer, resource, mapping, scopes: ['tools'] });
    expect(await oauth.start(operator.nc)).toEqual([]);
    bridge = await startMcpHttp(operator.nc, { port, oauth });
  }, 60_000);
  afterAll(async () => {
    await bridge?.close();
    oauth?.stop();
    echo?.stop();
    operator?.close();
    await operator?.nc.close();
    await served?.stop();
    await idp?.stop();
    await stranger?.stop();
    await nats?.stop();
  });

  /** A POST of initialize with `token` (or none), as an MCP client's first request. */
  const initialize = (token?: string) =>
    fetch(resource, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
  const metadataUrl = () => `${new URL(resource).origin}/.well-known/oauth-protected-resource/mcp`;

  it('serves its Protected Resource Metadata, at the path-suffixed and the root well-known URLs', async () => {
    for (const url of [metadataUrl(), `${new URL(resource).origin}/.well-known/oauth-protected-resource`]) {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({
        resource,
        authorization_servers: [idp.issuer],
        bearer_methods_supported: ['header'],
        scopes_supported: ['tools'],
        resource_name: 'matrix-tools MCP bridge',
      });
    }
  });

  it("lets the MCP SDK's client discover, get a token, list and call tools as the mapped principal", async () => {
    const transport = new StreamableHTTPClientTransport(new URL(resource), {
      authProvider: new ClientCredentialsProvider({
        clientId: 'alpha',
        clientSecret: 'test-client-secret',
        // The SDK asks for the scopes its provider names (the challenge's scope is for upscoping).
        scope: 'tools',
        expectedIssuer: idp.issuer,
      }),
    });
    const client = new Client({ name: 'oauth-test', version: '1.0.0' });
    await client.connect(transport);
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toContain('echo_run');
    const result = await client.callTool({ name: 'echo_run', arguments: { hello: 'world' } });
    expect(result.isError).toBeFalsy();
    expect(JSON.stringify(result.content)).toContain('world');
    // The target saw the principal and session the token maps to, and never the token.
    const seen = echo.seen.at(-1);
    expect(seen?.headers['Matrix-Principal']).toBe('agent:alpha');
    expect(Object.keys(seen?.headers ?? {})).not.toContain('Matrix-Grant');
    expect(JSON.stringify(echo.seen)).not.toMatch(/eyJ[\w-]+\.eyJ/);
    await client.close();
  });

  it('answers without a token 401 with the metadata URL and the scope in its challenge', async () => {
    const response = await initialize();
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrl()}", scope="tools"`);
  });

  it('refuses a token of another resource, of another issuer, alg none, unmapped: 401 invalid_token', async () => {
    const good = await idp.token('alpha', { scope: 'tools' });
    const [, payload] = good.split('.');
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${payload}.`;
    const cases = {
      'another resource': await idp.token('alpha', { scope: 'tools', resource: 'https://other.example/' }),
      'another issuer': await stranger.token('alpha', { scope: 'tools' }),
      'alg none': none,
      'a claims mapping no rule matches': await idp.token('nobody', { scope: 'tools' }),
    };
    for (const [name, token] of Object.entries(cases)) {
      const response = await initialize(token);
      expect(response.status, name).toBe(401);
      const challenge = response.headers.get('www-authenticate') ?? '';
      expect(challenge, name).toMatch(/^Bearer resource_metadata="[^"]+", scope="tools", error="invalid_token"/);
    }
  });

  it('refuses a token without the required scope: 403 insufficient_scope', async () => {
    const response = await initialize(await idp.token('alpha', { scope: 'approve' }));
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toMatch(/error="insufficient_scope"/);
    expect(response.headers.get('www-authenticate')).toMatch(/scope="tools"/);
  });

  it('refuses an expired token, on a clock past its exp and the 10 s of slack', async () => {
    const token = await idp.token('alpha', { scope: 'tools' });
    const exp = decodeJwt(token).exp as number;
    const later = new OAuthResource({ issuer: idp.issuer, resource, mapping, now: () => (exp + 11) * 1000 });
    await later.start();
    const port = await freePort();
    const laterBridge = await startMcpHttp(operator.nc, { port, oauth: later });
    try {
      // The same resource identifier, served on another port: the token's aud still names it.
      const response = await fetch(laterBridge.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: '{}',
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
      expect(await response.text()).toMatch(/expired/);
    } finally {
      await laterBridge.close();
      later.stop();
    }
  });

  it('refuses a token after $revoke names its jti, with the challenge', async () => {
    const token = await idp.token('alpha', { scope: 'tools' });
    expect((await initialize(token)).status).toBe(200);
    await operator.request('system.tools', '$revoke', { jti: decodeJwt(token).jti, reason: 'test' });
    await eventually(async () => {
      const response = await initialize(token);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/resource_metadata=.*error="invalid_token"/);
      expect(await response.text()).toMatch(/revoked/);
    });
  });
});
