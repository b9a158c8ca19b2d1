/**
 * The console's Calls page shows the running tasks of its identity with their progress, and a
 * Cancel button that is a write behind the token: the task is cancelled and its target stops.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusClient } from '../../src/bus/client.js';
import { type RunningConsole, startConsole } from '../../src/console/server.js';
import type { Task } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { type SlowMount, slowContext, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const spec = slowContext('console-tasks', SLOW);

describe('the console’s Calls page and running tasks', () => {
  let bus: TaskBus;
  let slow: SlowMount;
  let client: BusClient;
  let consoleApp: RunningConsole;
  const token = 'test-token';
  const post = (path: string, fields: Record<string, string>) =>
    fetch(new URL(path, consoleApp.url), { method: 'POST', body: new URLSearchParams(fields), redirect: 'manual' });

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, spec);
    ({ slow, client } = bus);
    consoleApp = await startConsole(bus.nc, { port: 0, allowWrites: true, token });
  });
  afterAll(async () => {
    await consoleApp.close();
    await bus.stop();
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
