/**
 * What a new user runs (docs/mcp-oauth.md): `matrix-tools serve --trust-oidc` and
 * `matrix-tools mcp --http --oauth-issuer` as processes, a real IdP, and the MCP SDK's client with
 * its client-credentials provider listing and calling tools as the IdP's client.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';
import { type ServiceProcess, startScript } from '../harness/service.js';

describe('mcp --http --oauth-issuer, as a process', () => {
  let nats: ProcessNats;
  let idp: TestIdp;
  const processes: ServiceProcess[] = [];
  afterAll(async () => {
    for (const p of processes.reverse()) await p.stop('SIGTERM');
    await idp?.stop();
    await nats?.stop();
  });

  it('serves an MCP client that brings an access token: discovery, token, tools/list, tools/call', async () => {
    nats = await startNatsProcess();
    const port = await freePort();
    const resource = `http://127.0.0.1:${port}/mcp`;
    idp = await startIdp({ resources: [resource], clients: [{ id: 'alpha', claims: { groups: ['agents'] } }] });
    const mapping = join(mkdtempSync(join(tmpdir(), 'mcp-oauth-cli-')), 'mapping.json');
    writeFileSync(
      mapping,
      JSON.stringify({
        principal: { claim: 'client_id', prefix: 'agent:' },
        rules: [{ when: { groups: 'agents' }, profile: 'default' }],
      }),
    );
    const oidc = {
      MATRIX_TRUSTED_OIDC_ISSUERS: idp.issuer,
      MATRIX_OIDC_AUDIENCE: resource,
      MATRIX_OIDC_MAPPING: mapping,
    };
    processes.push(await startScript('dist/src/cli/main.js', nats.url, ' ready ', oidc, ['serve']));
    const bridge = await startScript('dist/src/cli/main.js', nats.url, 'mcp bridge: ready', {}, [
      'mcp',
      '--http',
      '--port',
      String(port),
      '--oauth-issuer',
      idp.issuer,
      '--oauth-scopes',
      'tools',
      '--oidc-mapping',
      mapping,
    ]);
    processes.push(bridge);
    expect(bridge.output()).toContain(
      `for ${resource}; metadata at http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`,
    );
    const client = new Client({ name: 'cli-oauth', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resource), {
        authProvider: new ClientCredentialsProvider({
          clientId: 'alpha',
          clientSecret: 'test-client-secret',
          scope: 'tools',
          expectedIssuer: idp.issuer,
        }),
      }),
    );
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('matrix_introspect');
    const result = await client.callTool({ name: 'matrix_introspect', arguments: {} });
    expect(result.isError).toBeFalsy();
    await client.close();
  }, 60_000);
});
