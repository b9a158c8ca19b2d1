/**
 * A plain request–reply client (one request, the first message on its reply subject taken as the
 * reply, as `nats req`, nats.go and nats.py do) gets the reply first from every mount `serve`
 * runs, also from ops that report progress (PROTOCOL 10, v1.3: a report goes only to a request
 * that carried `Matrix-Progress: 1`). The same ops still report to a request that asked, and the
 * dispatcher asks a target where someone takes the reports: a `$call` whose caller asked, a task.
 */
import { headers, type Msg, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { decodeReply } from '../../src/bus/codec.js';
import { connectBus } from '../../src/bus/connect.js';
import type { Progress } from '../../src/bus/context.js';
import { Header } from '../../src/bus/headers.js';
import { Mounts } from '../../src/bus/subjects.js';
import { eventually } from '../harness/eventually.js';
import { oneToolContext } from '../harness/identity.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { type ServiceProcess, startScript } from '../harness/service.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

/** Every mount the project ships, as `serve` runs them. */
const MOUNTS = Object.values(Mounts);
const SLOW = 'app.slowplain';

describe('a plain request gets its reply first, from every mount', () => {
  let server: ProcessNats;
  let service: ServiceProcess;
  let nc: NatsConnection;
  let client: BusClient;
  let slow: SlowMount;

  /** One request as a plain client sends it (JSON, `Content-Type` set, no `Matrix-Progress`): its first message. */
  const plain = (subject: string, body: unknown): Promise<Msg> => {
    const h = headers();
    h.set(Header.ContentType, 'application/json');
    return nc.request(subject, JSON.stringify(body), { timeout: 10_000, headers: h });
  };
  /** The first message must be the reply: no progress header, and not a progress report's body. */
  const replyOf = (msg: Msg): Record<string, unknown> => {
    expect(msg.headers?.get(Header.Progress) ?? '').toBe('');
    const body = decodeReply(msg.data, msg.headers?.get(Header.ContentType)) as Record<string, unknown>;
    expect(Object.keys(body)).not.toEqual(['progress', 'total']);
    return body;
  };
  const call = (id: string, more: Record<string, unknown> = {}) => ({
    session: { profile: 'default', toolContextRefs: ['slow-plain'] },
    call: { id, name: 'slow_work', arguments: { steps: 3, stepMs: 150 } },
    ...more,
  });

  beforeAll(async () => {
    server = await startNatsProcess();
    service = await startScript('dist/src/cli/main.js', server.url, ' ready ', {}, ['serve']);
    nc = await connectBus({ servers: server.url, name: 'plain-request' });
    client = new BusClient(nc, { timeoutMs: 10_000 });
    slow = await startSlowMount(nc, SLOW);
    await client.request('system.tools', '$register', {
      spec: oneToolContext('slow-plain', 'slow_work', SLOW, '$work'),
    });
    // A call through the dispatcher puts a batch in the audit trail, which $query then reads (and reports on).
    await eventually(async () =>
      expect(await client.request('system.dispatcher', '$call', call('seed'))).toMatchObject({ isError: false }),
    );
  }, 60_000);
  afterAll(async () => {
    client?.close();
    await slow?.stop();
    if (nc !== undefined && !nc.isClosed()) await nc.close();
    await service?.stop('SIGTERM');
    await server?.stop();
  });

  it('still reports to a request that asked: system.traces.$query reads the trail window by window', async () => {
    await eventually(async () => {
      const seen: Progress[] = [];
      await client.request('system.traces', '$query', {}, { json: true, onProgress: (p) => seen.push(p) });
      expect(seen.length).toBeGreaterThan(0);
    });
  });

  it('answers a plain system.traces.$query with its reply as the first message', async () => {
    const reply = replyOf(await plain('system.traces.$query', {}));
    expect(reply).toMatchObject({ events: expect.any(Array), matched: expect.any(Number) });
    expect((reply.events as unknown[]).length).toBeGreaterThan(0);
  });

  it.each(MOUNTS)('answers a plain %s.$introspect with its reply as the first message', async (mount) => {
    expect(replyOf(await plain(`${mount}.$introspect`, {}))).toMatchObject({ mount });
  });

  it("answers a plain $call with the tool's result first, though its target reports; the target was not asked", async () => {
    const before = slow.asked.length;
    const reply = replyOf(await plain('system.dispatcher.$call', call('plain')));
    expect(reply).toMatchObject({ isError: false, structured: { done: 3 } });
    expect(slow.asked.slice(before)).toEqual([false]);
    // The target's own op, asked plainly, answers first too.
    expect(replyOf(await plain(`${SLOW}.$work`, { steps: 2, stepMs: 10 }))).toEqual({ done: 2 });
  });

  it('asks the target on a $call whose caller asked, and relays its reports; and on a task', async () => {
    const before = slow.asked.length;
    const seen: Progress[] = [];
    const result = await client.request('system.dispatcher', '$call', call('asked'), {
      onProgress: (p) => seen.push(p),
    });
    expect(result).toMatchObject({ isError: false });
    expect(seen.length).toBeGreaterThan(0);
    expect(slow.asked.slice(before)).toEqual([true]);
    await client.request('system.dispatcher', '$call', call('as-task', { task: {} }));
    await eventually(() => expect(slow.asked.slice(before)).toEqual([true, true]));
  });
});
