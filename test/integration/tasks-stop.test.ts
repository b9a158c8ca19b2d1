/**
 * A service that stops does not wait out the `$result` long-polls it holds: each answers with the
 * task as it stands, and the task itself is left to the lease (another instance takes it over).
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { silentLogger } from '../../src/bus/log.js';
import { serveConfig } from '../../src/cli/config.js';
import { type ServeHandle, serve } from '../../src/cli/serve.js';
import type { Task } from '../../src/tasks/types.js';
import { sharedNatsEnv, sharedNatsUrl, testConnection, uniqueMount } from '../harness/bus.js';
import { contextSpec, uniqueBucket } from '../harness/registry.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

describe('a stopping service and the $result waits it holds', () => {
  let nc: NatsConnection;
  let slow: SlowMount;
  let handle: ServeHandle;
  let client: BusClient;
  const SLOW = uniqueMount('slow');
  const key = `tasks-stop-${process.pid}`;

  beforeAll(async () => {
    nc = await testConnection();
    slow = await startSlowMount(nc, SLOW);
    handle = await serve(
      serveConfig(
        { server: sharedNatsUrl(), reference: false, bucket: uniqueBucket() },
        sharedNatsEnv(sharedNatsUrl()),
      ),
      silentLogger,
    );
    client = new BusClient(nc, { timeoutMs: 40_000 });
    const work = {
      name: 'work',
      description: 'slow',
      inputSchema: { type: 'object' as const },
      target: SLOW,
      op: '$work',
    };
    await client.request('system.tools', '$register', {
      spec: { ...contextSpec(key), matrixTools: [{ ...work, timeoutMs: 60_000 }] },
    });
  });
  afterAll(async () => {
    client.close();
    await slow.stop();
  });

  it('answers a 30 s $result with the task at once when the service stops', async () => {
    const { task } = await client.request<{ task: Task }>('system.dispatcher', '$call', {
      session: { profile: 'default', toolContextRefs: [key] },
      call: { id: 'stop-1', name: 'work', arguments: { steps: 100, stepMs: 100 } },
      task: {},
    });
    const waiting = client.request<Task>('system.tasks', '$result', { taskId: task.taskId, waitMs: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    // A stop that waited out the 30 s $result, or a $result left to its 30 s, runs past this
    // test's own 20 s timeout.
    await handle.stop('test');
    expect(await waiting).toMatchObject({ taskId: task.taskId, status: 'working' });
  });
});
