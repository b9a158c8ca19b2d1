/**
 * Tasks survive the service (PROTOCOL 9), through the built binary on its own nats-server: the
 * service killed with SIGKILL while a gated task waits for its approval, started again and the
 * approval given → the target runs once; killed after the target was sent → `failed` "may have
 * run", and an idempotent tool sent again. And the CLI as a new user runs it: `call --task`
 * prints the task id and follows it with progress lines on stderr; `tasks`, `task`, `cancel`.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PendingReply } from '../../src/approvals/types.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { Task } from '../../src/tasks/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { contextSpec } from '../harness/registry.js';
import { cli, type ServiceProcess, startScript } from '../harness/service.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

const SLOW = 'app.slow';
const owner = { principal: 'agent:gina', session: 's-gina' };
const who = ['--principal', owner.principal, '--session', owner.session];
const work = { description: 'slow work', inputSchema: { type: 'object' as const }, target: SLOW, op: '$work' };

describe('tasks across a killed service, and the CLI', () => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  let nc: NatsConnection;
  let slow: SlowMount;
  let client: BusClient;
  const dir = mkdtempSync(join(tmpdir(), 'tasks-durable-'));
  const policy = join(dir, 'policy.json');
  const startService = () =>
    startScript('dist/src/cli/main.js', server.url, ' ready ', {}, ['serve', '--policy', policy]);
  const startTask = async (name: string, args: Record<string, unknown>): Promise<Task> => {
    const reply = await client.request<{ task: Task }>(
      'system.dispatcher',
      '$call',
      {
        session: { profile: 'default', toolContextRefs: ['slow-tools'] },
        call: { id: `c-${name}`, name, arguments: args },
        task: {},
      },
      owner,
    );
    return reply.task;
  };
  const result = (taskId: string) =>
    client.request<ToolResult>('system.tasks', '$result', { taskId, waitMs: 25_000 }, { ...owner, timeoutMs: 30_000 });
  const restart = async () => {
    await service?.stop('SIGKILL');
    service = await startService();
  };

  beforeAll(async () => {
    writeFileSync(policy, JSON.stringify({ default: 'ask' }));
    server = await startNatsProcess();
    service = await startService();
    nc = await connectBus({ servers: server.url });
    slow = await startSlowMount(nc, SLOW);
    client = new BusClient(nc, { timeoutMs: 10_000 });
    const spec = {
      ...contextSpec('slow-tools'),
      matrixTools: [
        { ...work, name: 'work', timeoutMs: 60_000 },
        { ...work, name: 'rework', timeoutMs: 60_000, annotations: { idempotent: true } },
        { ...work, name: 'gated_work', timeoutMs: 60_000 },
      ],
      permissions: { approval: { tools: ['gated_work'] } },
    };
    await client.request('system.tools', '$register', { spec });
  });

  afterAll(async () => {
    client.close();
    await slow.stop();
    await nc.close();
    await service?.stop('SIGKILL');
    await server?.stop();
  });

  it('runs a gated task once when approved after the service was killed while it waited', async () => {
    const task = await startTask('gated_work', { steps: 1, stepMs: 10 });
    const pending = await eventually(async () => {
      const found = (await client.request<PendingReply>('system.approvals', '$pending', {})).approvals.find(
        (a) => a.callId === 'c-gated_work',
      );
      if (found === undefined) throw new Error('not pending yet');
      return found;
    });
    await eventually(async () =>
      expect((await client.request<Task>('system.tasks', '$get', { taskId: task.taskId }, owner)).status).toBe(
        'input_required',
      ),
    );
    await restart();
    const approved = await cli(server.url, 'approve', pending.approvalId, '--yes');
    expect(approved.code, approved.stderr).toBe(0);
    expect(await result(task.taskId)).toMatchObject({ isError: false, content: '{"done":1}' });
    expect(slow.started).toBe(1);
  });

  it('fails a task sent before the kill (it may have run), and sends an idempotent one again', async () => {
    const before = slow.started;
    const once = await startTask('work', { steps: 60, stepMs: 100 });
    const again = await startTask('rework', { steps: 60, stepMs: 100 });
    await eventually(() => expect(slow.started).toBe(before + 2));
    await restart();
    const failed = await result(once.taskId);
    expect(failed.isError).toBe(true);
    expect(failed.content).toMatch(/may have run: check before asking again/);
    expect(await result(again.taskId)).toMatchObject({ isError: false, content: '{"done":60}' });
    expect(slow.started).toBe(before + 3);
  });

  it('call --task prints the task id, follows it on stderr, and tasks / task / cancel answer for it', async () => {
    const refs = ['--profile', 'default', '--refs', 'slow-tools'];
    const followed = await cli(
      server.url,
      'call',
      'work',
      '--task',
      '--args',
      '{"steps":3,"stepMs":700}',
      ...refs,
      ...who,
    );
    expect(followed.code, followed.stderr).toBe(0);
    const [taskId, content] = followed.stdout.trim().split('\n');
    expect(taskId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(content).toBe('{"done":3}');
    expect(followed.stderr).toMatch(new RegExp(`task ${taskId} working \\d/3 step \\d of 3`));

    const listed = await cli(server.url, 'tasks', ...who);
    expect(listed.stdout).toMatch(/^ID\s+TOOL\s+STATUS\s+PROGRESS\s+CREATED\s+MESSAGE$/m);
    expect(listed.stdout).toContain(`${taskId}  work`);
    const shown = await cli(server.url, 'task', taskId as string, '--json', ...who);
    expect(JSON.parse(shown.stdout)).toMatchObject({ taskId, status: 'completed' });

    const stoppedBefore = slow.stopped.length;
    const long = await startTask('work', { steps: 200, stepMs: 50 });
    await eventually(async () =>
      expect(
        (await client.request<Task>('system.tasks', '$get', { taskId: long.taskId }, owner)).progress,
      ).toBeDefined(),
    );
    const cancelled = await cli(server.url, 'cancel', long.taskId, ...who);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toContain(`task ${long.taskId} cancelled`);
    await eventually(() => expect(slow.stopped.slice(stoppedBefore)).toEqual(['CancelledError']));
    const foreign = await cli(server.url, 'task', long.taskId, '--principal', 'someone-else');
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toMatch(/not_found|no task/);
  });
});
