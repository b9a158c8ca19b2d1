/**
 * What one caller's tasks may cost: the live-task cap holds under a burst of concurrent calls
 * (each is counted from its check on, not from its write), and `system.tasks.$list` answers from
 * the runner's index of the bucket, so listing many tasks reads nothing from JetStream.
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
import { eventually } from '../harness/eventually.js';
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

  it('lists a caller’s tasks without reading JetStream: no consumer, no get', async () => {
    const who = { principal: 'agent:lister', session: 's-lister' };
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const reply = (await call(`list-${i}`, { steps: 1, stepMs: 1 }, who)) as { task: Task };
      ids.push(reply.task.taskId);
    }
    await eventually(async () => {
      const page = await client.request<TaskListReply>('system.tasks', '$list', { limit: 200 }, who);
      return page.tasks.length === 12 && page.tasks.every((t) => t.status === 'completed');
    });
    const asked: string[] = [];
    const spy = nc.subscribe('$JS.API.>', {
      callback: (_err, msg) => {
        asked.push(msg.subject);
      },
    });
    await nc.flush();
    const first = await client.request<TaskListReply>('system.tasks', '$list', { limit: 5 }, who);
    const second = await client.request<TaskListReply>(
      'system.tasks',
      '$list',
      { limit: 200, cursor: first.nextCursor },
      who,
    );
    await nc.flush();
    spy.unsubscribe();
    expect(asked.filter((s) => s.includes(`KV_${bucket}`))).toEqual([]);
    expect([...first.tasks, ...second.tasks].map((t) => t.taskId)).toEqual([...ids].reverse());
    expect(second.nextCursor).toBeUndefined();
  });
});
