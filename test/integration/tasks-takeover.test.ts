/**
 * A gated task taken over while its first instance still runs: the first one stops when it
 * hears of the new holder and leaves the approval unused, so the approved call is sent exactly
 * once, by the holder. Made deterministic with two runners on one connection (the first one
 * hears an approval first) and a lease the first one never renews.
 */
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import type { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore, taskKey } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import type { Task } from '../../src/tasks/types.js';
import {
  type ApprovalsWorld,
  gatedDispatcher,
  gatedSession,
  startApprovalsWorld,
  uniqueApprovalsBucket,
} from '../harness/approvals.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { uniqueBucket } from '../harness/registry.js';

const owner = { principal: 'agent:gina', session: 's-gina' };

describe('a gated task taken over while its first instance waits', () => {
  let world: ApprovalsWorld;
  let first: TaskRunner;
  let second: TaskRunner;
  let secondDispatcher: Dispatcher;
  const mounts: Mount[] = [];
  let client: BusClient;
  const app = uniqueMount('app');
  const approvalsBucket = uniqueApprovalsBucket();
  const tasksBucket = uniqueBucket();
  const approvalWait = { approvalTimeoutMs: 60_000 };

  beforeAll(async () => {
    world = await startApprovalsWorld(app, approvalsBucket, {
      approvals: { policy: { default: 'ask' } },
      dispatcher: approvalWait,
    });
    const { nc } = world;
    // The first instance's lease lapses after 1 s and is never renewed, nor does it sweep.
    first = new TaskRunner(world.dispatcher, await TaskStore.open(nc, { bucket: tasksBucket }), {
      instance: 'first',
      leaseMs: 1_000,
      tickMs: 600_000,
      sweepMs: 600_000,
    }).start();
    secondDispatcher = gatedDispatcher(nc, app, { ...approvalWait, approvalsBucket });
    second = new TaskRunner(secondDispatcher, await TaskStore.open(nc, { bucket: tasksBucket }), {
      instance: 'second',
      leaseMs: 5_000,
      tickMs: 200,
      sweepMs: 200,
    }).start();
    mounts.push(await dispatcherMount(nc, { dispatcher: world.dispatcher, tasks: first }).start());
    mounts.push(await tasksMount(nc, { runner: second }).start());
    client = new BusClient(nc, { timeoutMs: 40_000 });
  });

  afterAll(async () => {
    client.close();
    for (const m of mounts) await m.stop();
    first.close();
    second.close();
    secondDispatcher.close();
    await world.stop();
    await (await new Kvm(world.nc).open(tasksBucket)).destroy();
  });

  it('sends the approved call exactly once, from the instance that holds the task', async () => {
    const reply = await client.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session: gatedSession, call: { id: 'takeover-1', name: 'deploy', arguments: { service: 'ledger' } }, task: {} },
      owner,
    );
    const pending = await world.person.awaitPending('takeover-1');
    const key = taskKey(owner, reply.task.taskId);
    // The second instance claims the task once the first one's lease lapses.
    await eventually(async () => (await second.store.get(key))?.record.lease.holder === 'second', {
      timeoutMs: 10_000,
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(world.target.count('$deploy')).toBe(0);

    await world.person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
    const result = await client.request<ToolResult>(
      'system.tasks',
      '$result',
      { taskId: reply.task.taskId, waitMs: 20_000 },
      owner,
    );
    expect(result.content).not.toContain('already used');
    expect(result).toMatchObject({ isError: false, structured: { deployed: 'ledger' } });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(world.target.count('$deploy')).toBe(1);
  });
});
