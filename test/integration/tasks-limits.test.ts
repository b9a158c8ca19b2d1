/**
 * What one caller's tasks may cost: the live-task cap holds under a burst of concurrent calls
 * (each is counted from its check on, not from its write), and `system.tasks.$list` answers from
 * the runner's index of the bucket, so listing many tasks reads nothing from JetStream.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusClient } from '../../src/bus/client.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { Task, TaskListReply } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { slowContext, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const session = { profile: 'default', toolContextRefs: ['tasks-limits'] };
const CAP = 4;

describe('the cost of one caller’s tasks', () => {
  let bus: TaskBus;
  let nc: NatsConnection;
  let client: BusClient;
  let bucket: string;

  const call = (id: string, args: Record<string, unknown>, who: { principal: string; session: string }) =>
    client.request<{ task: Task } | ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id, name: 'work', arguments: args }, task: {} },
      who,
    );

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, slowContext('tasks-limits', SLOW), {
      runner: { maxLivePerPrincipal: CAP },
      timeoutMs: 20_000,
    });
    ({ nc, client, bucket } = bus);
  });
  afterAll(() => bus.stop());

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
