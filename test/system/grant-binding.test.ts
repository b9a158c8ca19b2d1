/**
 * Grants that hold only for their holder, under deploy/nats.conf with a service that trusts one
 * issuer and names its audience: a grant bound to NATS user `agent` is refused to `agent-2`
 * (`wrong_holder`; blind requests: blind-requests.test.ts), and one bound to an inbox prefix
 * holds only in the service's own account (an approver's); a grant for another audience
 * (`audience_mismatch`) or living longer than the service's maximum (`too_long`) is refused, and
 * `matrix-tools grant` will not mint one; a revoked grant is refused (`revoked`) by every
 * instance within a second, by one command, and an agent cannot revoke anything.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { GrantSpec } from '../../src/identity/mint.js';
import { RevocationStore, Revocations } from '../../src/identity/revocations.js';
import { GrantVerifier } from '../../src/identity/verify.js';
import { deployments, operatorDeployment } from '../harness/deployments.js';
import { eventually } from '../harness/eventually.js';
import { callSpyRun, type SecuredBus, startSecuredBus, users } from '../harness/identity.js';
import { cli } from '../harness/service.js';

const AUDIENCE = 'matrix-test';
const session = { profile: 'default', toolContextRefs: ['spy-tools'] };
const reject = (failure: string) => ({ code: 'forbidden', details: { grant: failure } });

describe('grants bound to their holder, audience and lifetime, and revocation', () => {
  let bus: SecuredBus;
  let agent: BusClient;
  let agent2: BusClient;
  let operator: BusClient;
  const dir = mkdtempSync(join(tmpdir(), 'grant-binding-'));

  /** A grant for this deployment, bound to NATS user `agent` unless told. */
  const grant = (more: Partial<GrantSpec> = {}, now?: number) =>
    bus.grant(
      { resolve: session, audience: AUDIENCE, user: users.agent.user, account: 'AGENTS', ...more },
      undefined,
      now,
    );
  const call = callSpyRun;
  const resolve = (client: BusClient, grantText: string) =>
    client.request('system.tools', '$resolve', session, { grant: grantText });

  beforeAll(async () => {
    bus = await startSecuredBus({ env: { MATRIX_GRANT_AUDIENCE: AUDIENCE } });
    agent = new BusClient(await bus.connect('agent'), { timeoutMs: 10_000 });
    agent2 = new BusClient(await bus.connect('agent2'), { timeoutMs: 10_000 });
    operator = new BusClient(await bus.connect('operator'), { timeoutMs: 10_000 });
  }, 60_000);
  afterAll(async () => {
    await bus?.stop();
  });

  it("serves a bound grant to its holder, and refuses a copy of it to another agent's user (wrong_holder)", async () => {
    const bound = grant();
    await expect(call(agent, bound)).resolves.toMatchObject({ isError: false });
    await expect(resolve(agent, bound)).resolves.toMatchObject({ matrixTools: expect.any(Array) });
    await expect(call(agent2, bound)).rejects.toMatchObject(reject('wrong_holder'));
    await expect(resolve(agent2, bound)).rejects.toMatchObject(reject('wrong_holder'));
    // Bound to the user in another account: not this one.
    await expect(call(agent, grant({ account: 'MATRIX' }))).rejects.toMatchObject(reject('wrong_holder'));
    // An unbound grant still serves whoever holds it (docs/security.md says to bind them).
    const unbound = grant({ user: undefined, account: undefined });
    await expect(call(agent2, unbound)).resolves.toMatchObject({ isError: false });
  });

  it("refuses an agent's grant bound by inbox prefix only: across the import the reply subject is the server's", async () => {
    const inboxOnly = grant({ user: undefined, account: undefined, inbox: users.agent.inboxPrefix });
    await expect(call(agent, inboxOnly)).rejects.toMatchObject(reject('wrong_holder'));
    await expect(call(agent, inboxOnly)).rejects.toThrow(/--user/);
  });

  it('refuses a grant bound to a user where nothing is attested: inside the service’s own account', async () => {
    const approver = grant({ principal: 'user:ops-ann', session: 'sess-ann', approve: {}, user: users.operator.user });
    await expect(operator.request('system.approvals', '$pending', {}, { grant: approver })).rejects.toMatchObject(
      reject('wrong_holder'),
    );
  });

  it("binds an approver's grant to its holder as well", async () => {
    const approver = (inbox: string) =>
      grant({
        principal: 'user:ops-ann',
        session: 'sess-ann',
        approve: {},
        user: undefined,
        account: undefined,
        inbox,
      });
    await expect(
      operator.request('system.approvals', '$pending', {}, { grant: approver(users.operator.inboxPrefix) }),
    ).resolves.toMatchObject({ approvals: expect.any(Array) });
    await expect(
      operator.request('system.approvals', '$pending', {}, { grant: approver(users.agent.inboxPrefix) }),
    ).rejects.toMatchObject(reject('wrong_holder'));
  });

  it('refuses a grant for another audience, or none, where the service names its own (audience_mismatch)', async () => {
    await expect(call(agent, grant({ audience: 'another-deployment' }))).rejects.toMatchObject(
      reject('audience_mismatch'),
    );
    await expect(call(agent, grant({ audience: undefined }))).rejects.toMatchObject(reject('audience_mismatch'));
  });

  it('refuses a grant that lives longer than a day (too_long), and matrix-tools grant will not mint one', async () => {
    await expect(call(agent, grant({ ttlSeconds: 36_500 * 86_400 }))).rejects.toMatchObject(reject('too_long'));
    await expect(call(agent, grant({ ttlSeconds: 86_400 + 60 }))).rejects.toMatchObject(reject('too_long'));
    await expect(call(agent, grant({ ttlSeconds: 86_400 }))).resolves.toMatchObject({ isError: false });
    const seed = join(dir, 'issuer.nk');
    writeFileSync(seed, `${new TextDecoder().decode(createAccount().getSeed())}\n`);
    const minted = await cli(
      bus.server.url,
      'grant',
      '--issuer',
      seed,
      '--principal',
      'agent:a',
      '--session',
      's',
      '--profile',
      'default',
      '--ttl',
      '36500d',
    );
    expect(minted.code).toBe(2);
    expect(minted.stderr).toContain('too_long');
  });

  it('refuses a revoked grant on every instance within a second, by jti or by principal, and drops it from the cache', async () => {
    await bus.startInstance();
    // A verifier of its own, watching the bucket as an instance does.
    const watcherNc = await connectBus({ servers: bus.server.url, ...users.service });
    const revocations = new Revocations();
    const store = await RevocationStore.open(watcherNc, { maxAgeMs: 86_400_000 });
    const watch = store.watch(revocations);
    const verifier = new GrantVerifier([bus.issuer.getPublicKey()], { revocations, audience: AUDIENCE });
    try {
      const leaked = grant();
      // The control, in this run: ten calls in a row, what twenty after the revocation cost at least.
      const warming = performance.now();
      for (let i = 0; i < 10; i++)
        await expect(call(agent, leaked, `warm-${i}`)).resolves.toMatchObject({ isError: false });
      const tenCalls = performance.now() - warming;
      expect(verifier.verify(leaked).claims.sub).toBe('agent:alpha');
      const { jti } = verifier.verify(leaked).claims;
      const started = performance.now();
      await operator.request('system.tools', '$revoke', { jti, reason: 'leaked in a log' });
      // Every call after it is refused, whichever instance takes it.
      await eventually(
        async () => {
          for (let i = 0; i < 20; i++)
            await expect(call(agent, leaked, `after-${i}`)).rejects.toMatchObject(reject('revoked'));
        },
        { timeoutMs: 5_000, intervalMs: 20 },
      );
      const refusedAfterMs = performance.now() - started;
      await eventually(() => expect(() => verifier.verify(leaked)).toThrow(/revoked/), { timeoutMs: 5_000 });
      expect(verifier.cached).toBe(0);
      console.log(`revoked grant refused everywhere ${refusedAfterMs.toFixed(0)} ms after $revoke`);
      // Within a second (docs/security.md; measured ~100 ms), or, where the machine is so busy
      // that calls themselves crawl, within 20 times what ten of them took just before.
      expect(refusedAfterMs).toBeLessThan(Math.max(1_000, 20 * tenCalls));
      await expect(call(agent, leaked)).rejects.toThrow(/leaked in a log/);
      // Another grant of the same principal still holds; revoking the principal ends it, but not one issued later.
      const other = grant({ session: 'sess-other' });
      await expect(call(agent, other)).resolves.toMatchObject({ isError: false });
      await operator.request('system.tools', '$revoke', { sub: 'agent:alpha' });
      await eventually(
        async () => {
          for (let i = 0; i < 20; i++)
            await expect(call(agent, other, `p-${i}`)).rejects.toMatchObject(reject('revoked'));
        },
        { timeoutMs: 1_000, intervalMs: 20 },
      );
      // A grant issued within the 10 s an iat may run ahead of the clock after the revocation is
      // revoked with it; one issued past that (in whole seconds: the next second's) holds.
      await expect(call(agent, grant({ session: 'sess-soon' }))).rejects.toMatchObject(reject('revoked'));
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const later = grant({ session: 'sess-later' }, Date.now() + 10_000);
      await expect(call(agent, later)).resolves.toMatchObject({ isError: false });
    } finally {
      watch.stop();
      await watcherNc.close();
    }
  });

  it('revokes a grant from its file in one command, which an agent cannot send', async () => {
    const leaked = grant({ principal: 'agent:beta', session: 'sess-beta' });
    await expect(call(agent, leaked)).resolves.toMatchObject({ isError: false });
    const file = join(dir, 'leaked.jwt');
    writeFileSync(file, leaked);
    const { user, pass, inboxPrefix } = users.operator;
    const revoked = await cli(
      bus.server.url,
      'revoke',
      '--grant',
      file,
      '--user',
      user,
      '--password',
      pass,
      '--inbox-prefix',
      inboxPrefix,
    );
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toMatch(/^revoked jti\.[0-9a-f]{64} until /);
    await eventually(() => expect(call(agent, leaked)).rejects.toMatchObject(reject('revoked')), { timeoutMs: 1_000 });
    const mine = grant({ principal: 'agent:gamma', session: 'sess-gamma' });
    await expect(
      agent.request('system.tools', '$revoke', { sub: 'agent:gamma' }, { timeoutMs: 2_000 }),
    ).rejects.toThrow();
    await expect(call(agent, mine)).resolves.toMatchObject({ isError: false });
  });

  it('calls through the CLI with a grant bound to its user, on the inbox prefix it names (_INBOX_agent)', async () => {
    const bound = grant({ principal: 'agent:cli', session: 'sess-cli' });
    const { user, pass } = users.agent;
    const called = await cli(bus.server.url, 'call', 'spy_run', '--grant', bound, '--user', user, '--password', pass);
    expect(called.code, called.stderr).toBe(0);
    expect(called.stdout).toContain('ran');
    // The same grant from agent-2's user is refused: its connection would reply on _INBOX_agent, which agent-2 may not hear.
    const copied = await cli(
      bus.server.url,
      'call',
      'spy_run',
      '--grant',
      bound,
      '--user',
      users.agent2.user,
      '--password',
      users.agent2.pass,
      '--timeout',
      '3000',
    );
    expect(copied.code).not.toBe(0);
  });
});

describe.each(deployments)('a grant bound to its holder on $name', (deployment) => {
  let bus: SecuredBus;
  afterAll(async () => {
    await bus?.stop();
  });

  it("serves the holder, and refuses a copy to another agent's user (wrong_holder)", async () => {
    bus = await startSecuredBus({ deployment });
    const agent = new BusClient(await bus.connect('agent'), { timeoutMs: 10_000 });
    const agent2 = new BusClient(await bus.connect('agent2'), { timeoutMs: 10_000 });
    const bound = bus.grant({ resolve: session, ...deployment.holder(users.agent.user, 'AGENTS') });
    const run = callSpyRun;
    await expect(run(agent, bound)).resolves.toMatchObject({ isError: false });
    await expect(run(agent2, bound)).rejects.toMatchObject(reject('wrong_holder'));
    // Bound by name in operator mode (where the server attests keys), it holds for no one.
    const byName = bus.grant({ resolve: session, user: users.agent.user, account: 'AGENTS' });
    if (deployment === operatorDeployment)
      await expect(run(agent, byName)).rejects.toMatchObject(reject('wrong_holder'));
    agent.close();
    agent2.close();
  }, 60_000);
});
