import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';
import { UnavailableError } from '../../src/bus/errors.js';
import { StreamWriter } from '../../src/bus/stream-writer.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

describe('StreamWriter: appends to a stream, acknowledged on one inbox', () => {
  let server: ProcessNats;
  let nc: NatsConnection;
  let writer: StreamWriter;

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url });
    await (await jetstreamManager(nc)).streams.add({
      name: 'WRITER_TEST',
      subjects: ['writer.test.>'],
      allow_direct: true,
    });
    writer = new StreamWriter(nc, 2_000);
  });
  afterAll(async () => {
    writer.close();
    await nc.close();
    await server.stop();
  });

  it('stores each message and answers its stream sequence, as a direct get reads it', async () => {
    const jsm = await jetstreamManager(nc);
    const seqs = await Promise.all(['a', 'b', 'c', 'a'].map((k) => writer.append(`writer.test.${k}`, Buffer.from(k))));
    expect(new Set(seqs).size).toBe(4);
    for (const [i, k] of ['a', 'b', 'c', 'a'].entries()) {
      const m = await jsm.direct.getMessage('WRITER_TEST', { seq: seqs[i] as number });
      expect(m?.subject).toBe(`writer.test.${k}`);
      expect(m?.string()).toBe(k);
    }
  });

  it('fails with UnavailableError where no stream takes the subject, and keeps working', async () => {
    await expect(writer.append('no.stream.here', Buffer.from('x'))).rejects.toBeInstanceOf(UnavailableError);
    await expect(writer.append('writer.test.after', Buffer.from('y'))).resolves.toBeGreaterThan(0);
  });

  it('fails the writes still waiting when closed', async () => {
    const local = new StreamWriter(nc, 2_000);
    const waiting = local.append('writer.test.closing', Buffer.from('z'));
    local.close();
    await expect(waiting).rejects.toBeInstanceOf(UnavailableError);
  });
});
