/**
 * NATS auth callout (PROTOCOL 14) on a real nats-server (≥ 2.10) with deploy/nats-auth-callout.conf
 * and a real IdP: an agent that connects with its access token (no password anywhere) calls the
 * dispatcher and nothing else, the least-privilege probes of deploy/nats.conf's agent hold for
 * it, each role gets its own permissions, and an expired, revoked, unmapped, foreign-resource or
 * missing token cannot connect.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { ForbiddenError } from '../../src/bus/errors.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { inboxPrefixOf } from '../../src/identity/callout/roles.js';
import { type CalloutBus, startCalloutBus } from '../harness/auth-callout.js';
import { eventually } from '../harness/eventually.js';
import { refusals } from '../harness/identity.js';
import { contextSpec } from '../harness/registry.js';

const session = { profile: 'default' };

/** A $call of matrix_introspect with `token` as the grant. */
const introspect = (client: BusClient, token: string, id = 'c-1') =>
  client.request<ToolResult>(
    'system.dispatcher',
    '$call',
    { session, call: { id, name: 'matrix_introspect', arguments: {} } },
    { grant: token },
  );

/** Connecting with these credentials is refused by the server. */
async function refusedToConnect(connecting: Promise<NatsConnection>): Promise<void> {
  await expect(connecting).rejects.toThrow(/Authorization Violation|authorization/i);
}

describe.each([
  { mode: 'requests in clear', xkey: false },
  { mode: 'requests encrypted to the callout xkey', xkey: true },
])('auth callout with deploy/nats-auth-callout.conf, $mode', ({ xkey }) => {
  let bus: CalloutBus;
  beforeAll(async () => {
    bus = await startCalloutBus({ xkey });
  }, 60_000);
  afterAll(async () => {
    await bus?.stop();
  });

  it('lets an agent that connects with its token call the dispatcher, as token or as password', async () => {
    const token = await bus.token('agent');
    for (const as of ['token', 'password'] as const) {
      const nc = await bus.connect(token, 'agent', as);
      const agent = new BusClient(nc, { timeoutMs: 10_000 });
      const result = await introspect(agent, token, `c-${as}`);
      expect(result).toMatchObject({ isError: false, name: 'matrix_introspect' });
      agent.close();
      await nc.close();
    }
    expect(bus.callout.output()).toContain('auth-callout: agent:agent-one connected as agent in AGENTS');
  });

  it('refuses a token no rule maps, one for another resource, and a connection with no token', async () => {
    await refusedToConnect(bus.connect(await bus.token('stranger')));
    await refusedToConnect(bus.connect(await bus.token('agent', { resource: 'https://other.example/' })));
    await refusedToConnect(bus.connect('not-a-token'));
    expect(bus.callout.output()).toMatch(/refused: .*no rule of the claims mapping matches/);
    expect(bus.callout.output()).toMatch(/refused: .*not for this resource/);
    expect(bus.callout.output()).toMatch(/refused: .*not a JWT/);
  });
});

describe('least privilege of each role under auth callout', () => {
  let bus: CalloutBus;
  beforeAll(async () => {
    bus = await startCalloutBus();
  }, 60_000);
  afterAll(async () => {
    await bus?.stop();
  });

  it("gives an agent the dispatcher, the registry's read ops and its tasks, and nothing else", async () => {
    const token = await bus.token('agent');
    const nc = await bus.connect(token);
    const refused = refusals(nc);
    const agent = new BusClient(nc, { timeoutMs: 3_000 });
    expect((await introspect(agent, token)).isError).toBe(false);
    expect(
      (await agent.request<{ contexts: string[] }>('system.tools', '$resolve', session, { grant: token })).contexts,
    ).toEqual(['actor-readonly']);
    await agent.request('system.tools', '$list', {});
    await agent.request('system.tasks', '$list', {}, { grant: token });
    // Writes, approvals, the KV bucket, another mount: refused by nats-server, not by the service.
    for (const [mount, op, body] of [
      ['system.tools', '$register', { spec: contextSpec('sneaky') }],
      ['system.tools', '$revoke', { sub: 'agent:someone' }],
      ['system.approvals', '$pending', {}],
      ['system.approvals', '$answer', { approvalId: 'x', decision: 'approve' }],
      ['app.weather', '$get', {}],
    ] as const)
      await expect(agent.request(mount, op, body), `${mount}.${op}`).rejects.toBeInstanceOf(ForbiddenError);
    await expect(agent.requestRaw('$KV.matrix-tool-contexts.sneaky', { spec: 1 })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    // Another agent's inbox, the static agent's, and the events: no subscription is allowed.
    for (const subject of ['_INBOX_agent.>', '_INBOX.>', 'system.dispatcher.events.call', 'system.>'])
      nc.subscribe(subject);
    nc.publish('system.tools.events.changed', 'forged');
    await nc.flush();
    await eventually(() =>
      expect(refused).toEqual(
        expect.arrayContaining([
          'subscription _INBOX_agent.>',
          'subscription _INBOX.>',
          'subscription system.dispatcher.events.call',
          'subscription system.>',
          'publish system.tools.events.changed',
        ]),
      ),
    );
    // Its own inbox is `_INBOX_oidc-<principal>`: its replies came there above.
    expect(inboxPrefixOf('agent:agent-one')).toBe('_INBOX_oidc-agent:agent-one');
    agent.close();
  });

  it('gives an operator the registry writes, an approver the approvals only', async () => {
    const operatorNc = await bus.connect(await bus.token('operator'), 'operator');
    const operator = new BusClient(operatorNc, { timeoutMs: 5_000 });
    expect(await operator.request('system.tools', '$register', { spec: contextSpec('blessed') })).toMatchObject({
      key: 'blessed',
    });
    const approverToken = await bus.token('approver');
    const approverNc = await bus.connect(approverToken, 'approver');
    const approver = new BusClient(approverNc, { timeoutMs: 5_000 });
    expect(
      await approver.request<{ approvals: unknown[] }>('system.approvals', '$pending', {}, { grant: approverToken }),
    ).toMatchObject({ approvals: [] });
    await expect(approver.request('system.tools', '$register', { spec: contextSpec('x') })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(approver.request('system.dispatcher', '$call', {})).rejects.toBeInstanceOf(ForbiddenError);
    operator.close();
    approver.close();
  });

  it('lets a host serve mcp.<name>.<op> and take no other mount’s requests', async () => {
    const hostNc = await bus.connect(await bus.token('host'), 'host');
    const refused = refusals(hostNc);
    const heard: string[] = [];
    hostNc.subscribe('mcp.fs.*', { callback: (_e, m) => void heard.push(m.subject) });
    hostNc.subscribe('app.weather.*');
    await hostNc.flush();
    // The service (a static user) sends what a $call of an MCP tool sends its mount.
    const serviceNc = await connect({ servers: bus.server.url, user: 'service', pass: bus.passwords.service });
    for (const subject of ['mcp.fs.$introspect', 'app.weather.$get']) serviceNc.publish(subject, new Uint8Array());
    await serviceNc.flush();
    await eventually(() => expect(heard).toEqual(['mcp.fs.$introspect']));
    await eventually(() => expect(refused).toContain('subscription app.weather.*'));
    await serviceNc.close();
  });

  // Last of this bus: it revokes agent-one for good.
  it('refuses a token at connect once $revoke names its jti, then once it names its principal; another token connects until then', async () => {
    const serviceNc = await connect({ servers: bus.server.url, user: 'service', pass: bus.passwords.service });
    const service = new BusClient(serviceNc, { timeoutMs: 5_000 });
    const first = await bus.token('agent');
    await (await bus.connect(first)).close();

    await service.request('system.tools', '$revoke', { jti: claimOf(first, 'jti'), reason: 'laptop lost' });
    // The callout hears the revocation through its watch of the service's bucket.
    await eventually(() => refusedToConnect(bus.connect(first)));
    expect(bus.callout.output()).toMatch(/refused: the token was revoked \(jti .*\): laptop lost/);
    const second = await bus.token('agent');
    const nc = await bus.connect(second);
    expect((await introspect(new BusClient(nc, { timeoutMs: 10_000 }), second, 'c-after-jti')).isError).toBe(false);
    await nc.close();

    await service.request('system.tools', '$revoke', { sub: 'agent:agent-one' });
    await eventually(() => refusedToConnect(bus.connect(second)));
    expect(bus.callout.output()).toMatch(
      /refused: the token was revoked \(every token of agent:agent-one issued until /,
    );
    // Another principal is not touched.
    await (await bus.connect(await bus.token('operator'), 'operator')).close();
    // The callout's reader of the bucket writes nothing: not a revocation, not another bucket.
    const reader = await connect({
      servers: bus.server.url,
      user: 'revocations',
      pass: bus.passwords.revocations,
      inboxPrefix: '_INBOX_revocations',
    });
    const refused = refusals(reader);
    reader.publish('$KV.matrix-revocations.jti.forged', '{}');
    reader.publish('$JS.API.STREAM.PURGE.KV_matrix-revocations', '');
    reader.publish('$JS.API.CONSUMER.CREATE.KV_matrix-tool-contexts', '');
    await reader.flush();
    await eventually(() =>
      expect(refused).toEqual(
        expect.arrayContaining([
          'publish $KV.matrix-revocations.jti.forged',
          'publish $JS.API.STREAM.PURGE.KV_matrix-revocations',
          'publish $JS.API.CONSUMER.CREATE.KV_matrix-tool-contexts',
        ]),
      ),
    );
    await reader.close();
    service.close();
    await serviceNc.close();
  }, 60_000);
});

describe('a token that expires', () => {
  let bus: CalloutBus;
  beforeAll(async () => {
    bus = await startCalloutBus({ ttlSeconds: 3 });
  }, 60_000);
  afterAll(async () => {
    await bus?.stop();
  });

  it('ends the connection when it expires, and cannot connect after', async () => {
    const token = await bus.token('agent');
    const nc = await bus.connect(token);
    // nats-server closes a callout user's connection at its JWT's exp: the token's.
    const closed = await Promise.race([nc.closed().then(() => 'closed'), sleep(15_000).then(() => 'still open')]);
    expect(closed).toBe('closed');
    // Past exp and the verifier's 10 s of clock slack, the callout refuses it.
    await sleep(Math.max(0, (decodeExp(token) + 11) * 1000 - Date.now()));
    await refusedToConnect(bus.connect(token));
    expect(bus.callout.output()).toMatch(/refused: .*expired/);
  }, 60_000);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const claimOf = (token: string, claim: string) =>
  (JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as Record<string, unknown>)[claim];
const decodeExp = (token: string) =>
  (JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as { exp: number }).exp;
