/**
 * `system.traces.$query` keeps a session to its own calls: `trace_query` through the dispatcher
 * carries the caller's `Matrix-Session` (from its grant, where the service trusts issuers), so
 * one session cannot read what another called. An operator, with no session, sees them all.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { AuditLog } from '../../src/audit/log.js';
import type { TraceQueryReply } from '../../src/audit/query.js';
import { BusClient } from '../../src/bus/client.js';
import { ForbiddenError } from '../../src/bus/errors.js';
import type { Mount } from '../../src/bus/mount.js';
import { tracesMount } from '../../src/reference-mounts/traces.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';

const event = (callId: string, session: string): CallEvent => ({
  callId,
  name: 'echo',
  session,
  outcome: 'ok',
  durationMs: 1,
  at: new Date().toISOString(),
});

describe('system.traces, scoped to the calling session', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let traces: { mount: Mount; stop(): void };

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 5_000 });
    traces = tracesMount(nc);
    await traces.mount.start();
    const log = new AuditLog(nc);
    for (const [id, session] of [
      ['a1', 'alice'],
      ['b1', 'bob'],
      ['a2', 'alice'],
      ['c1', 'carol'],
    ] as const)
      log.record(event(id, session));
    log.flush();
    await eventually(async () =>
      expect((await client.request<TraceQueryReply>('system.traces', '$query', {})).events).toHaveLength(4),
    );
  });
  afterAll(async () => {
    traces.stop();
    await traces.mount.stop();
  });

  const ids = (reply: TraceQueryReply) => reply.events.map((e) => e.callId);

  it('answers a session with its own calls only, when it names none or its own', async () => {
    expect(ids(await client.request<TraceQueryReply>('system.traces', '$query', {}, { session: 'alice' }))).toEqual([
      'a2',
      'a1',
    ]);
    expect(
      ids(await client.request<TraceQueryReply>('system.traces', '$query', { session: 'alice' }, { session: 'alice' })),
    ).toEqual(['a2', 'a1']);
  });

  it("refuses a session another's calls, unless its grant lists that session", async () => {
    await expect(client.request('system.traces', '$query', { session: 'bob' }, { session: 'alice' })).rejects.toThrow(
      ForbiddenError,
    );
    const granted = await client.request<TraceQueryReply>(
      'system.traces',
      '$query',
      { session: 'bob' },
      { session: 'alice', readSessions: 'bob' },
    );
    expect(ids(granted)).toEqual(['b1']);
  });

  it('answers an operator (no session) with every call', async () => {
    expect(ids(await client.request<TraceQueryReply>('system.traces', '$query', {}))).toEqual(['c1', 'a2', 'b1', 'a1']);
  });
});
