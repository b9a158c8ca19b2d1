/**
 * What a caller sends in headers lands in audit events, and no caller can lose the others'
 * events with it: context headers are bounded (a `traceparent` of 60 KB to 1 MB would push the
 * shared audit batch over `max_payload`), a `traceparent` that is not W3C trace context is
 * dropped (a new trace starts), and a batch too large for the server goes out in parts.
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { encode } from '@msgpack/msgpack';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { AuditLog, watchCalls } from '../../src/audit/log.js';
import { BusClient } from '../../src/bus/client.js';
import { BadRequestError } from '../../src/bus/errors.js';
import type { Mount } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { localToolSource } from '../../src/dispatcher/session-cache.js';
import { dispatcherMount } from '../../src/dispatcher/system-dispatcher.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { Registry } from '../../src/registry/registry.js';
import { StaticStore } from '../../src/registry/store.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';

describe('audit events under oversized headers', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let mount: Mount;
  const events: CallEvent[] = [];
  let stopWatching: () => void;

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 10_000 });
    stopWatching = watchCalls(nc, (e) => events.push(e));
    const dispatcher = new Dispatcher(nc, { source: localToolSource(new Registry(new StaticStore())) });
    mount = await dispatcherMount(nc, { dispatcher }).start();
  });
  afterAll(async () => {
    stopWatching();
    await mount.stop();
  });

  it('drops a traceparent that is not W3C trace context, and the call and its event go on under a new trace', async () => {
    const huge = `00-${'a'.repeat(20_000)}`;
    const result = await client.request<ToolResult>(
      'system.dispatcher',
      '$call',
      { session: { profile: 'default' }, call: { id: 'tp-huge', name: 'no_such_tool' } },
      { traceparent: huge },
    );
    expect(result).toMatchObject({ callId: 'tp-huge', isError: true, error: { code: 'not_found' } });
    const event = await eventually(() => events.find((e) => e.callId === 'tp-huge') ?? false);
    expect(event.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
  });

  it('refuses a header block over 32 KiB as a bad request, before reading it', async () => {
    await expect(
      client.request(
        'system.dispatcher',
        '$call',
        { session: { profile: 'default' }, call: { id: 'tp-over', name: 'no_such_tool' } },
        { traceparent: `00-${'a'.repeat(40_000)}` },
      ),
    ).rejects.toThrow(/more than 32768/);
  });

  it('refuses a Matrix-Principal or Matrix-Session longer than 256 characters as a bad request', async () => {
    const long = 'p'.repeat(257);
    await expect(
      client.request(
        'system.dispatcher',
        '$call',
        { session: { profile: 'default' }, call: { id: 'p-long', name: 'x' } },
        { principal: long },
      ),
    ).rejects.toThrow(BadRequestError);
    await expect(
      client.request(
        'system.dispatcher',
        '$call',
        { session: { profile: 'default' }, call: { id: 's-long', name: 'x' } },
        { session: long },
      ),
    ).rejects.toThrow(/header Matrix-Session is longer than 256 characters/);
  });

  it('publishes a batch larger than max_payload in parts, losing no event', async () => {
    const log = new AuditLog(nc);
    const wide = 'w'.repeat(Math.ceil((nc.info?.max_payload ?? 1_048_576) / 100));
    const ids = Array.from({ length: 256 }, (_, i) => `wide-${i}`);
    for (const id of ids)
      log.record({
        callId: id,
        name: 'wide',
        principal: wide,
        outcome: 'ok',
        durationMs: 0,
        at: new Date().toISOString(),
      });
    log.flush();
    await eventually(() =>
      expect(
        events
          .filter((e) => e.name === 'wide')
          .map((e) => e.callId)
          .sort(),
      ).toEqual([...ids].sort()),
    );
  });

  it('keeps no event once recorded: a batch holds its bytes, and publishes them', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const log = new AuditLog(nc);
    // In a function of its own: a suspended async function keeps its locals, the last event too.
    const record = (): WeakRef<CallEvent>[] =>
      Array.from({ length: 8 }, (_, i) => {
        const event: CallEvent = { callId: `kept-${i}`, name: 'kept', outcome: 'ok', durationMs: 0, at: 'now' };
        log.record(event);
        return new WeakRef(event);
      });
    const kept = record();
    // A WeakRef holds its target until the job that made it ends.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(kept.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
    log.flush();
    await eventually(() =>
      expect(events.filter((e) => e.name === 'kept').map((e) => e.callId)).toEqual(
        Array.from({ length: 8 }, (_, i) => `kept-${i}`),
      ),
    );
  });

  it('audits a $call refused before it ran: a deadline already past, a body against the schema, an over-long header', async () => {
    const send = (body: unknown, set: Record<string, string>) => {
      const h = headers();
      for (const [k, v] of Object.entries(set)) h.set(k, v);
      return nc.request('system.dispatcher.$call', encode(body), { headers: h, timeout: 5_000 });
    };
    const trace = '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01';
    await send(
      { session: { profile: 'default' }, call: { id: 'late', name: 'x' } },
      { 'Matrix-Deadline': '1', traceparent: trace },
    );
    await send({ session: 7, call: { id: 'bad-body', name: 'x' } }, {});
    await send(
      { session: { profile: 'default' }, call: { id: 'long-principal', name: 'x' } },
      { 'Matrix-Principal': 'p'.repeat(300) },
    );
    await eventually(() =>
      expect(
        events.filter((e) => ['late', 'bad-body', 'long-principal'].includes(e.callId)).map((e) => [e.callId, e.code]),
      ).toEqual([
        ['late', 'timeout'],
        ['bad-body', 'bad_request'],
        ['long-principal', 'bad_request'],
      ]),
    );
    expect(events.find((e) => e.callId === 'late')?.traceparent).toBe(trace);
  });
});
