import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';
import { ConflictError, UnavailableError } from '../../src/bus/errors.js';
import { StreamWriter } from '../../src/bus/stream-writer.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

describe('StreamWriter: create-only writes to a stream subject, acknowledged on one inbox', () => {
  let server: ProcessNats;
  let nc: NatsConnection;
  let writer: StreamWriter;

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url });
    await new Kvm(nc).create('writer-test', { history: 1 });
    writer = new StreamWriter(nc, 2_000);
  });
  afterAll(async () => {
    writer.close();
    await nc.close();
    await server.stop();
  });

  it('stores a new key and answers its revision, as the KV bucket reads it', async () => {
    const kv = await new Kvm(nc).open('writer-test');
    const seqs = await Promise.all(['a', 'b', 'c'].map((k) => writer.create(`$KV.writer-test.${k}`, Buffer.from(k))));
    for (const [i, k] of ['a', 'b', 'c'].entries()) {
      const entry = await kv.get(k);
      expect(entry?.revision).toBe(seqs[i]);
      expect(entry?.string()).toBe(k);
    }
  });

  it('refuses a key that holds a value with ConflictError, and leaves the value', async () => {
    await writer.create('$KV.writer-test.taken', Buffer.from('first'));
    await expect(writer.create('$KV.writer-test.taken', Buffer.from('second'))).rejects.toBeInstanceOf(ConflictError);
    expect((await (await new Kvm(nc).open('writer-test')).get('taken'))?.string()).toBe('first');
  });

  it('fails with UnavailableError where no stream takes the subject', async () => {
    await expect(writer.create('no.stream.here', Buffer.from('x'))).rejects.toBeInstanceOf(UnavailableError);
  });
});
