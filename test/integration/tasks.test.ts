import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusClient } from '../../src/bus/client.js';
import { BadRequestError, NotFoundError } from '../../src/bus/errors.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { McpTool } from '../../src/registry/provider-tools.js';
import type {
  MatrixToolProjection,
  ResolvedToolContext,
  ResolveRequest,
  ToolContextSpec,
} from '../../src/registry/types.js';
import type { TaskRunner } from '../../src/tasks/runner.js';
import type { Task, TaskListReply } from '../../src/tasks/types.js';
import { uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { type SlowMount, startTaskBus, type TaskBus } from '../harness/slow-mount.js';

const SLOW = uniqueMount('slow');
const tool = (name: string, op: string, extra: Partial<MatrixToolProjection> = {}): MatrixToolProjection => ({
  name,
  description: `${name} for tests`,
  inputSchema: { type: 'object' },
  target: SLOW,
  op,
  timeoutMs: 20_000,
  ...extra,
});
const spec: ToolContextSpec = {
  key: 'tasks-test',
  title: 'Tasks test',
  description: 'slow tools',
  matrixTools: [
    tool('work', '$work', {
      inputSchema: { type: 'object', properties: { steps: { type: 'integer' }, stepMs: { type: 'integer' } } },
    }),
    tool('flood', '$flood'),
    tool('only_task', '$work', { execution: { taskSupport: 'required' } }),
    tool('never_task', '$work', { execution: { taskSupport: 'forbidden' } }),
    tool('strict', '$work', {
      inputSchema: { type: 'object', required: ['steps'], properties: { steps: { type: 'integer' } } },
    }),
  ],
  permissions: { approval: 'never' },
};
const session: ResolveRequest = { profile: 'test', toolContextRefs: ['tasks-test'] };
const alice = { principal: 'alice', session: 's-alice' };
const bob = { principal: 'bob', session: 's-bob' };

describe('tool calls as tasks (system.tasks)', () => {
  let bus: TaskBus;
  let slow: SlowMount;
  let runner: TaskRunner;
  let client: BusClient;

  const call = (name: string, args: Record<string, unknown>, who = alice, task: Record<string, unknown> | null = {}) =>
    client.request<{ task: Task } | ToolResult>(
      'system.dispatcher',
      '$call',
      task === null
        ? { session, call: { id: `c-${name}-${Date.now()}`, name, arguments: args } }
        : { session, call: { id: `c-${name}-${Date.now()}`, name, arguments: args }, task },
      who,
    );
  const started = async (name: string, args: Record<string, unknown>, who = alice): Promise<Task> => {
    const reply = await call(name, args, who);
    if (!('task' in reply)) throw new Error(`no task: ${JSON.stringify(reply)}`);
    return reply.task;
  };
  const tasks = <T>(op: string, body: Record<string, unknown>, who = alice) =>
    client.request<T>('system.tasks', op, body, { ...who, timeoutMs: 40_000 });

  beforeAll(async () => {
    bus = await startTaskBus(SLOW, spec, { runner: { maxLivePerPrincipal: 4 } });
    ({ slow, runner, client } = bus);
  });

  afterAll(() => bus.stop());

  it('answers a $call with task at once with {task}, then $result gives the ToolResult once it ends', async () => {
    const before = slow.started;
    const task = await started('work', { steps: 3, stepMs: 100 });
    expect(task.taskId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(task).toMatchObject({ status: 'working', name: 'work', ttlMs: 600_000, pollIntervalMs: 1_000 });
    const result = await tasks<ToolResult>('$result', { taskId: task.taskId, waitMs: 10_000 });
    expect(result).toMatchObject({ isError: false, content: '{"done":3}' });
    expect(slow.started).toBe(before + 1);
    const after = await tasks<Task>('$get', { taskId: task.taskId });
    expect(after.status).toBe('completed');
  });

  it('records the latest progress on the task, at most one write a second however fast the target reports', async () => {
    const began = Date.now();
    const task = await started('flood', { reports: 200, ms: 2_000 });
    const key = (await runner.store.keysOf(alice)).find((k) => k.endsWith(task.taskId)) as string;
    const revisions = new Set<number>();
    const watch = runner.store.watch((k, _r, revision) => {
      if (k === key) revisions.add(revision);
    });
    const seen = await eventually(async () => {
      const t = await tasks<Task>('$get', { taskId: task.taskId });
      return t.progress !== undefined && t.progress.progress > 0 && t.progress;
    });
    expect(seen.total).toBe(200);
    await tasks('$result', { taskId: task.taskId, waitMs: 10_000 });
    const seconds = Math.ceil((Date.now() - began) / 1000);
    watch.stop();
    // 200 reports: at most a write a second, besides the creation, the sent mark and the end.
    expect(revisions.size).toBeLessThanOrEqual(seconds + 3);
    expect(revisions.size).toBeLessThan(20);
  }, 40_000);

  it('answers a refused call with task as a ToolResult, as today, and makes no task', async () => {
    const unknown = (await call('no_such_tool', {})) as ToolResult;
    expect(unknown).toMatchObject({ isError: true, error: { code: 'not_found' } });
    const invalid = (await call('strict', { steps: 'many' })) as ToolResult;
    expect(invalid).toMatchObject({ isError: true, error: { code: 'bad_request' } });
    const listed = await tasks<TaskListReply>('$list', {});
    expect(listed.tasks.map((t) => t.name)).not.toContain('strict');
  });

  it('honours execution.taskSupport: required only as a task, forbidden never, and the MCP format shows it', async () => {
    const plain = (await call('only_task', { steps: 1, stepMs: 1 }, alice, null)) as ToolResult;
    expect(plain).toMatchObject({ isError: true, error: { code: 'bad_request' } });
    expect(plain.content).toMatch(/runs only as a task/);
    expect('task' in (await call('only_task', { steps: 1, stepMs: 1 }))).toBe(true);
    const never = (await call('never_task', {})) as ToolResult;
    expect(never.content).toMatch(/does not run as a task/);
    expect('isError' in (await call('never_task', { steps: 1, stepMs: 1 }, alice, null))).toBe(true);
    const resolved = await client.request<ResolvedToolContext>('system.tools', '$resolve', {
      ...session,
      format: 'mcp',
    });
    const mcpTools = (resolved.providerTools ?? []) as McpTool[];
    const byName = new Map(mcpTools.map((t) => [t.name, t.execution]));
    expect(byName.get('only_task')).toEqual({ taskSupport: 'required' });
    expect(byName.get('never_task')).toEqual({ taskSupport: 'forbidden' });
    expect(byName.get('work')).toEqual({ taskSupport: 'optional' });
  });

  it('tells anyone but the owner not_found, for every op, and a malformed or unknown id the same', async () => {
    const task = await started('work', { steps: 1, stepMs: 10 });
    for (const op of ['$get', '$result', '$cancel'])
      await expect(tasks(op, { taskId: task.taskId }, bob)).rejects.toThrow(NotFoundError);
    await expect(tasks('$get', { taskId: task.taskId }, { principal: 'alice', session: 'other' })).rejects.toThrow(
      NotFoundError,
    );
    await expect(tasks('$get', { taskId: 'AAAAAAAAAAAAAAAAAAAAAA' })).rejects.toThrow(NotFoundError);
    await expect(tasks('$get', { taskId: '../../etc' })).rejects.toThrow(NotFoundError);
    expect((await tasks<TaskListReply>('$list', {}, bob)).tasks.map((t) => t.taskId)).not.toContain(task.taskId);
  });

  it('removes a finished task once its ttlMs from creation has passed (the sweeper: no per-key TTL), and refuses one over 24 h', async () => {
    const reply = await call('work', { steps: 1, stepMs: 1 }, alice, { ttlMs: 1_000 });
    if (!('task' in reply)) throw new Error('no task');
    expect(reply.task.ttlMs).toBe(1_000);
    await tasks('$result', { taskId: reply.task.taskId, waitMs: 5_000 });
    await eventually(() => expect(tasks('$get', { taskId: reply.task.taskId })).rejects.toThrow(NotFoundError));
    await expect(call('work', {}, alice, { ttlMs: 86_400_001 })).rejects.toThrow(/ttlMs must be <= 86400000/);
  });

  it('refuses a $result wait over 30 s as bad_request', async () => {
    const task = await started('work', { steps: 1, stepMs: 10 });
    await expect(tasks('$result', { taskId: task.taskId, waitMs: 30_001 })).rejects.toThrow(BadRequestError);
  });

  it('cancels a running task: the mount stops, $result says cancelled; a finished task comes back unchanged', async () => {
    const stoppedBefore = slow.stopped.length;
    const task = await started('work', { steps: 200, stepMs: 50 });
    await eventually(async () => expect((await tasks<Task>('$get', { taskId: task.taskId })).progress).toBeDefined());
    const cancelled = await tasks<Task>('$cancel', { taskId: task.taskId });
    expect(cancelled.status).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
    const result = await tasks<ToolResult>('$result', { taskId: task.taskId });
    expect(result.error?.code).toBe('cancelled');

    const done = await started('work', { steps: 1, stepMs: 10 });
    await tasks('$result', { taskId: done.taskId, waitMs: 10_000 });
    const finished = await tasks<Task>('$get', { taskId: done.taskId });
    expect(await tasks<Task>('$cancel', { taskId: done.taskId })).toEqual(finished);
  });

  it("lists the caller's own tasks newest first, a page at a time, and by status", async () => {
    const carol = { principal: 'carol', session: 's-carol' };
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      made.push((await started('work', { steps: 1, stepMs: 1 }, carol)).taskId);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    for (const id of made) await tasks('$result', { taskId: id, waitMs: 10_000 }, carol);
    const first = await tasks<TaskListReply>('$list', { limit: 2 }, carol);
    expect(first.tasks.map((t) => t.taskId)).toEqual([made[2], made[1]]);
    const second = await tasks<TaskListReply>('$list', { limit: 2, cursor: first.nextCursor }, carol);
    expect(second.tasks.map((t) => t.taskId)).toEqual([made[0]]);
    expect(second.nextCursor).toBeUndefined();
    expect((await tasks<TaskListReply>('$list', { status: 'working' }, carol)).tasks).toEqual([]);
    expect((await tasks<TaskListReply>('$list', { status: 'completed' }, carol)).tasks).toHaveLength(3);
  });

  it('refuses a task past the live tasks one principal may hold, with a result that says so', async () => {
    const dave = { principal: 'dave', session: 's-dave' };
    const live: Task[] = [];
    for (let i = 0; i < 4; i++) live.push(await started('work', { steps: 100, stepMs: 50 }, dave));
    const refused = (await call('work', { steps: 1 }, dave)) as ToolResult;
    expect(refused).toMatchObject({ isError: true, error: { code: 'unavailable' } });
    expect(refused.content).toMatch(/already have 4 tasks running/);
    for (const t of live) await tasks('$cancel', { taskId: t.taskId }, dave);
  });
});
