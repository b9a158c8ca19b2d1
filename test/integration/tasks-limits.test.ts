/**
 * What one caller's tasks may cost: the live-task cap holds under a burst of concurrent calls
 * (each is counted from its check on, not from its write), and `system.tasks.$list` answers from
 * the runner's index of the bucket, so listing many tasks reads nothing from JetStream.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { CALL_EVENTS } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import { decodeBody, Encoding } from '../../src/bus/codec.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { Task, TaskListReply } from '../../src/tasks/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { staticRegistry } from '../harness/registry.js';
import { slowContext, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const session = { profile: 'default', toolContextRefs: ['tasks-limits'] };
const CAP = 4;

describe('the cost of one caller’s tasks', () => {
  let bus: TaskBus;
  let nc: NatsConnection;
  let client: BusClient;
  let bucket: string;
  const events: CallEvent[] = [];

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
    nc.subscribe(CALL_EVENTS, {
      callback: (_err, msg) => {
        for (const e of decodeBody(msg.data, Encoding.MsgPack) as CallEvent[]) events.push(e);
      },
    });
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
    // Every refusal is in the trail, under its principal (36 are within the principal's budget).
    const refusedIds = new Set(refused.map((r) => r.callId));
    await eventually(() =>
      expect(
        events.filter((e) => refusedIds.has(e.callId) && e.principal === who.principal && e.code === 'unavailable'),
      ).toHaveLength(refused.length),
    );
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

describe('a service that runs no tasks', () => {
  const events: CallEvent[] = [];
  let nc: NatsConnection;
  let client: BusClient;
  let stop: () => Promise<void>;

  beforeAll(async () => {
    nc = await testConnection();
    const registry = await staticRegistry(nc, slowContext('tasks-limits', SLOW));
    const dispatcher = new Dispatcher(nc);
    const mount: Mount = await dispatcherMount(nc, { dispatcher }).start();
    client = new BusClient(nc, { timeoutMs: 10_000 });
    nc.subscribe(CALL_EVENTS, {
      callback: (_err, msg) => {
        for (const e of decodeBody(msg.data, Encoding.MsgPack) as CallEvent[]) events.push(e);
      },
    });
    stop = async () => {
      client.close();
      await mount.stop();
      dispatcher.close();
      await registry.stop();
    };
  });
  afterAll(() => stop());

  it('refuses a call with task, and tells the trail', async () => {
    const who = { principal: 'agent:no-tasks', session: 's-no-tasks' };
    const reply = await client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'no-tasks-1', name: 'work', arguments: { steps: 1, stepMs: 1 } }, task: {} },
      who,
    );
    expect(reply).toMatchObject({ isError: true, error: { code: 'unavailable' } });
    await eventually(() =>
      expect(events.filter((e) => e.callId === 'no-tasks-1' && e.principal === who.principal)).toHaveLength(1),
    );
  });
});
