import type { NatsConnection } from '@nats-io/nats-core';
import { Svcm } from '@nats-io/services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import type { CallContext } from '../../src/bus/context.js';
import { SchemaId } from '../../src/bus/contracts.js';
import {
  InternalError,
  NotFoundError,
  PayloadTooLargeError,
  TimeoutError,
  UnavailableError,
} from '../../src/bus/errors.js';
import { newTraceparent } from '../../src/bus/headers.js';
import { Mount, type OpContext } from '../../src/bus/mount.js';
import { testConnection, uniqueMount } from '../harness/bus.js';
import { guarded } from '../harness/callbacks.js';
import { eventually } from '../harness/eventually.js';

describe('a mount and the bus client', () => {
  let nc: NatsConnection;
  let client: BusClient;
  let mount: Mount;
  const name = uniqueMount();
  const seen: OpContext[] = [];

  beforeAll(async () => {
    nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 2_000 });
    mount = await new Mount(nc, {
      name,
      version: '1.2.3',
      description: 'a test mount',
      ops: {
        $echo: {
          description: 'echoes the context it saw',
          request: SchemaId.IntrospectRequest,
          response: SchemaId.IntrospectRequest,
          handle: (_req, ctx) => {
            seen.push(ctx);
            return {};
          },
        },
        $crash: {
          description: 'throws something unexpected',
          request: SchemaId.IntrospectRequest,
          response: SchemaId.IntrospectRequest,
          handle: () => {
            throw new Error('secret internals at /srv/app.js:12');
          },
        },
        $silent: {
          description: 'never answers in time',
          request: SchemaId.IntrospectRequest,
          response: SchemaId.IntrospectRequest,
          handle: (_req, ctx) => {
            seen.push(ctx);
            return new Promise((resolve) => setTimeout(() => resolve({}), 1_000));
          },
        },
        $huge: {
          description: 'answers more than max_payload',
          request: SchemaId.IntrospectRequest,
          response: SchemaId.IntrospectRequest,
          handle: () => ({ blob: 'x'.repeat((nc.info?.max_payload ?? 1_048_576) + 1) }),
        },
      },
    }).start();
  });
  afterAll(async () => {
    client.close();
    await mount.stop();
  });

  it('passes every context header on to the op', async () => {
    const ctx: CallContext = {
      traceparent: newTraceparent(),
      session: 's-1',
      principal: 'agent:7',
      deadline: Date.now() + 60_000,
    };
    await client.request(name, '$echo', {}, { ...ctx, timeoutMs: 120_000 });
    expect(seen.at(-1)).toMatchObject({ ...ctx, mount: name, op: '$echo', encoding: 'msgpack' });
  });

  it('sends the earlier of its own timeout and the caller deadline', async () => {
    const before = Date.now();
    await client.request(name, '$echo', {}, { deadline: before + 60_000 }); // client default: 2 s
    expect(seen.at(-1)?.deadline).toBeLessThanOrEqual(Date.now() + 2_000);
  });

  it('sends its own deadline when the caller gives none', async () => {
    const before = Date.now();
    await client.request(name, '$echo', {}, { timeoutMs: 700 });
    const deadline = seen.at(-1)?.deadline ?? 0;
    expect(deadline).toBeGreaterThanOrEqual(before + 700);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 700);
  });

  it('turns an unexpected throw into internal, without the stack', async () => {
    const failure = client.request(name, '$crash', {});
    await expect(failure).rejects.toBeInstanceOf(InternalError);
    await expect(failure).rejects.toThrow(/unexpected error occurred in test\./);
    await expect(failure).rejects.not.toThrow(/srv\/app/);
  });

  it('refuses a reply over max_payload with payload_too_large', async () => {
    await expect(client.request(name, '$huge', {})).rejects.toBeInstanceOf(PayloadTooLargeError);
  });

  it('fails with unavailable, without waiting for its deadline, when nothing serves the subject', async () => {
    // Waiting out the deadline would end in TimeoutError, 60 s on (past this test's own timeout):
    // unavailable is the server's "no responders", which comes back at once.
    await expect(client.request(uniqueMount('nobody'), '$echo', {}, { timeoutMs: 60_000 })).rejects.toBeInstanceOf(
      UnavailableError,
    );
  });

  it('fails with timeout at the deadline when the op does not answer', async () => {
    const started = performance.now();
    const before = Date.now();
    await expect(client.request(name, '$silent', {}, { timeoutMs: 150 })).rejects.toBeInstanceOf(TimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
    // The deadline it kept is the one it sent: 150 ms from the send, not the client's default 2 s.
    await eventually(() => expect(seen.at(-1)?.op).toBe('$silent'));
    const deadline = seen.at(-1)?.deadline ?? 0;
    expect(deadline).toBeGreaterThanOrEqual(before + 150);
    expect(deadline).toBeLessThanOrEqual(before + 150 + (performance.now() - started));
  });

  it('fails at once, sending nothing, when the deadline has already passed', async () => {
    const subject = `${name}.$echo`;
    const sent = nc.subscribe(subject);
    await nc.flush();
    const failure = client.request(name, '$echo', {}, { deadline: Date.now() - 5 });
    expect(client.inFlight).toBe(0);
    await expect(failure).rejects.toThrow(TimeoutError);
    await expect(failure).rejects.toThrow(`the deadline passed before ${subject} was called`);
    await nc.flush();
    expect(sent.getReceived()).toBe(0);
    sent.unsubscribe();
  });

  it.fails('fails the test in which an assertion inside a NATS callback throws (test/harness/callbacks.ts)', async () => {
    const subject = `${name}.callback-check`;
    const sub = nc.subscribe(subject, { callback: guarded(() => expect('delivered').toBe('asserted')) });
    nc.publish(subject);
    await eventually(() => sub.getProcessed() === 1);
    sub.unsubscribe();
  });

  it('answers an unknown op with not_found', async () => {
    await expect(client.request(name, '$nope', {})).rejects.toBeInstanceOf(NotFoundError);
  });

  it('gives each request a reply subject that the one before it does not predict', async () => {
    const replies: string[] = [];
    const sub = nc.subscribe(`${name}.$echo`, { callback: (_err, msg) => void replies.push(msg.reply ?? '') });
    await nc.flush();
    await Promise.all(Array.from({ length: 50 }, () => client.request(name, '$echo', {})));
    sub.unsubscribe();
    const inbox = replies[0]?.slice(0, replies[0].lastIndexOf('.') + 1) ?? '';
    const tokens = replies.map((r) => r.slice(inbox.length));
    expect(replies.every((r) => r.startsWith(inbox))).toBe(true);
    // Each token is 48 random bits (8 base64url characters): no two alike.
    expect(new Set(tokens).size).toBe(50);
    expect(tokens.every((t) => /^[A-Za-z0-9_-]{8}$/.test(t))).toBe(true);
  });

  it('keeps 1,000 requests in flight apart', async () => {
    const replies = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) => client.request(name, '$echo', {}, { session: `s${i}` })),
    );
    expect(replies).toHaveLength(1_000);
    expect(new Set(seen.slice(-1_000).map((c) => c.session)).size).toBe(1_000);
    expect(client.inFlight).toBe(0);
  });

  it('is found and measured by the NATS services client (ADR-32), one endpoint per op', async () => {
    // A mount of its own, so the counts are this test's whatever ran before it.
    const own = uniqueMount();
    const measured = await new Mount(nc, {
      name: own,
      version: '2.0.0',
      description: 'a measured mount',
      ops: {
        $echo: {
          description: 'answers {}',
          request: SchemaId.IntrospectRequest,
          response: SchemaId.IntrospectRequest,
          handle: () => ({}),
        },
        $crash: {
          description: 'throws',
          request: SchemaId.IntrospectRequest,
          response: SchemaId.IntrospectRequest,
          handle: () => {
            throw new Error('boom');
          },
        },
      },
    }).start();
    try {
      await Promise.all([1, 2, 3].map(() => client.request(own, '$echo', {})));
      await expect(client.request(own, '$crash', {})).rejects.toBeInstanceOf(InternalError);
      const svc = new Svcm(nc).client({ strategy: 'timer', maxWait: 300 });
      const serviceName = own.replaceAll('.', '-');
      const pings = [];
      for await (const p of await svc.ping(serviceName)) pings.push(p);
      expect(pings).toEqual([expect.objectContaining({ name: serviceName, id: measured.id, version: '2.0.0' })]);
      const infos = [];
      for await (const i of await svc.info(serviceName)) infos.push(i);
      expect(infos[0]?.endpoints.map((e) => e.subject)).toEqual(
        ['$introspect', '$echo', '$crash'].map((op) => `${own}.${op}`),
      );
      expect(infos[0]?.endpoints[1]?.queue_group).toBe(serviceName);
      const stats = [];
      for await (const s of await svc.stats(serviceName, measured.id)) stats.push(s);
      expect(stats[0]?.endpoints?.find((e) => e.name === 'echo')).toMatchObject({ num_requests: 3, num_errors: 0 });
      const crash = stats[0]?.endpoints?.find((e) => e.name === 'crash');
      expect(crash).toMatchObject({ num_requests: 1, num_errors: 1, last_error: expect.stringContaining('500') });
    } finally {
      await measured.stop();
    }
  });
});
