import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusClient } from '../../src/bus/client.js';
import { SchemaId } from '../../src/bus/contracts.js';
import { BadRequestError } from '../../src/bus/errors.js';
import { Mount } from '../../src/bus/mount.js';
import type { ResolveRequest } from '../../src/registry/types.js';
import { testConnection, uniqueMount } from '../harness/bus.js';

describe('an op whose requests come back byte for byte (sameBytesSameRequest)', () => {
  let client: BusClient;
  let mount: Mount;
  const name = uniqueMount();
  const seen: ResolveRequest[] = [];

  beforeAll(async () => {
    const nc = await testConnection();
    client = new BusClient(nc, { timeoutMs: 2_000 });
    mount = await new Mount(nc, {
      name,
      version: '1.0.0',
      description: 'a mount that remembers requests by their bytes',
      ops: {
        $resolve: {
          description: 'answers what it was given',
          request: SchemaId.ResolveRequest,
          response: SchemaId.ResolveRequest,
          sameBytesSameRequest: true,
          handle: (request: ResolveRequest) => {
            seen.push(request);
            return request;
          },
        },
      },
    }).start();
  });
  afterAll(async () => {
    await mount.stop();
    client.close();
  });

  it('hands the handler one frozen object for the same bytes, another for other bytes, in either encoding', async () => {
    const a = { profile: 'p', toolContextRefs: ['x', 'y'] };
    expect(await client.request(name, '$resolve', a)).toEqual(a);
    expect(await client.request(name, '$resolve', a)).toEqual(a);
    expect(await client.request(name, '$resolve', { profile: 'q' })).toEqual({ profile: 'q' });
    expect(await client.request(name, '$resolve', a, { json: true })).toEqual(a);
    const [first, second, other, json] = seen.splice(0);
    expect(second).toBe(first);
    expect(other).not.toBe(first);
    expect(json).not.toBe(first);
    const refs = (first as ResolveRequest).toolContextRefs as string[];
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(refs)).toBe(true);
    expect(() => refs.push('z')).toThrow(TypeError);
  });

  it('refuses an invalid body every time it comes, and never hands it to the handler', async () => {
    for (let i = 0; i < 2; i++) {
      await expect(client.request(name, '$resolve', { profile: 42 })).rejects.toBeInstanceOf(BadRequestError);
    }
    expect(seen).toEqual([]);
  });
});
