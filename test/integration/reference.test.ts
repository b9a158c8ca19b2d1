import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPolicy } from '../../src/approvals/policy.js';
import { approvalsMount } from '../../src/approvals/system-approvals.js';
import { BusClient } from '../../src/bus/client.js';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import { BadRequestError, ConflictError, NotFoundError, UnavailableError } from '../../src/bus/errors.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { agentsMount } from '../../src/reference-mounts/agents.js';
import { packagesMount } from '../../src/reference-mounts/packages.js';
import { sessionsMount } from '../../src/reference-mounts/sessions.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { startTarget, type Target } from '../harness/targets.js';

describe('the reference mounts', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let dispatcher: Dispatcher;
  let target: Target;
  const mounts: Mount[] = [];
  const bucket = `test-sessions-${process.pid}`;
  const app = uniqueMount('app');
  const dir = mkdtempSync(join(tmpdir(), 'policy-'));

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 5_000 });
    const policyFile = join(dir, 'policy.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        rules: [
          { tool: 'matrix_invoke', target: `${app}`, op: '$echo', decision: 'allow' },
          { tool: 'matrix_invoke', decision: 'deny', reason: 'only echo' },
        ],
        default: 'ask',
      }),
    );
    target = await startTarget(nc, app, { $echo: (args) => args, $delete: () => ({ deleted: true }) });
    mounts.push(
      await registryMount(nc).start(),
      await agentsMount(nc).start(),
      await packagesMount(nc).start(),
      await (await sessionsMount(nc, { bucket })).start(),
      await (
        await approvalsMount(nc, { policy: loadPolicy(policyFile), bucket: `test-approvals-ref-${process.pid}` })
      ).start(),
    );
    dispatcher = new Dispatcher(nc, { approvalTimeoutMs: 2_000 });
  });
  afterAll(async () => {
    dispatcher.close();
    client.close();
    target.stop();
    for (const m of mounts) await m.stop();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('system.sessions keeps state that session_state_read reads back', async () => {
    const first = await client.request<{ revision: number }>(
      'system.sessions',
      '$write',
      { values: { goal: 'ship it', step: 1 } },
      { session: 'sess-1' },
    );
    await client.request('system.sessions', '$write', { session: 'sess-1', values: { step: 2, goal: null } });
    await expect(
      client.request('system.sessions', '$write', {
        session: 'sess-1',
        values: { x: 1 },
        expectedRevision: first.revision,
      }),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(client.request('system.sessions', '$read', {})).rejects.toBeInstanceOf(BadRequestError);

    const r = await dispatcher.call(
      { profile: 'default' },
      { id: '1', name: 'session_state_read', arguments: {} },
      { session: 'sess-1' },
    );
    expect(r).toMatchObject({ isError: false, structured: { session: 'sess-1', state: { step: 2 } } });
    const picked = await dispatcher.call(
      { profile: 'default' },
      { id: '2', name: 'session_state_read', arguments: { session: 'sess-1', keys: ['step', 'absent'] } },
    );
    expect(picked.structured).toMatchObject({ state: { step: 2 } });
    expect(contracts().check(SchemaId.SessionReadReply)(picked.structured)).toBeUndefined();
  });

  it('system.approvals applies its policy file: allow reaches the target, deny never does', async () => {
    const session = { profile: 'edit' };
    const allowed = await dispatcher.call(session, {
      id: 'a',
      name: 'matrix_invoke',
      arguments: { target: app, op: '$echo', args: { hi: 1 } },
    });
    expect(allowed).toMatchObject({ isError: false, structured: { hi: 1 } });
    const denied = await dispatcher.call(session, {
      id: 'b',
      name: 'matrix_invoke',
      arguments: { target: app, op: '$delete' },
    });
    expect(denied).toMatchObject({
      isError: true,
      error: { code: 'approval_denied' },
      content: expect.stringContaining('only echo'),
    });
    expect(target.count('$delete')).toBe(0);
    const asked = await client.request<{ decision: string; reason: string }>('system.approvals', '$decide', {
      callId: 'x',
      tool: 'other',
      target: 'app.y',
      op: '$z',
      arguments: {},
    });
    // Where the policy says ask, a person answers later: a pending approval, not a reject.
    expect(asked).toMatchObject({
      decision: 'pending',
      approvalId: expect.stringMatching(/^[0-9a-f]{20}-[0-9a-f]{12}$/),
    });
  });

  it('refuses an invalid policy file, naming what is wrong', () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ rules: [{ decision: 'maybe' }], extra: true }));
    expect(() => loadPolicy(bad)).toThrow('/rules/0/decision must be one of "allow", "deny", "ask"');
    expect(() => loadPolicy(bad)).toThrow('/extra is not a known field');
  });

  it('system.packages validates specs as $register would (package_validate)', async () => {
    const r = await dispatcher.call(
      { profile: 'propose', worker: 'codex' },
      {
        id: 'p',
        name: 'package_validate',
        arguments: {
          specs: [{ key: 'ok', title: 'Ok', description: 'd', permissions: { approval: 'never' } }, { key: 'NO' }],
        },
      },
    );
    expect(r.isError).toBe(false);
    const verdict = r.structured as {
      valid: boolean;
      results: Array<{ valid: boolean; violations: Array<{ path: string }> }>;
    };
    expect(contracts().check(SchemaId.PackageValidateReply)(verdict)).toBeUndefined();
    expect(verdict.valid).toBe(false);
    expect(verdict.results.map((x) => x.valid)).toEqual([true, false]);
    expect(verdict.results[1]?.violations.map((v) => v.path)).toEqual(expect.arrayContaining(['/key', '/title']));
  });

  it('system.agents describes the live mounts, one in full, and names an unknown one', async () => {
    const all = await client.request<{ mounts: Array<{ mount: string; instances: number }> }>(
      'system.agents',
      '$introspect',
      {},
    );
    expect(contracts().check(SchemaId.AgentsIntrospectReply)(all)).toBeUndefined();
    expect(all.mounts.map((m) => m.mount)).toEqual(
      expect.arrayContaining(['system.tools', 'system.sessions', 'system.approvals']),
    );
    const one = await client.request<{
      mounts: Array<{ ops: Array<{ op: string; requestSchema?: { $id?: string } }> }>;
    }>('system.agents', '$introspect', {
      mount: 'system.tools',
    });
    expect(one.mounts[0]?.ops.find((o) => o.op === '$resolve')?.requestSchema?.$id).toBe(SchemaId.ResolveRequest);
    await expect(client.request('system.agents', '$introspect', { mount: 'system.nowhere' })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it('system.agents says a mount it could not ask in time is busy, never that it is not live', async () => {
    // The only system.agents for this test: one whose discovery hears nothing in its wait (as
    // under a burst), so the mount asked for is asked itself.
    const agentsAt = mounts.findIndex((m) => m.name === 'system.agents');
    await mounts[agentsAt]?.stop();
    const deaf = await agentsMount(nc, { discoveryWaitMs: 0 }).start();
    const mute = uniqueMount('mute');
    // Live, but too slow to answer its $introspect: subscribed, never replying.
    const stalled = nc.subscribe(`${mute}.$introspect`, { callback: () => {} });
    try {
      const one = await client.request<{ mounts: Array<{ mount: string; ops: Array<{ op: string }> }> }>(
        'system.agents',
        '$introspect',
        { mount: 'system.tools' },
      );
      expect(one.mounts).toEqual([expect.objectContaining({ mount: 'system.tools' })]);
      expect(one.mounts[0]?.ops.map((o) => o.op)).toContain('$resolve');
      const busy = client.request('system.agents', '$introspect', { mount: mute }, { timeoutMs: 10_000 });
      await expect(busy).rejects.toBeInstanceOf(UnavailableError);
      await expect(busy).rejects.toThrow(/busy/);
      await expect(client.request('system.agents', '$introspect', { mount: 'system.nowhere' })).rejects.toBeInstanceOf(
        NotFoundError,
      );
    } finally {
      stalled.unsubscribe();
      await deaf.stop();
      mounts[agentsAt] = await agentsMount(nc).start();
    }
  });
});
