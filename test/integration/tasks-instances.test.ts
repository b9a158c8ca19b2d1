/**
 * Tasks shared by instances: any instance answers for a task another made, and when the instance
 * running a task stops renewing its lease, another takes it over: not yet sent → run (its
 * approval asked again: nothing was sent), sent → `failed` "may have run", unless idempotent
 * (sent again). An instance "dies" here as a killed one does: it stops writing, its connection closes.
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
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import type { Task } from '../../src/tasks/types.js';
import { sharedNats, testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { staticRegistry, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, slowTool, startSlowMount } from '../harness/slow-mount.js';
import { startTarget, type Target } from '../harness/targets.js';

const SLOW = uniqueMount('slow');
const tool = (name: string, extra: Partial<MatrixToolProjection> = {}) => slowTool(SLOW, name, extra);
const spec: ToolContextSpec = {
  key: 'tasks-instances',
  title: 'Tasks on instances',
  description: 'slow tools',
  matrixTools: [tool('work'), tool('rework', { annotations: { idempotent: true } }), tool('gated_work')],
  permissions: { approval: { tools: ['gated_work'] } },
};
const session: ResolveRequest = { profile: 'test', toolContextRefs: ['tasks-instances'] };
const owner = { principal: 'erin', session: 's-erin' };
const timing = { leaseMs: 1_000, tickMs: 200, sweepMs: 200 };

/** An instance with the dispatcher mount (where tasks are made) on a connection of its own. */
interface InstanceA {
  nc: NatsConnection;
  runner: TaskRunner;
  dispatcher: Dispatcher;
  mount: Mount;
  /** Stops as a killed process does: no more writes, the connection gone. */
  die(): Promise<void>;
}

describe('tasks across instances', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let slow: SlowMount;
  let approver: Target;
  let releaseDecision: ((decision: unknown) => void) | undefined;
  let approveAtOnce = false;
  let bucket: string;
  let b: { runner: TaskRunner; dispatcher: Dispatcher; mount: Mount };
  let client: BusClient;

  const startA = async (): Promise<InstanceA> => {
    const anc = await connectBus({ ...sharedNats(), name: 'instance-a' });
    const dispatcher = new Dispatcher(anc);
    const runner = new TaskRunner(dispatcher, await TaskStore.open(anc, { bucket }), timing).start();
    const mount = await dispatcherMount(anc, { dispatcher, tasks: runner }).start();
    return {
      nc: anc,
      runner,
      dispatcher,
      mount,
      die: async () => {
        runner.close();
        await anc.close();
      },
    };
  };
  const start = async (a: InstanceA, name: string, args: Record<string, unknown>): Promise<Task> => {
    const c = new BusClient(a.nc, { timeoutMs: 10_000 });
    const reply = await c.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      { session, call: { id: `c-${name}-${Date.now()}`, name, arguments: args }, task: {} },
      owner,
    );
    c.close();
    return reply.task;
  };
  const onB = <T>(op: string, body: Record<string, unknown>) =>
    client.request<T>('system.tasks', op, body, { ...owner, timeoutMs: 40_000 });

  beforeAll(async () => {
    nc = await testConnection();
    bucket = uniqueBucket();
    registry = await staticRegistry(nc, spec);
    slow = await startSlowMount(nc, SLOW);
    approver = await startTarget(nc, 'system.approvals', {
      $decide: () =>
        approveAtOnce
          ? { decision: 'approve', by: 'tester' }
          : new Promise((resolve) => {
              releaseDecision = resolve;
            }),
    });
    const dispatcher = new Dispatcher(nc);
    const runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket }), timing).start();
    b = { runner, dispatcher, mount: await tasksMount(nc, { runner }).start() };
    client = new BusClient(nc, { timeoutMs: 10_000 });
  });

  afterAll(async () => {
    client.close();
    await b.mount.stop();
    b.runner.close();
    b.dispatcher.close();
    approver.stop();
    await slow.stop();
    await registry.stop();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('reads and cancels on one instance a task made and running on another, whose target stops', async () => {
    const a = await startA();
    const stoppedBefore = slow.stopped.length;
    const task = await start(a, 'work', { steps: 200, stepMs: 50 });
    await eventually(async () => expect((await onB<Task>('$get', { taskId: task.taskId })).progress).toBeDefined());
    expect((await onB<Task>('$cancel', { taskId: task.taskId })).status).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
    expect((await onB<ToolResult>('$result', { taskId: task.taskId })).error?.code).toBe('cancelled');
    await a.mount.stop();
    await a.die();
  });

  it('takes over a gated task whose instance died waiting for approval: approved, its target runs once', async () => {
    const a = await startA();
    const before = slow.started;
    const asked = approver.count('$decide');
    const task = await start(a, 'gated_work', { steps: 1, stepMs: 10 });
    await eventually(() => expect(approver.count('$decide')).toBe(asked + 1));
    await a.die();
    approveAtOnce = true;
    releaseDecision?.({ decision: 'approve', by: 'too late: nobody hears this one' });
    const result = await onB<ToolResult>('$result', { taskId: task.taskId, waitMs: 20_000 });
    expect(result).toMatchObject({ isError: false, content: '{"done":1}' });
    expect(slow.started).toBe(before + 1);
    expect(approver.count('$decide')).toBe(asked + 2);
    approveAtOnce = false;
  });

  it('fails a task whose instance died after sending it: it may have run, check before asking again', async () => {
    const a = await startA();
    const before = slow.started;
    const task = await start(a, 'work', { steps: 40, stepMs: 50 });
    await eventually(() => expect(slow.started).toBe(before + 1));
    await a.die();
    const result = await onB<ToolResult>('$result', { taskId: task.taskId, waitMs: 20_000 });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/may have run: check before asking again/);
    expect((await onB<Task>('$get', { taskId: task.taskId })).status).toBe('failed');
    expect(slow.started).toBe(before + 1);
  });

  it('sends an idempotent task again when its instance died after sending it, and finishes it', async () => {
    const a = await startA();
    const before = slow.started;
    const task = await start(a, 'rework', { steps: 10, stepMs: 100 });
    await eventually(() => expect(slow.started).toBe(before + 1));
    await a.die();
    const result = await onB<ToolResult>('$result', { taskId: task.taskId, waitMs: 20_000 });
    expect(result).toMatchObject({ isError: false, content: '{"done":10}' });
    expect(slow.started).toBe(before + 2);
  });
});
