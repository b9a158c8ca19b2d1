/**
 * What one caller's tasks may keep (PROTOCOL 9): records and bytes per principal, finished tasks
 * included, so a loop of tasks with large arguments leaves the bucket and the memory of every
 * instance bounded while another agent's calls go on; the refusal past the share says what to
 * do; a finished task keeps no arguments (their digest) and no grant; and a second instance
 * starts holding only index entries of finished tasks.
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/bus/codec.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import type { Task, TaskListReply, TaskRecord } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { slowContext, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const session = { profile: 'default', toolContextRefs: ['tasks-bounds'] };
/** The share of each principal in this test: 24 records, 3 MiB. */
const SHARE = { records: 24, bytes: 3 * 1024 * 1024 };
/** Arguments of the flood: 900 KB, as in the attack. */
const BIG = 'x'.repeat(900_000);
/** Tasks the flood makes: 40 × 900 KB = 36 MB asked for, twelve times the share. */
const FLOOD = 40;
/** The flood's own time limit, in ms: 900 KB calls are slow on nats-server 2.9 and a busy machine. */
const FLOOD_TEST_MS = 90_000;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
/** Heap in use after a full collection, in bytes. */
function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

describe('what one caller’s tasks keep', () => {
  let bus: TaskBus;
  const attacker = { principal: 'agent:flood', session: 's-flood' };
  const victim = { principal: 'agent:victim', session: 's-victim' };

  const call = (who: typeof attacker, id: string, args: Record<string, unknown>, task = true) =>
    bus.client.request<{ task: Task } | ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id, name: 'work', arguments: args }, ...(task ? { task: {} } : {}) },
      who,
    );
  const bucketBytes = async () => (await (await jetstreamManager(bus.nc)).streams.info(`KV_${bus.bucket}`)).state.bytes;

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, slowContext('tasks-bounds', SLOW), {
      runner: { maxRecordsPerPrincipal: SHARE.records, maxBytesPerPrincipal: SHARE.bytes },
      timeoutMs: 20_000,
    });
  });
  afterAll(() => bus.stop());

  it(
    'keeps the bucket within the share under a loop of large tasks, and another agent’s calls go on',
    async () => {
      const idle: number[] = [];
      for (let i = 0; i < 10; i++) {
        const t0 = performance.now();
        expect(await call(victim, `idle-${i}`, { steps: 1, stepMs: 1 }, false)).toMatchObject({ isError: false });
        idle.push(performance.now() - t0);
      }
      const heapBefore = heapAfterGc();
      let flooding = true;
      const during: number[] = [];
      const victimLoop = (async () => {
        for (let i = 0; flooding; i++) {
          const t0 = performance.now();
          const r = await call(victim, `during-${i}`, { steps: 1, stepMs: 1 }, false);
          during.push(performance.now() - t0);
          expect(r).toMatchObject({ isError: false });
        }
      })();
      const replies: ({ task: Task } | ToolResult)[] = [];
      let peak = 0;
      for (let i = 0; i < FLOOD; i++) {
        replies.push(await call(attacker, `flood-${i}`, { steps: 1, stepMs: 1, pad: BIG }));
        if (i % 10 === 9) peak = Math.max(peak, await bucketBytes());
      }
      flooding = false;
      await victimLoop;
      peak = Math.max(peak, await bucketBytes());
      const made = replies.filter((r) => 'task' in r).length;
      // Records: at most the share; bytes: the share, and the few live ones written once more
      // when they end (small then) before their 900 KB is dropped.
      expect(made).toBeLessThanOrEqual(SHARE.records);
      expect(made).toBeGreaterThan(0);
      expect(peak).toBeLessThan(SHARE.bytes + 2 * 1024 * 1024);
      // This instance holds index entries of finished tasks: no 900 KB each (54 MB asked for).
      const heapGrowth = heapAfterGc() - heapBefore;
      expect(heapGrowth).toBeLessThan(16 * 1024 * 1024);
      // Another agent's calls kept working throughout, and its own share is untouched.
      expect(during.length).toBeGreaterThan(0);
      expect(await call(victim, 'victim-task', { steps: 1, stepMs: 1 })).toHaveProperty('task');
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
      console.log(
        `flood: ${made}/${FLOOD} made, bucket peak ${peak} B, heap +${heapGrowth} B; victim p50 idle ${median(idle).toFixed(1)} ms, during ${median(during).toFixed(1)} ms (${during.length} calls)`,
      );
    },
    FLOOD_TEST_MS,
  );

  it('refuses past the share, saying what to do', async () => {
    const who = { principal: 'agent:full', session: 's-full' };
    for (let i = 0; i < SHARE.records; i++)
      expect(await call(who, `fill-${i}`, { steps: 1, stepMs: 1 })).toHaveProperty('task');
    const refused = (await call(who, 'one-more', { steps: 1, stepMs: 1 })) as ToolResult;
    expect(refused).toMatchObject({ isError: true, error: { code: 'unavailable' } });
    expect(refused.content).toContain(`at most ${SHARE.records} records`);
    expect(refused.content).toContain('system.tasks.$result');
    expect(refused.content).toContain('call again once older tasks are gone');
    expect(refused.content).toContain('without task');
    // The same call without task is not held back by the share.
    expect(await call(who, 'one-more-now', { steps: 1, stepMs: 1 }, false)).toMatchObject({ isError: false });
  });

  it('counts the bytes of live tasks too: the fourth 900 KB task running at once is refused', async () => {
    const who = { principal: 'agent:heavy', session: 's-heavy' };
    const long = { steps: 400, stepMs: 50, pad: BIG };
    const made: Task[] = [];
    for (let i = 0; i < 3; i++) made.push(((await call(who, `heavy-${i}`, long)) as { task: Task }).task);
    const refused = (await call(who, 'heavy-3', long)) as ToolResult;
    expect(refused).toMatchObject({ isError: true, error: { code: 'unavailable' } });
    expect(refused.content).toContain(`${SHARE.bytes} bytes`);
    // Ended, a task drops its arguments: its bytes are free again.
    await bus.client.request('system.tasks', '$cancel', { taskId: made[0]?.taskId }, who);
    expect(await call(who, 'heavy-4', long)).toHaveProperty('task');
    for (const t of (await bus.client.request<TaskListReply>('system.tasks', '$list', {}, who)).tasks)
      await bus.client.request('system.tasks', '$cancel', { taskId: t.taskId }, who);
  });

  it('keeps no arguments, session or grant of a finished task: their digest', async () => {
    const who = { principal: 'agent:digest', session: 's-digest' };
    const args = { steps: 1, stepMs: 1, pad: 'y'.repeat(50_000) };
    const { task } = (await call(who, 'digest-1', args)) as { task: Task };
    await bus.client.request('system.tasks', '$result', { taskId: task.taskId, waitMs: 10_000 }, who);
    const store = bus.runner.store;
    const [key] = await store.keysOf(who);
    const raw = await store.bucket.get(key as string);
    const text = Buffer.from(raw?.value ?? []).toString('utf8');
    const record = JSON.parse(text) as TaskRecord;
    expect(record.task.status).toBe('completed');
    expect(text).not.toContain('yyyy');
    expect(record.call).toEqual({ id: 'digest-1', name: 'work' });
    expect(record.argumentsDigest).toBe(sha256Hex(JSON.stringify(args)));
    expect(record.session).toBeUndefined();
    expect(record.context.grant).toBeUndefined();
    expect(text.length).toBeLessThan(4_096);
    const listed = await bus.client.request<TaskListReply>('system.tasks', '$list', {}, who);
    expect(listed.tasks.map((t) => t.taskId)).toEqual([task.taskId]);
  });

  it('starts a second instance holding index entries of finished tasks, not whole records', async () => {
    const known = await bus.runner.store.bucket.keys();
    const heapBefore = heapAfterGc();
    const t0 = performance.now();
    const dispatcher = new Dispatcher(bus.nc);
    const second = new TaskRunner(dispatcher, await TaskStore.open(bus.nc, { bucket: bus.bucket })).start();
    try {
      await eventually(() =>
        expect(second.tasksOf({ principal: 'agent:full', session: 's-full' }).length).toBe(SHARE.records),
      );
      const startMs = performance.now() - t0;
      const heapGrowth = heapAfterGc() - heapBefore;
      console.log(`second instance: ${known.length} records known in ${startMs.toFixed(0)} ms, heap +${heapGrowth} B`);
      expect(heapGrowth).toBeLessThan(8 * 1024 * 1024);
    } finally {
      second.close();
      dispatcher.close();
    }
  });

  it('bounds the bytes of a bucket made before the bound, at start', async () => {
    const name = `${bus.bucket}-old`;
    const old = await new Kvm(bus.nc).create(name, { history: 1 });
    const jsm = await jetstreamManager(bus.nc);
    expect((await jsm.streams.info(`KV_${name}`)).config.max_bytes).toBe(-1);
    await TaskStore.open(bus.nc, { bucket: name, maxBytes: 4 * 1024 * 1024 });
    expect((await jsm.streams.info(`KV_${name}`)).config.max_bytes).toBe(4 * 1024 * 1024);
    await old.destroy();
  });
});

describe('a task larger than a whole share', () => {
  let bus: TaskBus;
  const small = uniqueMount('slow');

  beforeAll(async () => {
    bus = await startTaskBus(small, slowContext('tasks-bounds-small', small), {
      runner: { maxBytesPerPrincipal: 256 * 1024 },
    });
  });
  afterAll(() => bus.stop());

  it('is refused payload_too_large, saying to send less or call without task', async () => {
    const who = { principal: 'agent:big', session: 's-big' };
    const refused = await bus.client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'default', toolContextRefs: ['tasks-bounds-small'] },
        call: { id: 'too-big', name: 'work', arguments: { steps: 1, stepMs: 1, pad: 'z'.repeat(300_000) } },
        task: {},
      },
      who,
    );
    expect(refused).toMatchObject({ isError: true, error: { code: 'payload_too_large' } });
    expect(refused.content).toContain('Send smaller arguments, or call it without task');
    expect(await bus.runner.store.keysOf(who)).toEqual([]);
  });
});
