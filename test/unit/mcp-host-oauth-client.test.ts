/**
 * The host's OAuth client (src/mcp/host/oauth-client.ts) against a real IdP (oidc-provider), on
 * a clock of its own: a token is renewed shortly before it expires, once for every caller waiting
 * at that moment; the secret is sent to no authorization server but the configured one, and
 * never appears in what it says.
 */
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientCredentialsClient } from '../../src/mcp/host/oauth-client.js';
import { CLIENT_SECRET, startIdp, type TestIdp } from '../harness/oidc.js';

describe("the MCP host's client-credentials client", () => {
  let idp: TestIdp;
  const resource = 'https://tools.example/mcp';

  beforeAll(async () => {
    idp = await startIdp({ resources: [resource], clients: [{ id: 'host' }, { id: 'other' }], ttlSeconds: 300 });
  });
  afterAll(async () => {
    await idp?.stop();
  });

  const clientOf = (clientId: string, now: () => number, clientSecret = CLIENT_SECRET) =>
    new ClientCredentialsClient(
      new URL(`${idp.issuer}/not-a-resource`),
      { clientId, clientSecret, issuer: idp.issuer, tokenUrl: `${idp.issuer}/token`, scope: 'tools' },
      now,
    );

  it('renews a token a tenth of its life before it expires, once for every caller waiting', async () => {
    let now = Date.now();
    const client = clientOf('host', () => now);
    expect(await client.tokens()).toBeUndefined();
    expect(await auth(client, { serverUrl: `${idp.issuer}/not-a-resource` })).toBe('AUTHORIZED');
    const first = (await client.tokens())?.access_token;
    expect(first).toBeDefined();
    const requests = idp.tokenRequests('host');
    // 300 s of life: renewed from 270 s on (the earliest of 30 s and a tenth of its life).
    now += 269_000;
    expect((await client.tokens())?.access_token).toBe(first);
    expect(idp.tokenRequests('host')).toBe(requests);
    now += 2_000;
    const [a, b, c] = await Promise.all([client.tokens(), client.tokens(), client.tokens()]);
    expect(a?.access_token).toBeDefined();
    expect(a?.access_token).not.toBe(first);
    expect(b?.access_token).toBe(a?.access_token);
    expect(c?.access_token).toBe(a?.access_token);
    expect(idp.tokenRequests('host')).toBe(requests + 1);
    expect(client.describe()).toMatchObject({ tokensIssued: 2, clientId: 'host', authorizationServer: idp.issuer });
  });

  it('says why a refused secret was refused, without the secret', async () => {
    const wrong = 'a-wrong-secret-never-printed';
    const client = clientOf('other', Date.now, wrong);
    const failure = await auth(client, { serverUrl: `${idp.issuer}/not-a-resource` }).catch((err: Error) => err);
    expect(failure).toBeInstanceOf(Error);
    client.noteFailure(failure);
    const said = JSON.stringify(client.describe());
    expect(said).toMatch(/client authentication failed/);
    expect(said).not.toContain(wrong);
    expect(client.redact(`x ${wrong} y ${Buffer.from(`other:${wrong}`).toString('base64')}`)).toBe('x *** y ***');
  });

  it('refuses an authorization server other than the configured issuer, and metadata of another issuer', () => {
    const client = new ClientCredentialsClient(new URL(resource), {
      clientId: 'host',
      clientSecret: CLIENT_SECRET,
      issuer: idp.issuer,
    });
    const metadata = (issuer: string) => ({ issuer, token_endpoint: `${issuer}/token` }) as OAuthMetadata;
    expect(() =>
      client.saveDiscoveryState({
        authorizationServerUrl: 'https://elsewhere.example',
        authorizationServerMetadata: metadata('https://elsewhere.example'),
      }),
    ).toThrow(/names the authorization server https:\/\/elsewhere\.example, not the configured issuer/);
    expect(() =>
      client.saveDiscoveryState({
        authorizationServerUrl: `${idp.issuer}/`,
        authorizationServerMetadata: metadata('https://elsewhere.example'),
      }),
    ).toThrow(/publishes metadata of the issuer https:\/\/elsewhere\.example/);
    client.saveDiscoveryState({
      authorizationServerUrl: `${idp.issuer}/`,
      authorizationServerMetadata: metadata(idp.issuer),
    });
    expect(client.discoveryState()?.authorizationServerUrl).toBe(`${idp.issuer}/`);
  });
});
