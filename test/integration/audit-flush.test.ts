/**
 * The trace-id indexer writes a shard's entries once per flush, and a flush waits up to 2 s
 * (or 512 batches): at a trickle of calls, each batch's traces touch most of the 256 shards,
 * so the flush interval is what the index costs per call (500 ms made one call in flight cost
 * ~330 µs of CPU summed over processes, 2 s ~40). Every trace is still found once its flush is
 * written. On a nats-server of its own: the trail's subject is one per server.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCallEvent } from '../../src/audit/events.js';
import { AuditLog } from '../../src/audit/log.js';
import { Shards } from '../../src/audit/shards.js';
import { AuditStream } from '../../src/audit/stream.js';
import { connectBus } from '../../src/bus/connect.js';
import { StreamStore } from '../../src/bus/stream-store.js';
import { indexShardSubject, indexStreamName } from '../../src/bus/subjects.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';

const STREAM = 'FLUSH_TEST';

describe('the trace-id indexer at a trickle of calls', () => {
  let nats: ProcessNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNatsProcess(['-m', '0']);
    nc = await connectBus({ servers: nats.url, name: 'audit-flush' });
  });
  afterAll(async () => {
    await nc.drain();
    await nats.stop();
  });

  it('writes one message to a shard for every batch of a second, and finds each trace', async () => {
    const audit = await AuditStream.open(nc, { stream: STREAM });
    const store = await StreamStore.open(nc);
    const index = indexStreamName(STREAM);
    const jsm = await jetstreamManager(nc);
    const shards = Shards.fromDescription((await jsm.streams.info(index)).config.description);
    const shard = 3;
    const ids: string[] = [];
    // Zero-padded, so that no two n give the same id.
    for (let n = 1; ids.length < 6; n++) {
      const id = n.toString(16).padStart(32, '0');
      if (shards.of(id) === shard) ids.push(id);
    }
    const stop = await audit.startIndexer();
    const log = new AuditLog(nc);
    // Six batches over ~0.9 s, each with a trace of the shard: one flush window of 2 s.
    for (const id of ids) {
      const event = newCallEvent(`call-${id}`, 'echo');
      event.traceparent = `00-${id}-00f067aa0ba902b7-01`;
      log.record(event);
      log.flush();
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    const { last } = await audit.bounds();
    expect(last).toBe(ids.length);
    await eventually(async () => expect(await audit.indexedThrough()).toBe(last), { timeoutMs: 20_000 });
    const counts = await store.subjectCounts(index, indexShardSubject(STREAM, shard, 0));
    expect(counts.get(indexShardSubject(STREAM, shard, 0))).toBe(1);
    for (const [i, id] of ids.entries()) expect(await audit.batchesOf(id)).toEqual([i + 1]);
    stop();
  }, 60_000);
});
