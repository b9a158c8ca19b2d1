/**
 * An edge site: a second nats-server, a leaf node of the hub (deploy/nats.conf with a leafnodes
 * listener; both 2.15.3, where CVE-2026-33246, identity spoofing across leaf nodes, is fixed).
 * Each agent of the site has a local account whose leaf connection logs in to the hub as that
 * agent's own hub user, so the hub attests who sent each request. An agent on the leaf calls
 * through the hub's dispatcher with a grant bound to its user; a copy of the grant used by
 * another agent on the leaf gets nothing (`wrong_holder`), and that agent's own grant serves it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { eventually } from '../harness/eventually.js';
import { callSpyRun, type SecuredBus, spySession as session, startSecuredBus, users } from '../harness/identity.js';
import { freePort, type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { NatsVersion, natsTool } from '../harness/nats-tools.js';

describe('an agent on a leaf node calls through the hub with its bound grant', () => {
  let hub: SecuredBus;
  let leaf: ProcessNats;
  const opened: NatsConnection[] = [];
  const server = process.env.NATS_SERVER_BIN;

  /** A connection of `site` to the leaf, replies on its hub user's inbox prefix. */
  const leafConnection = async (site: 'agent' | 'agent2') => {
    const nc = await connectBus({
      servers: leaf.url,
      user: `site-${site}`,
      pass: 'site-secret',
      inboxPrefix: users[site].inboxPrefix,
    });
    opened.push(nc);
    return nc;
  };
  const onLeaf = async (site: 'agent' | 'agent2') => new BusClient(await leafConnection(site), { timeoutMs: 10_000 });
  const call = callSpyRun;

  beforeAll(async () => {
    process.env.NATS_SERVER_BIN = natsTool('server', NatsVersion.newest);
    const leafPort = await freePort();
    hub = await startSecuredBus({ conf: `leafnodes { listen: "127.0.0.1:${leafPort}" }` });
    // One local account per agent; each account's leaf connection is that agent's hub user.
    const remote = (site: 'agent' | 'agent2') => {
      const { user, pass } = users[site];
      return `{ url: "nats-leaf://${user}:${pass}@127.0.0.1:${leafPort}", account: SITE_${site.toUpperCase()} }`;
    };
    const conf = join(mkdtempSync(join(tmpdir(), 'leaf-')), 'leaf.conf');
    writeFileSync(
      conf,
      [
        `leafnodes { remotes: [ ${remote('agent')}, ${remote('agent2')} ] }`,
        'accounts {',
        '  SITE_AGENT { users: [ { user: site-agent, password: site-secret } ] }',
        '  SITE_AGENT2 { users: [ { user: site-agent2, password: site-secret } ] }',
        '}',
      ].join('\n'),
    );
    leaf = await startNatsProcess(['-c', conf]);
    // The leaf connections are up once a call from the site gets an answer from the hub.
    const probe = await onLeaf('agent');
    const grant = hub.grant({ resolve: session, user: users.agent.user, account: 'AGENTS' });
    await eventually(() => call(probe, grant), { timeoutMs: 20_000, intervalMs: 250 });
  }, 90_000);
  afterAll(async () => {
    for (const nc of opened) await nc.close();
    await leaf?.stop();
    await hub?.stop();
    if (server === undefined) delete process.env.NATS_SERVER_BIN;
    else process.env.NATS_SERVER_BIN = server;
  });

  it("serves the holder's grant from the leaf, and refuses a copy of it to another agent there", async () => {
    const bound = hub.grant({ resolve: session, user: users.agent.user, account: 'AGENTS' });
    const agent = await onLeaf('agent');
    const otherNc = await leafConnection('agent2');
    const other = new BusClient(otherNc, { timeoutMs: 10_000 });
    const ran = hub.spy.count('$run');
    await expect(call(agent, bound)).resolves.toMatchObject({ isError: false });
    expect(hub.spy.count('$run')).toBe(ran + 1);
    await expect(call(other, bound)).rejects.toMatchObject({
      code: 'forbidden',
      details: { grant: 'wrong_holder' },
    });
    // Nor with the holder's identity forged in the header the hub attests it by (CVE-2026-33246).
    const h = headers();
    h.set('Matrix-Grant', bound);
    h.set('Nats-Request-Info', JSON.stringify({ acc: 'AGENTS', user: users.agent.user }));
    const body = { session, call: { id: 'forged', name: 'spy_run', arguments: {} } };
    const answer = await otherNc.request('system.dispatcher.$call', encode(body), { headers: h, timeout: 10_000 });
    expect(decode(answer.data)).toMatchObject({ error: { code: 'forbidden', details: { grant: 'wrong_holder' } } });
    expect(hub.spy.count('$run')).toBe(ran + 1);
    // The control: the other agent's own grant serves it from the same leaf.
    const own = hub.grant({ resolve: session, user: users.agent2.user, account: 'AGENTS' });
    await expect(call(other, own)).resolves.toMatchObject({ isError: false });
  });
});
