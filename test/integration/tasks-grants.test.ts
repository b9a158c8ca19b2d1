/**
 * With trusted issuers a task belongs to the principal and session of the grant that made it,
 * whatever headers say: the same grant reads it; a grant of another principal, or of the same
 * principal in another session, gets not_found; no grant at all is forbidden.
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { ForbiddenError, NotFoundError } from '../../src/bus/errors.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import type { Task } from '../../src/tasks/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { staticRegistry, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const spec = {
  key: 'tasks-grants',
  title: 'Tasks and grants',
  description: 'a slow tool',
  matrixTools: [
    {
      name: 'work',
      description: 'slow',
      inputSchema: { type: 'object' as const },
      target: SLOW,
      op: '$work',
      timeoutMs: 30_000,
    },
  ],
  permissions: { approval: 'never' as const },
};
const resolve = { profile: 'default', toolContextRefs: ['tasks-grants'] };

describe('tasks under grants', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let slow: SlowMount;
  let dispatcher: Dispatcher;
  let runner: TaskRunner;
  const mounts: Mount[] = [];
  let client: BusClient;
  const bucket = uniqueBucket();
  const issuer = createAccount();
  const grant = (principal: string, session: string) =>
    mintGrant(issuer, { principal, session, resolve, ttlSeconds: 600 });

  beforeAll(async () => {
    nc = await testConnection();
    registry = await staticRegistry(nc, spec);
    slow = await startSlowMount(nc, SLOW);
    dispatcher = new Dispatcher(nc);
    runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket })).start();
    const identity = IdentityGate.forIssuers([issuer.getPublicKey()]);
    mounts.push(await dispatcherMount(nc, { dispatcher, tasks: runner, identity }).start());
    mounts.push(await tasksMount(nc, { runner, identity }).start());
    client = new BusClient(nc, { timeoutMs: 10_000 });
  });
  afterAll(async () => {
    client.close();
    for (const m of mounts) await m.stop();
    runner.close();
    dispatcher.close();
    await slow.stop();
    await registry.stop();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('belongs to the grant’s principal and session, not to what headers claim', async () => {
    const mine = grant('agent:hana', 's-hana');
    const { task } = await client.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session: resolve, call: { id: 'g-1', name: 'work', arguments: { steps: 1, stepMs: 1 } }, task: {} },
      { grant: mine, principal: 'agent:someone-else' },
    );
    const get = (ctx: Record<string, string>) =>
      client.request<Task>('system.tasks', '$get', { taskId: task.taskId }, ctx);
    expect((await get({ grant: mine })).taskId).toBe(task.taskId);
    await expect(get({ grant: grant('agent:ivan', 's-hana') })).rejects.toThrow(NotFoundError);
    await expect(get({ grant: grant('agent:hana', 's-other') })).rejects.toThrow(NotFoundError);
    await expect(get({ principal: 'agent:hana', session: 's-hana' })).rejects.toThrow(ForbiddenError);
    await expect(get({ grant: mine.slice(0, -4) + 'AAAA' })).rejects.toThrow(ForbiddenError);
    // A grant bound to another NATS user's inbox prefix is not its holder's here (wrong_holder).
    const bound = mintGrant(issuer, {
      principal: 'agent:hana',
      session: 's-hana',
      resolve,
      ttlSeconds: 600,
      inbox: '_INBOX_agent-hana',
    });
    await expect(get({ grant: bound })).rejects.toMatchObject({
      code: 'forbidden',
      details: { grant: 'wrong_holder' },
    });
  });
});
