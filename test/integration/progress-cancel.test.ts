import { encode } from '@msgpack/msgpack';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { CancelledError, type Progress } from '../../src/bus/context.js';
import { TimeoutError } from '../../src/bus/errors.js';
import { Header } from '../../src/bus/headers.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { type SlowMount, startSlowMount } from '../harness/slow-mount.js';

describe('progress reports and cancellation on the bus', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let slow: SlowMount;
  let slowTwin: SlowMount;
  const name = uniqueMount('slow');
  const raw = uniqueMount('raw');
  const logged: string[] = [];

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, {
      timeoutMs: 5_000,
      logger: { info: () => {}, error: (message) => logged.push(message) },
    });
    slow = await startSlowMount(nc, name);
    slowTwin = await startSlowMount(nc, name);
    // A responder that sends a report that is not a map, a valid one, then the reply.
    nc.subscribe(`${raw}.*`, {
      callback: (_err, msg) => {
        const h = headers();
        h.set(Header.Progress, '1');
        msg.respond(encode([1, 2, 3]), { headers: h });
        msg.respond(encode('not a map either'), { headers: h });
        msg.respond(encode({ progress: 7, total: 9 }), { headers: h });
        msg.respond(encode({ answer: 42 }));
      },
    });
    await nc.flush();
  });

  afterAll(async () => {
    client.close();
    await slow.stop();
    await slowTwin.stop();
  });

  it('keeps a request open across progress reports and gives each to onProgress before the reply', async () => {
    const seen: Progress[] = [];
    const reply = await client.request(name, '$work', { steps: 3, stepMs: 20 }, { onProgress: (p) => seen.push(p) });
    expect(reply).toEqual({ done: 3 });
    expect(seen).toEqual([
      { progress: 1, total: 3, message: 'step 1 of 3' },
      { progress: 2, total: 3, message: 'step 2 of 3' },
      { progress: 3, total: 3, message: 'step 3 of 3' },
    ]);
  });

  it('never takes a progress report for the reply, whether or not anyone listens', async () => {
    expect(await client.request(name, '$work', { steps: 2, stepMs: 10 })).toEqual({ done: 2 });
    expect(await client.request(raw, '$any', {})).toEqual({ answer: 42 });
  });

  it('ignores a progress report that is not a map and logs it once per call', async () => {
    const before = logged.length;
    const seen: Progress[] = [];
    expect(await client.request(raw, '$any', {}, { onProgress: (p) => seen.push(p) })).toEqual({ answer: 42 });
    expect(seen).toEqual([{ progress: 7, total: 9 }]);
    expect(logged.length - before).toBe(1);
  });

  it('fires the signal of the call a $cancel names, on the instance that holds it, which answers {cancelled: true}', async () => {
    const callId = `call-${Date.now()}`;
    const done = slow.stopped.length + slowTwin.stopped.length;
    const call = client.request(name, '$work', { steps: 100, stepMs: 50 }, { callId });
    await eventually(() => expect(slow.callIds.concat(slowTwin.callIds)).toContain(callId));
    expect(await client.request(name, '$cancel', { callId }, { timeoutMs: 2_000 })).toEqual({ cancelled: true });
    await expect(call).rejects.toThrow(/cancelled by its caller/);
    expect(slow.stopped.length + slowTwin.stopped.length - done).toBe(1);
    expect([...slow.stopped, ...slowTwin.stopped]).toContain('CancelledError');
  });

  it('drops unread a $cancel longer than any {callId}: every instance hears it, so it must cost nothing', async () => {
    const callId = `long-${Date.now()}`;
    const call = client.request(name, '$work', { steps: 100, stepMs: 50 }, { callId });
    await eventually(() => expect(slow.callIds.concat(slowTwin.callIds)).toContain(callId));
    const padded = { callId, pad: 'x'.repeat(2_000) };
    await expect(client.request(name, '$cancel', padded, { timeoutMs: 300 })).rejects.toThrow(TimeoutError);
    expect(await client.request(name, '$cancel', { callId }, { timeoutMs: 2_000 })).toEqual({ cancelled: true });
    await expect(call).rejects.toThrow(/cancelled by its caller/);
  });

  it('answers no $cancel for a call no instance holds', async () => {
    await expect(client.request(name, '$cancel', { callId: 'nobody-has-it' }, { timeoutMs: 300 })).rejects.toThrow(
      TimeoutError,
    );
  });

  it('fires the signal at the request deadline, so the mount stops when the caller gave up', async () => {
    const before = slow.stopped.length + slowTwin.stopped.length;
    await expect(client.request(name, '$work', { steps: 100, stepMs: 50 }, { timeoutMs: 200 })).rejects.toThrow(
      TimeoutError,
    );
    await eventually(() => expect(slow.stopped.length + slowTwin.stopped.length).toBe(before + 1));
    expect([...slow.stopped, ...slowTwin.stopped]).toContain('TimeoutError');
  });

  it('stops waiting when the request signal fires', async () => {
    const controller = new AbortController();
    const call = client.request(name, '$work', { steps: 100, stepMs: 50 }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(call).rejects.toThrow(CancelledError);
    expect(client.inFlight).toBe(0);
  });
});
