/**
 * An IdP's access token is a grant on the bus (PROTOCOL 14): `serve --trust-oidc` against a real
 * OpenID Provider, a `$call` whose `Matrix-Grant` is the token acts as the principal and session
 * the claims mapping gives it, within the authority of its rule, and `$revoke` by its `jti` ends it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { silentLogger } from '../../src/bus/log.js';
import { serveConfig } from '../../src/cli/config.js';
import { type ServeHandle, serve } from '../../src/cli/serve.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { startIdp, type TestIdp } from '../harness/oidc.js';

const RESOURCE = 'https://bus.example/';

describe('OIDC access tokens as grants on the bus', () => {
  let nats: ProcessNats;
  let idp: TestIdp;
  let served: ServeHandle;
  let client: BusClient;
  const session = { profile: 'default' };
  const call = (grant: string, name = 'matrix_introspect', id = 'c-1') =>
    client.request<ToolResult>('system.dispatcher', '$call', { session, call: { id, name, arguments: {} } }, { grant });

  beforeAll(async () => {
    nats = await startNatsProcess();
    idp = await startIdp({ resources: [RESOURCE], clients: [{ id: 'alpha', claims: { groups: ['agents'] } }] });
    const dir = mkdtempSync(join(tmpdir(), 'oidc-'));
    const mapping = join(dir, 'mapping.json');
    writeFileSync(
      mapping,
      JSON.stringify({
        principal: { claim: 'client_id', prefix: 'agent:' },
        rules: [{ when: { groups: 'agents' }, profile: 'default' }],
      }),
    );
    served = await serve(
      serveConfig(
        { server: nats.url },
        {
          MATRIX_TRUSTED_OIDC_ISSUERS: idp.issuer,
          MATRIX_OIDC_AUDIENCE: RESOURCE,
          MATRIX_OIDC_MAPPING: mapping,
        },
      ),
      silentLogger,
    );
    client = new BusClient(await connectBus({ servers: nats.url }), { timeoutMs: 10_000 });
  });
  afterAll(async () => {
    client?.close();
    await client?.nc.close();
    await served?.stop();
    await idp?.stop();
    await nats?.stop();
  });

  it('calls a tool as the principal its claims map to, and refuses the call without a grant', async () => {
    const token = await idp.token('alpha');
    const result = await call(token);
    expect(result).toMatchObject({ isError: false, name: 'matrix_introspect' });
    await expect(
      client.request('system.dispatcher', '$call', { session, call: { id: 'x', name: 'matrix_introspect' } }),
    ).rejects.toThrow(/Matrix-Grant is missing/);
    // The body asks for more than the token's rule gives: refused, as for any grant.
    await expect(
      client.request(
        'system.dispatcher',
        '$call',
        { session: { profile: 'edit' }, call: { id: 'y', name: 'matrix_invoke', arguments: {} } },
        { grant: token },
      ),
    ).rejects.toThrow(/forbidden|authority/);
  });

  it('refuses a token after $revoke names its jti', async () => {
    const token = await idp.token('alpha');
    expect((await call(token, 'matrix_introspect', 'before')).isError).toBe(false);
    await client.request('system.tools', '$revoke', { jti: decodeJwt(token).jti, reason: 'test' });
    await eventually(() => expect(call(token, 'matrix_introspect', 'after')).rejects.toThrow(/revoked/));
  });
});
