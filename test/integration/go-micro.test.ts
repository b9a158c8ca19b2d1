/**
 * A NATS micro service in Go, in the older micro shape Debian's nats.go ships (`$SRV.INFO` says
 * `subject`, no `endpoints`): discovery lists it under the mount its subject names, with its op,
 * instead of leaving it out. Built from test/harness/go-micro with Debian's Go and nats.go; the
 * test is skipped where they are not installed.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { agentsMount, type MountDescription } from '../../src/reference-mounts/agents.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { sharedNatsEnv, sharedNatsUrl, testConnection } from '../harness/bus.js';
import { tracked } from '../harness/children.js';
import { eventually } from '../harness/eventually.js';

const GOPATH = '/usr/share/gocode';
const haveGo = existsSync(join(GOPATH, 'src/github.com/nats-io/nats.go/micro')) && whichGo();

function whichGo(): boolean {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!haveGo)('a Go micro service of the older shape, as discovery sees it', () => {
  let nc: NatsConnection;
  let dispatcher: Dispatcher;
  const mounts: Mount[] = [];
  let stopGo = () => {};
  const mount = `demo.go${process.pid}`;

  beforeAll(async () => {
    const binary = join(mkdtempSync(join(tmpdir(), 'go-micro-')), 'go-micro');
    execFileSync('go', ['build', '-o', binary, '.'], {
      cwd: fileURLToPath(new URL('../harness/go-micro/', import.meta.url)),
      env: { ...process.env, GO111MODULE: 'off', GOPATH, GOCACHE: join(tmpdir(), 'go-micro-cache') },
      stdio: 'pipe',
    });
    nc = await testConnection();
    mounts.push(await registryMount(nc).start(), await agentsMount(nc, { discoveryWaitMs: 1_000 }).start());
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
  }, 120_000);
  afterAll(async () => {
    stopGo();
    dispatcher?.close();
    for (const m of mounts) await m.stop();
  });

  it('is listed under the mount its subject names, with its op', async () => {
    const one = await dispatcher.call(
      { profile: 'default' },
      { id: 'go-1', name: 'matrix_introspect', arguments: { mount } },
    );
    expect(one.isError, one.content).toBe(false);
    const [described] = (one.structured as { mounts: MountDescription[] }).mounts;
    expect(described).toMatchObject({ mount, instances: 1, version: '1.0.0', description: 'a Go micro service' });
    expect(described?.ops.map((o) => o.op)).toEqual(['echo']);
  });
});
