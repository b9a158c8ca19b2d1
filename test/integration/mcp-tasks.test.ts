/**
 * The MCP bridge speaks tasks (PROTOCOL 11), tested with the MCP SDK's own client and its
 * experimental tasks API over the built bridge's real stdio: a tools/call with task is a task
 * read, listed, cancelled and fetched through system.tasks; a plain call with a progressToken
 * gets notifications/progress; a notifications/cancelled stops the target.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { GetTaskResultSchema, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import { TaskRunner } from '../../src/tasks/runner.js';
import { TaskStore } from '../../src/tasks/store.js';
import { tasksMount } from '../../src/tasks/system-tasks.js';
import { sharedNatsEnv, sharedNatsUrl, testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { CLI_MAIN } from '../harness/mcp.js';
import { contextSpec, type Instance, startInstance, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

describe('the MCP bridge and tasks, through the MCP SDK client', () => {
  let url: string;
  let nc: NatsConnection;
  let registry: Instance;
  let slow: SlowMount;
  let dispatcher: Dispatcher;
  let runner: TaskRunner;
  const mounts: Mount[] = [];
  const clients: Client[] = [];
  const SLOW = uniqueMount('slow');
  const key = `mcp-tasks-${process.pid}`;
  const tasksBucket = uniqueBucket();

  beforeAll(async () => {
    url = sharedNatsUrl();
    nc = await testConnection();
    registry = await startInstance(nc, uniqueBucket());
    slow = await startSlowMount(nc, SLOW);
    dispatcher = new Dispatcher(nc);
    runner = new TaskRunner(dispatcher, await TaskStore.open(nc, { bucket: tasksBucket })).start();
    mounts.push(await dispatcherMount(nc, { dispatcher, tasks: runner }).start());
    mounts.push(await tasksMount(nc, { runner }).start());
    const base = contextSpec(key);
    const work = { description: 'slow work', inputSchema: { type: 'object' as const }, target: SLOW, op: '$work' };
    const spec = {
      ...base,
      matrixTools: [
        { ...work, name: 'work', timeoutMs: 30_000 },
        { ...work, name: 'long_job', timeoutMs: 30_000, execution: { taskSupport: 'required' as const } },
      ],
    };
    const c = new BusClient(nc);
    await c.request('system.tools', '$register', { spec });
    c.close();
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    for (const m of mounts) await m.stop();
    runner.close();
    dispatcher.close();
    await slow.stop();
    await registry.stop();
    await (await new Kvm(nc).open(tasksBucket)).destroy();
  });

  const connect = async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI_MAIN, 'mcp', '--profile', 'default', '--refs', key],
      env: { ...process.env, ...sharedNatsEnv(url), NATS_URL: url } as Record<string, string>,
      stderr: 'pipe',
    });
    const mcp = new Client({ name: 'sdk-tasks-test', version: '1.0.0' });
    clients.push(mcp);
    await mcp.connect(transport);
    return mcp;
  };

  /** A client and every message the bridge sent it, as read off the wire before the SDK handles it. */
  const connectRecording = async () => {
    const mcp = await connect();
    const wire: Array<Record<string, unknown>> = [];
    const transport = mcp.transport as NonNullable<typeof mcp.transport>;
    const handle = transport.onmessage;
    transport.onmessage = (message, extra) => {
      wire.push(message as Record<string, unknown>);
      handle?.(message, extra);
    };
    return { mcp, wire };
  };

  it('declares the tasks capability for tools/call and lists each tool with execution.taskSupport', async () => {
    const mcp = await connect();
    expect(mcp.getServerCapabilities()?.tasks).toMatchObject({
      requests: { tools: { call: {} } },
      list: {},
      cancel: {},
    });
    const tools = new Map((await mcp.listTools()).tools.map((t) => [t.name, t.execution?.taskSupport]));
    expect(tools.get('work')).toBe('optional');
    expect(tools.get('long_job')).toBe('required');
  });

  it('runs a tools/call with task as a task: created, polled, its result fetched, listed', async () => {
    const mcp = await connect();
    const seen: string[] = [];
    let taskId = '';
    let text = '';
    const stream = mcp.experimental.tasks.callToolStream(
      { name: 'long_job', arguments: { steps: 3, stepMs: 150 } },
      undefined,
      { task: { ttl: 120_000 } },
    );
    for await (const message of stream) {
      seen.push(message.type);
      if (message.type === 'taskCreated') taskId = message.task.taskId;
      if (message.type === 'result') text = (message.result.content as Array<{ text: string }>)[0]?.text ?? '';
      if (message.type === 'error') throw message.error;
    }
    expect(seen[0]).toBe('taskCreated');
    expect(seen.at(-1)).toBe('result');
    expect(text).toBe('{"done":3}');
    const task = await mcp.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ taskId, status: 'completed', ttl: 120_000 });
    const listed = await mcp.experimental.tasks.listTasks();
    expect(listed.tasks.map((t) => t.taskId)).toContain(taskId);
  });

  it('sends notifications/progress for a task whose tools/call carried a progressToken', async () => {
    const mcp = await connect();
    const progress: Progress[] = [];
    const stream = mcp.experimental.tasks.callToolStream(
      { name: 'work', arguments: { steps: 4, stepMs: 1_000 } },
      undefined,
      { task: {}, onprogress: (p) => progress.push(p) },
    );
    let text = '';
    for await (const message of stream) {
      if (message.type === 'result') text = (message.result.content as Array<{ text: string }>)[0]?.text ?? '';
      if (message.type === 'error') throw message.error;
    }
    expect(text).toBe('{"done":4}');
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p) => p.total === 4 && p.progress >= 1 && p.progress <= 4)).toBe(true);
    expect(progress.map((p) => p.progress)).toEqual([...progress.map((p) => p.progress)].sort());
  });

  it('cancels a task by tasks/cancel: its target stops', async () => {
    const mcp = await connect();
    const before = slow.stopped.length;
    const stream = mcp.experimental.tasks.callToolStream(
      { name: 'work', arguments: { steps: 200, stepMs: 50 } },
      undefined,
      { task: {} },
    );
    const first = await stream.next();
    const taskId = first.value?.type === 'taskCreated' ? first.value.task.taskId : '';
    expect(taskId).not.toBe('');
    await eventually(() => expect(slow.started).toBeGreaterThan(0));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const cancelled = await mcp.experimental.tasks.cancelTask(taskId);
    expect(cancelled.status).toBe('cancelled');
    await eventually(() => expect(slow.stopped.slice(before)).toEqual(['CancelledError']));
    await stream.return(undefined);
    await expect(mcp.experimental.tasks.getTask('AAAAAAAAAAAAAAAAAAAAAA')).rejects.toThrow(/no task/);
  });

  it('answers task ops whose params name no task with -32602 in a sentence, not the SDK’s -32603 dump', async () => {
    const mcp = await connect();
    const ask = (method: string, params?: unknown) =>
      mcp.request({ method, ...(params === undefined ? {} : { params }) } as never, GetTaskResultSchema);
    for (const [method, params] of [
      ['tasks/get', {}],
      ['tasks/get', { taskId: 5 }],
      ['tasks/cancel', undefined],
      ['tasks/result', { taskId: '' }],
    ] as const) {
      await expect(ask(method, params)).rejects.toMatchObject({
        code: -32602,
        message: expect.stringMatching(new RegExp(`${method} params.taskId must name a task`)),
      });
    }
    await expect(ask('tasks/list', { cursor: 7 })).rejects.toMatchObject({ code: -32602 });
  });

  it('sends notifications/progress for a plain call with a progressToken', async () => {
    const { mcp, wire } = await connectRecording();
    const progress: Progress[] = [];
    // Steps far apart beside the relay's thinning (PROGRESS_RELAY_MS): every report is its own.
    const result = await mcp.callTool({ name: 'work', arguments: { steps: 3, stepMs: 600 } }, undefined, {
      onprogress: (p) => progress.push(p),
    });
    expect((result.content as Array<{ text: string }>)[0]?.text).toBe('{"done":3}');
    // The bridge sends every report, in order, and all of them before the result.
    const reports = wire.flatMap((m, at) =>
      m.method === 'notifications/progress' ? [{ at, ...(m.params as { progress: number }) }] : [],
    );
    const resultAt = wire.findIndex((m) => JSON.stringify(m.result ?? null).includes('{\\"done\\":3}'));
    expect(reports.map((r) => r.progress)).toEqual([1, 2, 3]);
    expect(reports.every((r) => r.at < resultAt)).toBe(true);
    expect(reports[0]).toMatchObject({ total: 3, message: 'step 1 of 3' });
    // The SDK client hands a report to onprogress a microtask after reading it, and forgets the
    // call's listener when it reads the result: the last report, read with the result, may not reach it.
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3].slice(0, Math.max(2, progress.length)));
    expect(progress[0]).toMatchObject({ total: 3, message: 'step 1 of 3' });
  });

  it('cancels a plain call on notifications/cancelled: its target stops', async () => {
    const mcp = await connect();
    const before = slow.stopped.length;
    const controller = new AbortController();
    const call = mcp.callTool({ name: 'work', arguments: { steps: 200, stepMs: 50 } }, undefined, {
      signal: controller.signal,
    });
    await eventually(() => expect(slow.started).toBeGreaterThan(0));
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort('the user pressed stop');
    await expect(call).rejects.toThrow();
    await eventually(() => expect(slow.stopped.slice(before)).toEqual(['CancelledError']));
  });
});
