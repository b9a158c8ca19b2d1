/**
 * Per-call objects on the warm path have one shape: the same properties, in the same order,
 * whatever headers a request carries and in whatever order. A context built by a spread of what
 * the headers happen to set would have a property list of its own per combination, so V8 would
 * give each its own hidden class and every read of one would miss its inline cache (~20 µs of
 * the service's CPU a call, measured on Node 20).
 */
import { headers as natsHeaders } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { NotFoundError } from '../../src/bus/errors.js';
import { Mount, type OpContext } from '../../src/bus/mount.js';
import { Dispatcher } from '../../src/dispatcher/dispatcher.js';
import { testConnection, uniqueMount } from '../harness/bus.js';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('the context a mount hands its handler', () => {
  let client: BusClient;
  let mount: Mount;
  const name = uniqueMount();
  const seen: string[][] = [];

  beforeAll(async () => {
    const nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 2_000 });
    mount = await new Mount(nc, {
      name,
      version: '1.0.0',
      description: 'a mount that tells which context properties it got',
      ops: {
        $keys: {
          description: 'answers with nothing',
          request: { type: 'object' },
          response: { type: 'object' },
          handle: (_request: unknown, ctx: OpContext) => {
            seen.push(Object.keys(ctx));
            return {};
          },
        },
      },
    }).start();
  });
  afterAll(async () => {
    await mount.stop();
    client.close();
  });

  it('has the same properties in the same order whatever headers the request carries', async () => {
    await client.request(name, '$keys', {});
    await client.request(name, '$keys', {}, { session: 's', principal: 'agent:a' });
    await client.request(name, '$keys', {}, { traceparent: TRACEPARENT, grant: 'g', readSessions: 'x,y' });
    // The same headers in the reverse of the order BusClient writes them.
    const h = natsHeaders();
    h.set('Matrix-Principal', 'agent:b');
    h.set('Matrix-Session', 's2');
    h.set('traceparent', TRACEPARENT);
    await client.nc.request(`${name}.$keys`, new Uint8Array(), { headers: h, timeout: 2_000 });
    expect(seen).toHaveLength(4);
    for (const keys of seen) expect(keys).toEqual(seen[0]);
  });
});

describe('the context the dispatcher calls on with', () => {
  let dispatcher: Dispatcher;
  const seen: string[][] = [];

  beforeAll(async () => {
    const nc = await testConnection();
    dispatcher = new Dispatcher(nc, {
      audit: false,
      source: {
        resolve: (_request, ctx) => {
          seen.push(Object.keys(ctx));
          return Promise.reject(new NotFoundError('no such profile'));
        },
      },
    });
  });
  afterAll(() => dispatcher.close());

  it('has the same properties in the same order whatever context the caller gave', async () => {
    const call = { id: 'c', name: 'echo', arguments: {} };
    const contexts = [{}, { session: 's' }, { principal: 'agent:a', traceparent: TRACEPARENT }, { deadline: 1e13 }];
    for (const [i, ctx] of contexts.entries()) {
      // A profile of its own each time: every call misses the session cache and asks the source.
      await expect(dispatcher.call({ profile: `p${i}` }, call, ctx)).rejects.toBeInstanceOf(NotFoundError);
    }
    expect(seen).toHaveLength(contexts.length);
    for (const keys of seen) expect(keys).toEqual(seen[0]);
  });
});
