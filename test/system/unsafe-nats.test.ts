/**
 * Holder binding on the nats-server it rests on (PROTOCOL 16), under deploy/nats.conf: on a
 * server without the fixes for CVE-2026-33223 and CVE-2026-33246 (2.12.5) a grant bound by
 * `nats.user` is refused even from its holder (`forbidden`, `unsafe_server`, the reason naming
 * CVE-2026-33223), and served with `--allow-unsafe-nats`; on the newest release the same grant
 * serves its holder and a copy of it used by another NATS user gets nothing. `serve`'s ready line
 * and `$introspect` say which.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { IntrospectReply } from '../../src/registry/types.js';
import { type SecuredBus, startSecuredBus, users } from '../harness/identity.js';
import { NatsVersion, natsTool } from '../harness/nats-tools.js';

const session = { profile: 'default', toolContextRefs: ['spy-tools'] };

/** A running setup on `version`, its clients for the agents `agent` and `agent-2`, and calls under a grant. */
async function setup(version: string, env: Record<string, string> = {}) {
  const bus = await startSecuredBus({ server: natsTool('server', version), env });
  const agent = new BusClient(await bus.connect('agent'), { timeoutMs: 10_000 });
  const agent2 = new BusClient(await bus.connect('agent2'), { timeoutMs: 10_000 });
  const bound = bus.grant({ resolve: session, user: users.agent.user, account: 'AGENTS' });
  const unbound = bus.grant({ resolve: session });
  const call = (client: BusClient, grant: string) =>
    client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'c', name: 'spy_run', arguments: {} } },
      { grant },
    );
  const resolve = (client: BusClient, grant: string) => client.request('system.tools', '$resolve', session, { grant });
  // The operator's user may ask every mount; an agent's only what agents call.
  const operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
  const natsServer = async (mount: string) =>
    (await operator.request<IntrospectReply>(mount, '$introspect', {})).natsServer;
  return { bus, agent, agent2, bound, unbound, call, resolve, natsServer };
}

describe('grants bound by nats.user, by what the nats-server guarantees', () => {
  const running: SecuredBus[] = [];
  afterAll(async () => {
    for (const bus of running) await bus.stop();
  });

  it(`refuses a bound grant from its holder on ${NatsVersion.affected}, naming CVE-2026-33223, and serves an unbound one`, async () => {
    const s = await setup(NatsVersion.affected);
    running.push(s.bus);
    const refused = { code: 'forbidden', details: { grant: 'unsafe_server' } };
    await expect(s.call(s.agent, s.bound)).rejects.toMatchObject(refused);
    await expect(s.call(s.agent, s.bound)).rejects.toThrow(/CVE-2026-33223/);
    await expect(s.resolve(s.agent, s.bound)).rejects.toMatchObject(refused);
    expect(s.bus.spy.count()).toBe(0);
    await expect(s.call(s.agent, s.unbound)).resolves.toMatchObject({ isError: false });
    expect(s.bus.service.output()).toMatch(
      new RegExp(`nats-server ${NatsVersion.affected} .*lacks the fixes for CVE-2026-33223.*refused`),
    );
    const report = { version: NatsVersion.affected, supported: false, holderBinding: 'refused' };
    expect(await s.natsServer('system.dispatcher')).toEqual(report);
    expect(await s.natsServer('system.tools')).toEqual(report);
  });

  it(`serves it on ${NatsVersion.affected} with --allow-unsafe-nats, and says so`, async () => {
    const s = await setup(NatsVersion.affected, { MATRIX_ALLOW_UNSAFE_NATS: 'true' });
    running.push(s.bus);
    await expect(s.call(s.agent, s.bound)).resolves.toMatchObject({ isError: false });
    await expect(s.resolve(s.agent, s.bound)).resolves.toMatchObject({ matrixTools: expect.any(Array) });
    expect(s.bus.service.output()).toMatch(/lacks the fixes for CVE-2026-33223.*served anyway \(--allow-unsafe-nats\)/);
    expect(await s.natsServer('system.dispatcher')).toMatchObject({ holderBinding: 'unsafe' });
  });

  it(`serves it to its holder on ${NatsVersion.newest}, and refuses a copy used by another NATS user`, async () => {
    const s = await setup(NatsVersion.newest);
    running.push(s.bus);
    await expect(s.call(s.agent, s.bound)).resolves.toMatchObject({ isError: false });
    await expect(s.resolve(s.agent, s.bound)).resolves.toMatchObject({ matrixTools: expect.any(Array) });
    const wrongHolder = { code: 'forbidden', details: { grant: 'wrong_holder' } };
    const reached = s.bus.spy.count();
    await expect(s.call(s.agent2, s.bound)).rejects.toMatchObject(wrongHolder);
    await expect(s.resolve(s.agent2, s.bound)).rejects.toMatchObject(wrongHolder);
    expect(s.bus.spy.count()).toBe(reached);
    expect(s.bus.service.output()).toContain(
      `nats-server ${NatsVersion.newest}: grants bound by nats.user are checked`,
    );
    expect(await s.natsServer('system.tools')).toEqual({
      version: NatsVersion.newest,
      supported: true,
      holderBinding: 'trusted',
    });
  });
});
