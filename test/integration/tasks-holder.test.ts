/**
 * A grant bound to its holder (`nats.inbox`) holds on `system.tasks` and on `$cancel` of a call
 * in flight only for that holder: a copy of the grant, sent from another NATS user's inbox, is
 * refused `wrong_holder` on every `system.tasks` op and cancels nothing; the holder reads and
 * cancels as before.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { createAccount } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { IdentityGate } from '../../src/identity/gate.js';
import { mintGrant } from '../../src/identity/mint.js';
import type { Task } from '../../src/tasks/types.js';
import { sharedNats, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { type SlowMount, slowContext, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const spec = slowContext('tasks-holder', SLOW);
const resolve = { profile: 'default', toolContextRefs: ['tasks-holder'] };
const HOLDER_INBOX = `_INBOX_hana${process.pid}`;
const wrongHolder = { code: 'forbidden', details: { grant: 'wrong_holder' } };

describe('a grant bound to its holder, on tasks and cancels', () => {
  let bus: TaskBus;
  let slow: SlowMount;
  const conns: NatsConnection[] = [];
  let holder: BusClient;
  let thief: BusClient;
  const issuer = createAccount();
  const grant = mintGrant(issuer, {
    principal: 'agent:hana',
    session: 's-hana',
    resolve,
    ttlSeconds: 600,
    inbox: HOLDER_INBOX,
  });
  const client = async (inboxPrefix: string, timeoutMs: number) => {
    const conn = await connectBus({ ...sharedNats(), name: inboxPrefix, inboxPrefix });
    conns.push(conn);
    return new BusClient(conn, { timeoutMs });
  };

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, spec, { identity: IdentityGate.forIssuers([issuer.getPublicKey()]) });
    slow = bus.slow;
    holder = await client(HOLDER_INBOX, 10_000);
    thief = await client(`_INBOX_thief${process.pid}`, 1_000);
  });
  afterAll(async () => {
    holder.close();
    thief.close();
    for (const conn of conns) await conn.close();
    await bus.stop();
  });

  it('refuses a copy of the grant on every system.tasks op (wrong_holder), and serves its holder', async () => {
    const { task } = await holder.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session: resolve, call: { id: 'h-1', name: 'work', arguments: { steps: 200, stepMs: 50 } }, task: {} },
      { grant },
    );
    const ref = { taskId: task.taskId };
    const asThief = (op: string, body: object) => thief.request('system.tasks', op, body, { grant });
    await expect(asThief('$list', {})).rejects.toMatchObject(wrongHolder);
    await expect(asThief('$get', ref)).rejects.toMatchObject(wrongHolder);
    await expect(asThief('$result', { ...ref, waitMs: 100 })).rejects.toMatchObject(wrongHolder);
    await expect(asThief('$cancel', ref)).rejects.toMatchObject(wrongHolder);

    const listed = await holder.request<{ tasks: Task[] }>('system.tasks', '$list', {}, { grant });
    expect(listed.tasks.map((t) => t.taskId)).toEqual([task.taskId]);
    expect((await holder.request<Task>('system.tasks', '$get', ref, { grant })).status).toBe('working');
    const stoppedBefore = slow.stopped.length;
    expect((await holder.request<Task>('system.tasks', '$cancel', ref, { grant })).status).toBe('cancelled');
    // The target hears its $cancel after the task reads cancelled: wait for it, so that the next
    // test counts only the stops of its own call.
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
  });

  it("cancels a call in flight for its holder only: a copy of the grant's $cancel stops nothing", async () => {
    const stoppedBefore = slow.stopped.length;
    const callId = 'hana-call-1';
    const call = holder.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session: resolve, call: { id: 'h-2', name: 'work', arguments: { steps: 200, stepMs: 50 } } },
      { grant, callId },
    );
    const startedBefore = slow.started;
    await eventually(() => expect(slow.started).toBeGreaterThan(startedBefore));
    // Nobody answers the copy's $cancel: the instance holding the call does not take it as its caller's.
    await expect(thief.request('system.dispatcher', '$cancel', { callId }, { grant })).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 300));
    expect(slow.stopped.slice(stoppedBefore)).toEqual([]);

    expect(await holder.request('system.dispatcher', '$cancel', { callId }, { grant })).toEqual({ cancelled: true });
    expect((await call).error?.code).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
  });
});
