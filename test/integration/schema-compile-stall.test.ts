/**
 * A tool whose input schema is the largest one may have (~31 KB, of the shape that costs Ajv
 * most) is compiled on its first calls, and other callers of the same dispatcher do not wait for
 * it: Ajv writes the validators on the compiler thread and the event loop loads them compiled
 * from V8's code cache (4-30 ms each), where compiling them in-process held the loop 0.1-1.7 s,
 * once for the validator of every violation and once more for that of the first (large arguments).
 */

import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { MAX_INPUT_SCHEMA_CHARS } from '../../src/registry/validate.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { staticRegistry } from '../harness/registry.js';
import { heavySchema, percentile } from '../harness/schemas.js';
import { startTarget, type Target } from '../harness/targets.js';

const T = uniqueMount('app');
const session = { profile: 'default', toolContextRefs: ['compile-stall'] };

describe('the first calls of a tool with the largest input schema', () => {
  let nc: NatsConnection;
  let registry: Mount;
  let target: Target;
  let dispatcher: Dispatcher;

  beforeAll(async () => {
    nc = await testConnection();
    registry = await staticRegistry(nc, {
      key: 'compile-stall',
      title: 'Compile stall',
      description: 'a small tool and one with the largest input schema',
      matrixTools: [
        { name: 'ping', description: 'a small tool', inputSchema: { type: 'object' }, target: T, op: '$ping' },
        {
          name: 'bulky',
          description: 'a tool with the largest input schema',
          inputSchema: heavySchema('bulky', MAX_INPUT_SCHEMA_CHARS - 1_000),
          target: T,
          op: '$bulky',
        },
      ],
      permissions: { approval: 'never' },
    });
    target = await startTarget(nc, T, { $ping: () => ({ ok: true }), $bulky: () => ({ ok: true }) });
    dispatcher = new Dispatcher(nc);
  });
  afterAll(async () => {
    dispatcher.close();
    target.stop();
    await registry.stop();
    await nc.close();
  });

  /** The CPU this thread (the event loop) spent since `start`, in ms. */
  const threadCpuMsSince = (start: NodeJS.CpuUsage) => {
    const used = process.threadCpuUsage(start);
    return (used.user + used.system) / 1_000;
  };

  async function ping(): Promise<number> {
    const t = performance.now();
    const result = await dispatcher.call(session, { id: 'p', name: 'ping', arguments: {} });
    expect(result.isError).toBe(false);
    return performance.now() - t;
  }

  it('hold no other caller while the schema compiles', async () => {
    for (let i = 0; i < 20; i++) await ping();
    const idle: number[] = [];
    for (let i = 0; i < 40; i++) idle.push(await ping());
    idle.sort((a, b) => a - b);
    const idleP50 = percentile(idle, 0.5);

    const delay = monitorEventLoopDelay({ resolution: 5 });
    const latencies: number[] = [];
    let calling = true;
    const victim = (async () => {
      while (calling) {
        latencies.push(await ping());
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    delay.enable();
    // The histogram counts from its second sample on: a stall right after enabling would go unseen.
    await new Promise((r) => setTimeout(r, 20));
    const t = performance.now();
    // Three first calls at once, one with arguments past the full-report bound (16 KiB): each waits for the one compile.
    const sync: number[] = [];
    const firstCall = (id: string, args: Record<string, unknown>) => {
      const started = process.threadCpuUsage();
      const result = dispatcher.call(session, { id, name: 'bulky', arguments: args });
      sync.push(threadCpuMsSince(started));
      return result;
    };
    const firsts = await Promise.all([
      firstCall('b1', { bulky_0: { a: 'x' } }),
      firstCall('b2', { bulky_1: { b: -1 } }),
      firstCall('b3', { bulky_2: { a: 'y' }, note: 'z'.repeat(20_000) }),
    ]);
    const took = performance.now() - t;
    await new Promise((r) => setTimeout(r, 100));
    calling = false;
    await victim;
    delay.disable();
    latencies.sort((a, b) => a - b);
    const stall = delay.max / 1e6;
    console.info(
      `first bulky calls ${took.toFixed(0)} ms (${sync.map((ms) => ms.toFixed(1)).join(', ')} ms of it on the loop); victim idle p50 ${idleP50.toFixed(2)} ms, meanwhile ${latencies.length} calls p50 ${percentile(latencies, 0.5).toFixed(2)} max ${latencies.at(-1)?.toFixed(1)} ms; loop delay max ${stall.toFixed(1)} ms`,
    );
    expect(firsts.map((r) => r.isError)).toEqual([false, true, false]);
    expect(firsts[1]?.content).toContain('bulky_1');
    // In-process, each first call held the loop for a compile, 0.1-0.8 s of its CPU (and a victim
    // call as long), once per validator. The event loop's own CPU time, which a busy machine does
    // not stretch as it stretches wall time.
    expect(Math.max(...sync)).toBeLessThan(50);
    // Loose: on a shared machine the loop stalls 20-370 ms now and then with no compile at all
    // (1.5-2.6 s with them).
    expect(stall).toBeLessThan(1_000);
    expect(percentile(latencies, 0.5)).toBeLessThan(Math.max(10 * idleP50, 25));
    // The next calls are checked on the loop, by the validators loaded: no compile's CPU again.
    const again = process.threadCpuUsage();
    expect((await dispatcher.call(session, { id: 'b4', name: 'bulky', arguments: {} })).isError).toBe(false);
    expect(threadCpuMsSince(again)).toBeLessThan(100);
  }, 60_000);
});
