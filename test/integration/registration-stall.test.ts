/**
 * A worst-case valid `$register` (13 tools, each input schema just under the 32 KiB bound: the
 * most that fits a 1 MB max_payload) costs seconds of CPU to check; other callers of the same
 * process must not wait on it. A victim mount in the same process answers `$introspect`
 * throughout, at about the pace it answers with nothing registering (a control in the same run).
 */

import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { Mount } from '../../src/bus/mount.js';
import type { MatrixToolProjection, RegisterReply, ToolContextSpec } from '../../src/registry/types.js';
import { MAX_INPUT_SCHEMA_CHARS } from '../../src/registry/validate.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { type Instance, startInstance, uniqueBucket } from '../harness/registry.js';
import { heavySchema, percentile } from '../harness/schemas.js';

function worstCaseSpec(key: string, tools: number, target: string): ToolContextSpec {
  const matrixTools: MatrixToolProjection[] = Array.from({ length: tools }, (_, i) => ({
    name: `tool_${i}`,
    description: 'a tool with a large input schema',
    inputSchema: heavySchema(`${key}${i}`, MAX_INPUT_SCHEMA_CHARS - 1_000),
    target,
    op: `$op${i}`,
  }));
  return {
    key,
    title: 'Worst case',
    description: 'the largest spec $register takes',
    matrixTools,
    permissions: { approval: 'never' },
  };
}

describe('a worst-case $register', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let instance: Instance;
  let victim: Mount;
  const bucket = uniqueBucket();

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 30_000 });
    instance = await startInstance(nc, bucket);
    victim = await new Mount(nc, {
      name: uniqueMount('victim'),
      version: '1.0.0',
      description: 'victim',
      ops: {},
    }).start();
  });
  afterAll(async () => {
    await victim.stop();
    await instance.stop();
    client.close();
    await (await new Kvm(nc).open(bucket)).destroy();
  });

  it('does not stall the calls of others in the same process', async () => {
    // Each contract compiles on its first use, once per process: not what this measures.
    await client.request<RegisterReply>('system.tools', '$register', { spec: worstCaseSpec('warm', 1, victim.name) });
    const spec = worstCaseSpec('worst', 13, victim.name);
    // The control: the same victim calls, nothing registering, in this run (on this machine's load).
    const idle: number[] = [];
    for (let i = 0; i < 30; i++) {
      const t = performance.now();
      await client.request(victim.name, '$introspect', {});
      idle.push(performance.now() - t);
    }
    idle.sort((a, b) => a - b);
    const delay = monitorEventLoopDelay({ resolution: 10 });
    const latencies: number[] = [];
    let registering = true;
    const victimCalls = (async () => {
      while (registering) {
        const t = performance.now();
        await client.request(victim.name, '$introspect', {});
        latencies.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    delay.enable();
    const t = performance.now();
    const reply = await client.request<RegisterReply>('system.tools', '$register', { spec }).finally(() => {
      registering = false;
    });
    const took = performance.now() - t;
    delay.disable();
    await victimCalls;
    latencies.sort((a, b) => a - b);
    const stall = delay.max / 1e6;
    const idleP50 = percentile(idle, 0.5);
    console.info(
      `register ${took.toFixed(0)} ms; ${latencies.length} victim calls p50 ${percentile(latencies, 0.5).toFixed(1)} max ${latencies.at(-1)?.toFixed(1)} ms (idle p50 ${idleP50.toFixed(1)} ms); loop delay max ${stall.toFixed(1)} ms`,
    );
    expect(reply.key).toBe('worst');
    // On the event loop, one schema's checks held every caller ~200 ms: 7 calls in 2 s, p50 ~200 ms
    // against ~2 ms idle. Off it, the victim's calls go on at about their idle pace.
    expect(latencies.length).toBeGreaterThan(30);
    expect(percentile(latencies, 0.5)).toBeLessThan(Math.max(50, 5 * idleP50));
    // The checks of 13 schemas of 31 KB take 5-10 s idle, over 20 s with both cores busy.
  }, 90_000);
});
