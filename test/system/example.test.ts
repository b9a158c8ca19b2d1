import { afterAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Progress } from '../../src/bus/context.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import type { Task } from '../../src/tasks/types.js';
import { sharedNats, sharedNatsUrl } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { runScript, type ServiceProcess, startScript, startService } from '../harness/service.js';

describe('the registration example, as a user runs it', () => {
  const running: ServiceProcess[] = [];
  afterAll(async () => {
    for (const p of running.reverse()) await p.stop('SIGTERM');
  });

  it('has a service register a context that an oracle then resolves and calls', async () => {
    const url = sharedNatsUrl();
    running.push(await startService(url));
    const weather = await startScript('dist/examples/weather-service.js', url, 'weather service ready');
    running.push(weather);
    const oracle = await runScript('dist/examples/oracle.js', url);
    expect(oracle.stderr).toBe('');
    expect(oracle.code).toBe(0);
    expect(oracle.stdout).toContain('contexts: actor-readonly, weather');
    expect(oracle.stdout).toContain('"weather_forecast"');
    expect(oracle.stdout).toContain('weather_forecast → isError=false\nLisbon, day 1: sunny\nLisbon, day 2: cloudy');
    expect(await weather.stop('SIGTERM')).toBe(0);
  });
});

describe('the long-task example, as a user runs it', () => {
  const running: ServiceProcess[] = [];
  let client: BusClient | undefined;
  afterAll(async () => {
    client?.close();
    await client?.nc.close();
    for (const p of running.reverse()) await p.stop('SIGTERM');
  });

  it('reports progress to a call that asks, runs as a task, and stops when the task is cancelled', async () => {
    const url = sharedNatsUrl();
    running.push(await startService(url));
    const jobs = await startScript('dist/examples/long-task-service.js', url, 'long task service ready');
    running.push(jobs);
    client = new BusClient(await connectBus(sharedNats()), { timeoutMs: 20_000 });
    const session = { profile: 'try', toolContextRefs: ['jobs'] };

    const reports: Progress[] = [];
    const counted = await client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session, call: { id: 'count-3', name: 'count_slowly', arguments: { to: 3, stepMs: 20 } } },
      { onProgress: (p) => reports.push(p) },
    );
    expect(counted).toMatchObject({ isError: false, structured: { counted: 3 } });
    // The dispatcher relays at most a few reports a second, the latest always.
    const steps = reports.map((r) => r.progress);
    expect(steps.length).toBeGreaterThan(0);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(reports.at(-1)).toEqual({ progress: 3, total: 3, message: 'counted to 3' });

    const { task } = await client.request<{ task: Task }>('system.dispatcher', '$call', {
      session,
      call: { id: 'count-long', name: 'count_slowly', arguments: { to: 1000, stepMs: 50 } },
      task: { ttlMs: 60_000 },
    });
    const progressed = await eventually(async () => {
      const now = await client?.request<Task>('system.tasks', '$get', { taskId: task.taskId });
      if (!now?.progress || now.progress.progress < 1) throw new Error('no progress yet');
      return now;
    });
    expect(progressed).toMatchObject({ status: 'working', progress: { total: 1000 } });
    const cancelled = await client.request<Task>('system.tasks', '$cancel', { taskId: task.taskId });
    expect(cancelled.status).toBe('cancelled');
    // The dispatcher's $cancel reached the mount, which stopped counting.
    await eventually(() => expect(jobs.output()).toContain('count to 1000 cancelled'));
    expect(await jobs.stop('SIGTERM')).toBe(0);
  });
});
