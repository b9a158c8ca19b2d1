/**
 * A gated call holds only as long as the grant it was made under. Revoking the grant cancels its
 * live tasks and withdraws their pending approvals (also of a task whose instance died); a task
 * whose grant expired while it waited for approval fails when approved; and a plain `$call`
 * whose grant was revoked or expired while a person decided is refused when approved. In every
 * case the target is never reached.
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Mount } from '../../src/bus/mount.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { readGrantClaims } from '../../src/identity/granted.js';
import { mintGrant } from '../../src/identity/mint.js';
import { Revocations, revocationKey } from '../../src/identity/revocations.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import type { Task } from '../../src/tasks/types.js';
import {
  type ApprovalsClient,
  type ApprovalsWorld,
  gatedDispatcher,
  gatedSession,
  startApprovalsWorld,
  uniqueApprovalsBucket,
} from '../harness/approvals.js';
import { sharedNats, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { uniqueBucket } from '../harness/registry.js';
import type { Target } from '../harness/targets.js';

describe('a gated call, as a task or not, and the grant it was made under', () => {
  let world: ApprovalsWorld;
  let nc: NatsConnection;
  let target: Target;
  let person: ApprovalsClient;
  let runner: TaskRunner;
  const mounts: Mount[] = [];
  let client: BusClient;
  const app = uniqueMount('app');
  const approvalsBucket = uniqueApprovalsBucket();
  const tasksBucket = uniqueBucket();
  const issuer = createAccount();
  const revocations = new Revocations();

  /** Makes a gated task under `grant`; resolves with its id once its approval is pending. */
  const gatedTask = async (grant: string, callId: string) => {
    const { task } = await client.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session: gatedSession, call: { id: callId, name: 'deploy', arguments: { service: 'billing' } }, task: {} },
      { grant },
    );
    const pending = await person.awaitPending(callId);
    return { taskId: task.taskId, approvalId: pending.approvalId };
  };
  const stored = (owner: { principal: string; session: string }, taskId: string) =>
    eventually(async () => {
      const found = await runner.get(owner, taskId);
      return found !== undefined && ['completed', 'failed', 'cancelled'].includes(found.record.task.status) && found;
    });

  beforeAll(async () => {
    const identity = IdentityGate.forIssuers([issuer.getPublicKey()], { revocations });
    world = await startApprovalsWorld(app, approvalsBucket, {
      approvals: { policy: { default: 'ask' } },
      dispatcher: { approvalTimeoutMs: 60_000, identity },
    });
    ({ nc, target, person } = world);
    const { dispatcher } = world;
    const store = await TaskStore.open(nc, { bucket: tasksBucket });
    runner = new TaskRunner(dispatcher, store, { identity, revocations }).start();
    mounts.push(await dispatcherMount(nc, { dispatcher, tasks: runner, identity }).start());
    mounts.push(await tasksMount(nc, { runner, identity }).start());
    client = new BusClient(nc, { timeoutMs: 20_000 });
  });
  afterAll(async () => {
    client.close();
    for (const m of mounts) await m.stop();
    runner.close();
    await world.stop();
    await (await new Kvm(nc).open(tasksBucket)).destroy();
  });

  it('is cancelled, its pending approval withdrawn, when its grant is revoked; its target is never reached', async () => {
    const owner = { principal: 'agent:ola', session: 's-ola' };
    const grant = mintGrant(issuer, { ...owner, resolve: gatedSession, ttlSeconds: 600 });
    const { taskId, approvalId } = await gatedTask(grant, 'revoked-1');

    const { jti } = readGrantClaims(grant);
    revocations.apply(revocationKey({ jti }), { jti, revokedAt: Date.now(), until: Date.now() + 3_600_000 });

    const ended = await stored(owner, taskId);
    expect(ended.record.task.status).toBe('cancelled');
    expect(ended.record.result?.error?.code).toBe('forbidden');
    expect(ended.record.task.statusMessage).toContain('revoked');
    await eventually(async () => (await person.pending()).approvals.every((a) => a.approvalId !== approvalId));
    await person.answer({ approvalId, decision: 'approve' }, { principal: 'user:ana' }).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(target.count('$deploy')).toBe(0);
  });

  it('withdraws the pending approval of a revoked task whose instance died while it waited', async () => {
    const owner = { principal: 'agent:quinn', session: 's-quinn' };
    const grant = mintGrant(issuer, { ...owner, resolve: gatedSession, ttlSeconds: 600 });
    // Instance A runs the task, hears no revocations, and dies while its approval waits.
    const anc = await connectBus({ ...sharedNats(), name: 'instance-a' });
    const aDispatcher = gatedDispatcher(anc, app, { approvalTimeoutMs: 60_000, approvalsBucket });
    const aRunner = new TaskRunner(aDispatcher, await TaskStore.open(anc, { bucket: tasksBucket })).start();
    const call = { id: 'orphaned-1', name: 'deploy', arguments: { service: 'billing' } };
    const ctx = { ...owner, grant };
    const route = await aDispatcher.check(gatedSession, call, ctx);
    if ('isError' in route) throw new Error(route.content);
    const task = (await aRunner.create(gatedSession, call, ctx, route, {})) as Task;
    const { approvalId } = await person.awaitPending('orphaned-1');
    await eventually(() => runner.liveOf(owner.principal) === 1);
    aRunner.close();
    await anc.close();

    const { jti } = readGrantClaims(grant);
    revocations.apply(revocationKey({ jti }), { jti, revokedAt: Date.now(), until: Date.now() + 3_600_000 });
    expect((await stored(owner, task.taskId)).record.task.status).toBe('cancelled');
    await eventually(async () => (await person.pending()).approvals.every((a) => a.approvalId !== approvalId));
    expect(target.count('$deploy')).toBe(0);
  });

  it('fails when approved after its grant expired, and sends nothing', async () => {
    const owner = { principal: 'agent:pia', session: 's-pia' };
    const grant = mintGrant(issuer, { ...owner, resolve: gatedSession, ttlSeconds: 3 });
    const { taskId, approvalId } = await gatedTask(grant, 'expired-1');
    const expiresAt = readGrantClaims(grant).exp * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 100));

    await person.answer({ approvalId, decision: 'approve' }, { principal: 'user:ana' });
    const ended = await stored(owner, taskId);
    expect(ended.record.task.status).toBe('failed');
    expect(ended.record.result?.error?.code).toBe('forbidden');
    expect(ended.record.task.statusMessage).toContain('expired');
    expect(target.count('$deploy')).toBe(0);
  });
  const grantFor = (name: string, ttlSeconds = 600) =>
    mintGrant(issuer, { principal: `agent:${name}`, session: `s-${name}`, resolve: gatedSession, ttlSeconds });
  /** A plain gated `$call` under `grant`, its approval pending; resolves with the call's result and the approval id. */
  const gatedCall = async (grant: string, callId: string) => {
    const result = client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session: gatedSession, call: { id: callId, name: 'deploy', arguments: { service: 'billing' } } },
      { grant, timeoutMs: 60_000 },
    );
    const pending = await person.awaitPending(callId);
    return { result, approvalId: pending.approvalId };
  };

  it('refuses a plain call approved after its grant was revoked, and sends nothing', async () => {
    const grant = grantFor('rolf');
    const { result, approvalId } = await gatedCall(grant, 'plain-revoked-1');
    const { jti } = readGrantClaims(grant);
    revocations.apply(revocationKey({ jti }), { jti, revokedAt: Date.now(), until: Date.now() + 3_600_000 });

    await person.answer({ approvalId, decision: 'approve' }, { principal: 'user:ana' });
    const refused = await result;
    expect(refused.error?.code).toBe('forbidden');
    expect(refused.content).toContain('revoked');
    expect(refused.content).toContain('was not sent');
    expect(target.count('$deploy')).toBe(0);
  });

  it('refuses a plain call approved after its grant expired, and sends nothing', async () => {
    const grant = grantFor('siv', 3);
    const { result, approvalId } = await gatedCall(grant, 'plain-expired-1');
    const expiresAt = readGrantClaims(grant).exp * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 100));

    await person.answer({ approvalId, decision: 'approve' }, { principal: 'user:ana' });
    const refused = await result;
    expect(refused.error?.code).toBe('forbidden');
    expect(refused.content).toContain('expired');
    expect(target.count('$deploy')).toBe(0);
  });

  it('sends a plain call approved while its grant holds', async () => {
    const grant = grantFor('tor');
    const { result, approvalId } = await gatedCall(grant, 'plain-held-1');
    await person.answer({ approvalId, decision: 'approve' }, { principal: 'user:ana' });
    expect(await result).toMatchObject({ isError: false, structured: { deployed: 'billing' } });
    expect(target.count('$deploy')).toBe(1);
  });
});
