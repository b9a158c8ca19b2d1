/**
 * The console's Calls page shows the running tasks of its identity with their progress, and a
 * Cancel button that is a write behind the token: the task is cancelled and its target stops.
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { type RunningConsole, startConsole } from '../../src/console/server.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import type { Task } from '../../src/tasks/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { staticRegistry, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const spec = {
  key: 'console-tasks',
  title: 'Console tasks',
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

describe('the console’s Calls page and running tasks', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let slow: SlowMount;
  let dispatcher: Dispatcher;
  let runner: TaskRunner;
  const mounts: Mount[] = [];
  let client: BusClient;
  let consoleApp: RunningConsole;
  const token = 'test-token';
  const bucket = uniqueBucket();
  const post = (path: string, fields: Record<string, string>) =>
    fetch(new URL(path, consoleApp.url), { method: 'POST', body: new URLSearchParams(fields), redirect: 'manual' });

  beforeAll(async () => {
    nc = await testConnection();
    registry = await staticRegistry(nc, spec);
    slow = await startSlowMount(nc, SLOW);
    dispatcher = new Dispatcher(nc);
    runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket })).start();
    mounts.push(await dispatcherMount(nc, { dispatcher, tasks: runner }).start());
    mounts.push(await tasksMount(nc, { runner }).start());
    client = new BusClient(nc, { timeoutMs: 10_000 });
    consoleApp = await startConsole(nc, { port: 0, allowWrites: true, token });
  });
  afterAll(async () => {
    await consoleApp.close();
    client.close();
    for (const m of mounts) await m.stop();
    runner.close();
    dispatcher.close();
    await slow.stop();
    await registry.stop();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('lists a running task with its progress, and cancels it with the token only', async () => {
    const { task } = await client.request<{ task: Task }>('system.dispatcher', '$call', {
      session: { profile: 'default', toolContextRefs: ['console-tasks'] },
      call: { id: 'console-task-1', name: 'work', arguments: { steps: 200, stepMs: 50 } },
      task: {},
    });
    const page = await eventually(async () => {
      const text = await (await fetch(new URL('/calls', consoleApp.url))).text();
      expect(text).toContain('Running tasks: 1');
      expect(text).toMatch(/<progress max="200" value="\d+">/);
      return text;
    });
    expect(page).toContain(`data-task-id="${task.taskId}"`);
    expect(page).toContain('action="/tasks/cancel"');

    const refused = await post('/tasks/cancel', { taskId: task.taskId });
    expect(refused.status).not.toBe(303);
    expect((await client.request<Task>('system.tasks', '$get', { taskId: task.taskId })).status).toBe('working');

    const before = slow.stopped.length;
    const done = await post('/tasks/cancel', { taskId: task.taskId, token });
    expect(done.status).toBe(303);
    expect((await client.request<Task>('system.tasks', '$get', { taskId: task.taskId })).status).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(before)).toEqual(['CancelledError']));
    const after = await (await fetch(new URL('/calls', consoleApp.url))).text();
    expect(after).not.toContain('Running tasks');
  });
});
