/**
 * The bound on one principal's live tasks holds across instances: each live task holds one of
 * the principal's slots in the tasks bucket, taken compare-and-set (src/tasks/slots.ts). Two
 * instances taking a burst at once make no more tasks than the bound; a slot comes back when its
 * task ends on an instance that took it over, and when the instance that took it died before
 * writing its task or before freeing it after its task ended (another instance's sweeper frees
 * it).
 */
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { MatrixToolProjection, ResolveRequest, ToolContextSpec } from '../../src/registry/types.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { LiveSlots } from '../../src/tasks/slots.js';
import { TaskStore, taskKey } from '../../src/tasks/store.js';
import type { Task } from '../../src/tasks/types.js';
import { sharedNats, testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { staticRegistry, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, slowTool, startSlowMount } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const tool = (name: string, extra: Partial<MatrixToolProjection> = {}) => slowTool(SLOW, name, extra);
const spec: ToolContextSpec = {
  key: 'tasks-slots',
  title: 'Task slots',
  description: 'slow tools',
  matrixTools: [tool('work'), tool('rework', { annotations: { idempotent: true } })],
  permissions: { approval: 'never' },
};
const session: ResolveRequest = { profile: 'test', toolContextRefs: ['tasks-slots'] };
/** Live tasks per principal here: small, so a burst of a few calls crosses it. */
const MAX_LIVE = 3;
const timing = { leaseMs: 1_000, tickMs: 200, sweepMs: 200, maxLivePerPrincipal: MAX_LIVE };

/** An instance: a runner and the dispatcher mount (where tasks are made) on a connection of its own. */
interface Instance {
  nc: NatsConnection;
  runner: TaskRunner;
  /** Stops as a killed process does: no more writes, the connection gone. */
  die(): Promise<void>;
}

describe('live-task slots across instances', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let slow: SlowMount;
  let bucket: string;
  let client: BusClient;
  const instances: Instance[] = [];

  const startInstance = async (name: string, leaseMs = timing.leaseMs): Promise<Instance> => {
    const inc = await connectBus({ ...sharedNats(), name });
    const dispatcher = new Dispatcher(inc);
    const runner = new TaskRunner(dispatcher, await TaskStore.open(inc, { bucket }), { ...timing, leaseMs }).start();
    const mount = await dispatcherMount(inc, { dispatcher, tasks: runner }).start();
    let dead = false;
    const instance: Instance = {
      nc: inc,
      runner,
      die: async () => {
        if (dead) return;
        dead = true;
        await mount.stop();
        runner.close();
        dispatcher.close();
        await inc.close();
      },
    };
    instances.push(instance);
    return instance;
  };
  /** Asks for a task of `principal` on whichever instance answers; its task, or the refusal. */
  const call = (principal: string, name: string, args: Record<string, unknown>, i = 0) =>
    client.request<{ task: Task } | ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: `c-${name}-${i}-${Date.now()}`, name, arguments: args }, task: {} },
      { principal, session: `s-${principal}` },
    );

  /** `principal`'s slots are all held (a task is refused), then one is freed (a task is made). */
  const refusedThenMade = async (principal: string) => {
    await eventually(async () => {
      const refused = await call(principal, 'work', { steps: 1, stepMs: 10 });
      expect('task' in refused ? '' : refused.content).toMatch(/You already have 3 tasks running/);
    });
    await eventually(
      async () => {
        const next = await call(principal, 'work', { steps: 1, stepMs: 10 });
        expect('task' in next).toBe(true);
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
  };

  beforeAll(async () => {
    nc = await testConnection();
    bucket = uniqueBucket();
    registry = await staticRegistry(nc, spec);
    slow = await startSlowMount(nc, SLOW);
    client = new BusClient(nc, { timeoutMs: 20_000 });
  });

  afterAll(async () => {
    client.close();
    for (const instance of instances) await instance.die();
    await slow.stop();
    await registry.stop();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it(`makes at most ${MAX_LIVE} live tasks of one principal from a burst split over two instances`, async () => {
    const [a, b] = [await startInstance('slots-a'), await startInstance('slots-b')];
    const replies = await Promise.all(
      Array.from({ length: 8 * MAX_LIVE }, (_, i) => call('burst', 'work', { steps: 100, stepMs: 50 }, i)),
    );
    const made = replies.filter((r): r is { task: Task } => 'task' in r);
    expect(made.length).toBe(MAX_LIVE);
    for (const refused of replies.filter((r): r is ToolResult => !('task' in r)))
      expect(refused.content).toMatch(/You already have \d+ tasks running/);
    await a.die();
    await b.die();
  });

  it('frees the slot of a task taken over by another instance once it ends there', async () => {
    const a = await startInstance('slots-takeover-a');
    const started = slow.started;
    const first = await Promise.all(
      Array.from({ length: MAX_LIVE }, (_, i) => call('taken', 'rework', { steps: 5, stepMs: 100 }, i)),
    );
    expect(first.every((r) => 'task' in r)).toBe(true);
    await eventually(() => expect(slow.started).toBe(started + MAX_LIVE));
    await a.die();
    // b's own lease (and so its sweeper's grace for slots left behind, two leases) is long: what
    // frees the slots here is b, the holder, hearing the tasks it took over end.
    const b = await startInstance('slots-takeover-b', 60_000);
    await eventually(
      async () => {
        const next = await call('taken', 'rework', { steps: 1, stepMs: 10 });
        expect('task' in next).toBe(true);
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(slow.started).toBeGreaterThanOrEqual(started + 2 * MAX_LIVE);
    await b.die();
  });

  it('frees a slot whose instance died after taking it and before writing its task', async () => {
    const b = await startInstance('slots-orphan-b');
    const store = await TaskStore.open(nc, { bucket });
    const dead = new LiveSlots(store.bucket, MAX_LIVE, 0);
    for (let i = 0; i < MAX_LIVE; i++) expect(await dead.take('orphaned', `never-written.${i}`, 60_000)).toBeDefined();
    // b's sweeper frees them once it has seen them without a task for two leases.
    await refusedThenMade('orphaned');
    await b.die();
  });

  it('frees a slot whose instance died after its task ended and before freeing it', async () => {
    const b = await startInstance('slots-ended-b');
    const owner = { principal: 'ended', session: 's-ended' };
    const keys: string[] = [];
    for (let i = 0; i < MAX_LIVE; i++) {
      const made = await call('ended', 'work', { steps: 1, stepMs: 10 }, i);
      if (!('task' in made)) throw new Error(made.content);
      const taskId = made.task.taskId;
      await eventually(async () => expect((await b.runner.get(owner, taskId))?.record.task.status).toBe('completed'));
      keys.push(taskKey(owner, taskId));
    }
    // As the instance that ended them would leave them had it died before freeing their slots.
    const store = await TaskStore.open(nc, { bucket });
    const dead = new LiveSlots(store.bucket, MAX_LIVE, 0);
    for (const key of keys) expect(await dead.take('ended', key, 60_000)).toBeDefined();
    // b's sweeper frees them once it has seen their tasks ended for two leases.
    await refusedThenMade('ended');
    await b.die();
  });
});
