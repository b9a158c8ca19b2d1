/**
 * What one caller's tasks may cost: the live-task cap holds under a burst of concurrent calls
 * (each is counted from its check on, not from its write).
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import type { Task, TaskListReply } from '../../src/tasks/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { staticRegistry, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, slowContext, startSlowMount } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const session = { profile: 'default', toolContextRefs: ['tasks-limits'] };
const CAP = 4;

describe('the cost of one caller’s tasks', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let slow: SlowMount;
  let dispatcher: Dispatcher;
  let runner: TaskRunner;
  const mounts: Mount[] = [];
  let client: BusClient;
  const bucket = uniqueBucket();

  const call = (id: string, args: Record<string, unknown>, who: { principal: string; session: string }) =>
    client.request<{ task: Task } | ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id, name: 'work', arguments: args }, task: {} },
      who,
    );

  beforeAll(async () => {
    nc = await testConnection();
    registry = await staticRegistry(nc, slowContext('tasks-limits', SLOW));
    slow = await startSlowMount(nc, SLOW);
    dispatcher = new Dispatcher(nc);
    const store = await TaskStore.open(nc, { bucket });
    runner = new TaskRunner(dispatcher, store, { maxLivePerPrincipal: CAP }).start();
    mounts.push(await dispatcherMount(nc, { dispatcher, tasks: runner }).start());
    mounts.push(await tasksMount(nc, { runner }).start());
    client = new BusClient(nc, { timeoutMs: 20_000 });
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

  it('makes at most the cap of live tasks from a burst of concurrent calls, and refuses the rest', async () => {
    const who = { principal: 'agent:burst', session: 's-burst' };
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) => call(`burst-${i}`, { steps: 400, stepMs: 50 }, who)),
    );
    const made = replies.filter((r): r is { task: Task } => 'task' in r);
    const refused = replies.filter((r): r is ToolResult => !('task' in r));
    expect(made).toHaveLength(CAP);
    expect(refused).toHaveLength(40 - CAP);
    expect(refused.every((r) => r.isError && r.error?.code === 'unavailable')).toBe(true);
    // Once one ends, its place is free again.
    await client.request('system.tasks', '$cancel', { taskId: made[0]?.task.taskId }, who);
    expect(await call('burst-after', { steps: 400, stepMs: 50 }, who)).toHaveProperty('task');
    const listed = await client.request<TaskListReply>('system.tasks', '$list', { limit: 200 }, who);
    for (const t of listed.tasks)
      if (t.status === 'working') await client.request('system.tasks', '$cancel', { taskId: t.taskId }, who);
  });
});
