/**
 * A gated task waits for a person as one state of the task: `input_required`, its statusMessage
 * naming the pending approval. When the instance running it dies, the one that takes it over
 * waits for the same approval (it does not ask again), and once approved the target runs once.
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Mount } from '../../src/bus/mount.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
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

const owner = { principal: 'agent:frank', session: 's-frank' };
const timing = { leaseMs: 1_000, tickMs: 200, sweepMs: 200 };

describe('a gated task', () => {
  let world: ApprovalsWorld;
  let target: Target;
  let person: ApprovalsClient;
  let b: { runner: TaskRunner; mount: Mount };
  let client: BusClient;
  const app = uniqueMount('app');
  const approvalsBucket = uniqueApprovalsBucket();
  const tasksBucket = uniqueBucket();
  const approvalWait = { approvalTimeoutMs: 60_000 };
  const dispatcherOf = (conn: NatsConnection) => gatedDispatcher(conn, app, { ...approvalWait, approvalsBucket });

  beforeAll(async () => {
    world = await startApprovalsWorld(app, approvalsBucket, {
      approvals: { policy: { default: 'ask' } },
      dispatcher: approvalWait,
    });
    const { nc, dispatcher } = world;
    ({ target, person } = world);
    const runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket: tasksBucket }), timing).start();
    b = { runner, mount: await tasksMount(nc, { runner }).start() };
    client = new BusClient(nc, { timeoutMs: 40_000 });
  });

  afterAll(async () => {
    client.close();
    await b.mount.stop();
    b.runner.close();
    await world.stop();
    await (await new Kvm(world.nc).open(tasksBucket)).destroy();
  });

  it('is input_required naming its approval, survives its instance, and runs once when approved', async () => {
    const anc = await connectBus({ ...sharedNats(), name: 'instance-a' });
    const dispatcher = dispatcherOf(anc);
    const runner = new TaskRunner(dispatcher, await TaskStore.open(anc, { bucket: tasksBucket }), timing).start();
    const mount = await dispatcherMount(anc, { dispatcher, tasks: runner }).start();
    const reply = await client.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      {
        session: gatedSession,
        call: { id: 'task-deploy-1', name: 'deploy', arguments: { service: 'billing' } },
        task: {},
      },
      owner,
    );
    const pending = await person.awaitPending('task-deploy-1');
    const waiting = await eventually(async () => {
      const t = await client.request<Task>('system.tasks', '$get', { taskId: reply.task.taskId }, owner);
      return t.status === 'input_required' && t;
    });
    expect(waiting.statusMessage).toContain(pending.approvalId);

    // The instance dies as a killed one does: no more writes, its connection gone.
    runner.close();
    await anc.close();
    void mount;
    await new Promise((resolve) => setTimeout(resolve, 2 * timing.leaseMs));
    expect(target.count('$deploy')).toBe(0);
    expect((await person.pending()).approvals.filter((a) => a.callId === 'task-deploy-1')).toHaveLength(1);

    await person.answer({ approvalId: pending.approvalId, decision: 'approve' }, { principal: 'user:ana' });
    const result = await client.request<ToolResult>(
      'system.tasks',
      '$result',
      { taskId: reply.task.taskId, waitMs: 20_000 },
      owner,
    );
    expect(result).toMatchObject({ isError: false, structured: { deployed: 'billing' } });
    expect(target.count('$deploy')).toBe(1);
  });
});
