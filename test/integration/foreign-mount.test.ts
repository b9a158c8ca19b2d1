import type { NatsConnection } from '@nats-io/nats-core';
import type { Service } from '@nats-io/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import type { MountDescription } from '../../src/reference-mounts/agents.js';
import { agentsMount } from '../../src/reference-mounts/agents.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { testConnection } from '../harness/bus.js';
import { startJsonMicroMount } from '../harness/micro-mount.js';

describe('a mount the project did not write, as matrix_introspect sees it', () => {
  let nc: NatsConnection;
  let dispatcher: Dispatcher;
  let micro: Service;
  const mounts: Mount[] = [];
  // As in Go: a micro service named demo-go<pid> whose endpoints serve demo.go<pid>.*, no metadata.
  const mount = `demo.go${process.pid}`;

  beforeAll(async () => {
    nc = await testConnection();
    // Discovery waits 1 s, not 200 ms: on a loaded machine (two lanes, other work) answers take longer.
    mounts.push(await registryMount(nc).start(), await agentsMount(nc, { discoveryWaitMs: 1_000 }).start());
    micro = await startJsonMicroMount(nc, mount);
    dispatcher = new Dispatcher(nc);
  });
  afterAll(async () => {
    dispatcher.close();
    await micro.stop();
    for (const m of mounts) await m.stop();
  });

  it('names it by the subjects its endpoints serve, and describes it when asked by that name', async () => {
    const one = await dispatcher.call(
      { profile: 'default' },
      { id: 'intro-1', name: 'matrix_introspect', arguments: { mount } },
    );
    expect(one.isError, one.content).toBe(false);
    const [described] = (one.structured as { mounts: MountDescription[] }).mounts;
    expect(described).toMatchObject({ mount, instances: 1, version: '1.0.0' });
    expect(described?.ops.map((o) => o.op)).toEqual(['echo', 'fail']);

    const all = await dispatcher.call(
      { profile: 'default' },
      { id: 'intro-2', name: 'matrix_introspect', arguments: {} },
    );
    const names = (all.structured as { mounts: MountDescription[] }).mounts.map((m) => m.mount);
    expect(names).toContain(mount);
    expect(names).not.toContain(mount.replace('.', '-'));
  });
});
