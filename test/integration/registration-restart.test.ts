import { decode } from '@msgpack/msgpack';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { CHANGED_EVENTS } from '../../src/registry/events.js';
import type { ListReply, RegisterReply } from '../../src/registry/types.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { contextSpec, type Instance, startInstance } from '../harness/registry.js';

describe('registrations and watches across a nats-server restart', () => {
  let server: ProcessNats;
  const connections: NatsConnection[] = [];
  const instances: Instance[] = [];
  const connect = async () => {
    const nc = await connectBus({ servers: server.url });
    connections.push(nc);
    return nc;
  };

  beforeAll(async () => {
    server = await startNatsProcess();
  });
  afterAll(async () => {
    for (const i of instances) await i.stop().catch(() => {});
    for (const nc of connections) await nc.close();
    await server.stop();
  });

  it('keeps every registration in the file store and resumes every watch', async () => {
    const a = await startInstance(await connect(), 'restart-tools');
    const b = await startInstance(await connect(), 'restart-tools', false);
    instances.push(a, b);
    const client = new BusClient(await connect(), { timeoutMs: 2_000 });
    const before = await client.request<RegisterReply>('system.tools', '$register', { spec: contextSpec('before') });

    await server.kill();
    await server.restart();

    // Instances reconnect by themselves; retry until A answers again.
    const restarted = performance.now();
    let after: RegisterReply | undefined;
    while (after === undefined) {
      if (performance.now() - restarted > 15_000)
        throw new Error('the registry did not answer within 15 s of the restart');
      after = await client
        .request<RegisterReply>('system.tools', '$register', { spec: contextSpec('after') })
        .catch(() => undefined);
      if (after === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    console.info(
      `registry answering $register ${(performance.now() - restarted).toFixed(0)} ms after nats-server came back`,
    );
    // B never wrote: it can only know of 'after' through its resumed watch.
    await eventually(() => b.store.get('after') !== undefined);
    expect(b.store.get('before')?.revision).toBe(before.revision);
    expect(b.store.revision).toBeGreaterThanOrEqual(after.revision);

    const c = await startInstance(await connect(), 'restart-tools', false);
    instances.push(c);
    expect(c.store.keys().filter((k) => k === 'before' || k === 'after')).toEqual(['after', 'before']);
    const page = await client.request<ListReply>('system.tools', '$list', { keys: ['before', 'after'] });
    expect(page.contexts.map((x) => x.key)).toEqual(['after', 'before']);
    client.close();
    for (const i of instances.splice(0)) await i.stop();
  }, 60_000);

  it('serves a change on another instance within milliseconds of its event', async () => {
    const writerNc = await connect();
    const a = await startInstance(writerNc, 'lag-tools');
    const b = await startInstance(await connect(), 'lag-tools', false);
    instances.push(a, b);
    const eventAt = new Map<string, number>();
    const appliedAt = new Map<string, number>();
    b.store.onChange((c) => appliedAt.set(c.key, performance.now()));
    const listener = await connect();
    listener.subscribe(CHANGED_EVENTS, {
      callback: (_e, msg) => {
        const key = (decode(msg.data) as { key: string }).key;
        eventAt.set(key, performance.now());
      },
    });
    await listener.flush();
    const client = new BusClient(await connect(), { timeoutMs: 5_000 });
    const n = 200;
    for (let i = 0; i < n; i++) await client.request('system.tools', '$register', { spec: contextSpec(`lag-${i}`) });
    await eventually(() => appliedAt.size === n && eventAt.size === n);
    const lags = [...eventAt].map(([key, t]) => (appliedAt.get(key) ?? Infinity) - t).sort((x, y) => x - y);
    const at = (q: number) => (lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] ?? NaN).toFixed(2);
    console.info(
      `registration propagation, event seen → served by another instance: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms (negative: served before the event arrived)`,
    );
    expect(lags.every(Number.isFinite)).toBe(true);
    client.close();
  }, 30_000);
});
