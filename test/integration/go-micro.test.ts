/**
 * A NATS micro service in Go, built with current nats.go (test/harness/go-micro/go.mod, from the
 * Go module proxy into Go's module cache, outside the tree): `matrix_introspect` finds it under
 * the mount its endpoints' subjects name, with its op, from the `$SRV.INFO` current clients send
 * (`endpoints`), and the dispatcher calls it through a registered tool. The older micro shape
 * (nats.go 1.22's `subject`, no `endpoints`) is held by test/unit/discovery.test.ts.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { agentsMount, type MountDescription } from '../../src/reference-mounts/agents.js';
import { sharedNatsEnv, sharedNatsUrl, testConnection } from '../harness/bus.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';
import { contextSpec, staticRegistry } from '../harness/registry.js';

const mount = `demo.go${process.pid}`;
const spec = contextSpec('go-echo', {
  matrixTools: [
    {
      name: 'go_echo',
      description: 'echoes its arguments, in Go',
      inputSchema: { type: 'object' },
      target: mount,
      op: 'echo',
      encoding: 'json',
    },
  ],
});

describe('a Go micro service built with current nats.go', () => {
  let nc: NatsConnection;
  let dispatcher: Dispatcher;
  const mounts: Mount[] = [];
  let stopGo = () => {};

  beforeAll(async () => {
    const binary = join(mkdtempSync(join(tmpdir(), 'go-micro-')), 'go-micro');
    // The module's go.mod and go.sum pin nats.go; -mod=mod fetches what the cache lacks, nothing is vendored.
    execFileSync('go', ['build', '-o', binary, '.'], {
      cwd: fileURLToPath(new URL('../harness/go-micro/', import.meta.url)),
      env: { ...process.env, GOFLAGS: '-mod=mod' },
      stdio: 'pipe',
    });
    nc = await testConnection();
    mounts.push(await staticRegistry(nc, spec), await agentsMount(nc, { discoveryWaitMs: 1_000 }).start());
    const child = tracked(
      spawn(binary, [], {
        env: { ...process.env, ...sharedNatsEnv(sharedNatsUrl()), NATS_URL: sharedNatsUrl(), MICRO_MOUNT: mount },
        stdio: 'pipe',
      }),
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    stopGo = () => child.kill('SIGTERM');
    await eventually(() => stderr.includes('go micro ready'), { timeoutMs: 20_000 });
    dispatcher = new Dispatcher(nc);
  }, 180_000);
  afterAll(async () => {
    stopGo();
    dispatcher?.close();
    for (const m of mounts) await m.stop();
  });

  it('is listed by matrix_introspect under the mount its endpoints name, with its op', async () => {
    const one = await dispatcher.call(
      { profile: 'default' },
      { id: 'go-1', name: 'matrix_introspect', arguments: { mount } },
    );
    expect(one.isError, one.content).toBe(false);
    const [described] = (one.structured as { mounts: MountDescription[] }).mounts;
    expect(described).toMatchObject({ mount, instances: 1, version: '1.0.0', description: 'a Go micro service' });
    expect(described?.ops.map((o) => o.op)).toEqual(['echo']);
  });

  it('is called through the dispatcher, and its reply is the tool result', async () => {
    const result = await dispatcher.call(
      { profile: 'default', toolContextRefs: ['go-echo'] },
      { id: 'go-2', name: 'go_echo', arguments: { text: 'from the dispatcher' } },
    );
    expect(result.isError, result.content).toBe(false);
    expect(result.structured).toEqual({ text: 'from the dispatcher' });
  });
});
