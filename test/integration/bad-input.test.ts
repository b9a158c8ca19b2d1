import { decode, encode } from '@msgpack/msgpack';
import { headers, type Msg, type NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contracts, SchemaId } from '../../src/bus/contracts.js';
import type { Mount } from '../../src/bus/mount.js';
import { registryMount } from '../../src/registry/system-tools.js';
import { testConnection } from '../harness/bus.js';

const LIMIT = 64 * 1024;

describe('system.tools answering bad input', () => {
  let nc: NatsConnection;
  let mount: Mount;

  beforeAll(async () => {
    nc = await testConnection();
    mount = await registryMount(nc, { maxRequestBytes: LIMIT }).start();
  });
  afterAll(() => mount.stop());

  const send = (op: string, body: Uint8Array, json = false): Promise<Msg> => {
    const h = headers();
    if (json) h.set('Content-Type', 'application/json');
    return nc.request(`system.tools.${op}`, body, { timeout: 5_000, headers: h });
  };

  /** The error of a reply, checked for both halves: headers and body agree and match the contract. */
  const errorOf = (msg: Msg, json = false) => {
    const body = (json ? JSON.parse(new TextDecoder().decode(msg.data)) : decode(msg.data)) as {
      error: { code: string; message: string; details?: { violations?: Array<{ path: string; message: string }> } };
    };
    expect(contracts().check(SchemaId.Error)(body)).toBeUndefined();
    expect(msg.headers?.get('Nats-Service-Error')).toBe(body.error.message);
    expect(body.error.message).not.toMatch(/\n\s+at /);
    return { status: Number(msg.headers?.get('Nats-Service-Error-Code')), ...body.error };
  };

  const stillAnswers = async () => {
    const reply = decode((await send('$list', encode({ limit: 1 }))).data) as { contexts: unknown[] };
    expect(reply.contexts).toHaveLength(1);
  };

  it('refuses an undecodable MessagePack body with bad_request', async () => {
    const e = errorOf(await send('$resolve', new Uint8Array([0xc1, 0xff, 0x00])));
    expect(e).toMatchObject({
      status: 400,
      code: 'bad_request',
      message: expect.stringContaining('not valid MessagePack'),
    });
    await stillAnswers();
  });

  it('refuses undecodable JSON with bad_request, in JSON', async () => {
    const e = errorOf(await send('$resolve', new TextEncoder().encode('{"profile": '), true), true);
    expect(e).toMatchObject({ status: 400, code: 'bad_request', message: expect.stringContaining('not valid JSON') });
    await stillAnswers();
  });

  it('refuses a body that is not a map', async () => {
    const e = errorOf(await send('$resolve', encode([1, 2, 3])));
    expect(e.details?.violations).toEqual([{ path: '', message: 'must be an object', keyword: 'type' }]);
  });

  it('lists every violation of wrong types and nested unknown fields, each with its path', async () => {
    const e = errorOf(
      await send('$resolve', encode({ profile: 7, skills: [{ toolContextRefs: 'x', colour: 'red' }], format: 'xml' })),
    );
    expect(e.code).toBe('bad_request');
    const paths = e.details?.violations?.map((v) => v.path).sort();
    expect(paths).toEqual(['/format', '/profile', '/skills/0/colour', '/skills/0/name', '/skills/0/toolContextRefs']);
    expect(e.message).toContain('invalid $resolve request');
    await stillAnswers();
  });

  it('refuses the first unknown top-level field alone, reading the body no further', async () => {
    const e = errorOf(await send('$resolve', encode({ colour: 'red', profile: 7, format: 'xml', size: 1 })));
    expect(e.code).toBe('bad_request');
    expect(e.details?.violations).toEqual([expect.objectContaining({ path: '/colour', keyword: 'unknownField' })]);
    expect(e.message).toContain('field /colour is not a known field (known fields: profile,');
    await stillAnswers();
  });

  it('refuses the keys __proto__ and constructor', async () => {
    const proto = errorOf(
      await send('$list', new TextEncoder().encode('{"__proto__": {"polluted": true}}'), true),
      true,
    );
    expect(proto.details?.violations).toEqual([
      expect.objectContaining({ path: '/__proto__', message: expect.stringContaining('not a known field') }),
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const ctor = errorOf(await send('$list', encode({ constructor: 1 })));
    expect(ctor.details?.violations?.[0]?.path).toBe('/constructor');
    const packed = errorOf(
      await send('$list', new Uint8Array([0x81, 0xa9, ...new TextEncoder().encode('__proto__'), 0x01])),
    );
    expect(packed.code).toBe('bad_request');
  });

  it('answers an unknown op with not_found naming the ops it has', async () => {
    const e = errorOf(await send('$frobnicate', encode({})));
    expect(e).toMatchObject({ status: 404, code: 'not_found', message: expect.stringContaining('$list, $resolve') });
    await stillAnswers();
  });

  it('refuses a body over the limit with payload_too_large', async () => {
    const e = errorOf(await send('$resolve', encode({ profile: 'x'.repeat(LIMIT) })));
    expect(e).toMatchObject({ status: 413, code: 'payload_too_large' });
    await stillAnswers();
  });

  it('does no work once the caller’s deadline has passed, and refuses a malformed one', async () => {
    const h = headers();
    h.set('Matrix-Deadline', String(Date.now() - 1));
    const late = errorOf(await nc.request('system.tools.$list', encode({}), { timeout: 5_000, headers: h }));
    expect(late).toMatchObject({ status: 504, code: 'timeout' });
    h.set('Matrix-Deadline', 'tomorrow');
    const malformed = errorOf(await nc.request('system.tools.$list', encode({}), { timeout: 5_000, headers: h }));
    expect(malformed).toMatchObject({ status: 400, message: expect.stringContaining('Matrix-Deadline') });
    await stillAnswers();
  });

  it('reads the Content-Type header whatever its case', async () => {
    const h = headers();
    h.set('content-type', 'application/json');
    const reply = await nc.request('system.tools.$list', new TextEncoder().encode('{"limit":1}'), {
      timeout: 5_000,
      headers: h,
    });
    expect(JSON.parse(new TextDecoder().decode(reply.data)).contexts).toHaveLength(1);
  });

  it('reads an empty body as {}', async () => {
    const reply = decode((await send('$introspect', new Uint8Array(0))).data) as { mount: string };
    expect(reply.mount).toBe('system.tools');
  });
});
