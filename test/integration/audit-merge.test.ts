/**
 * A merge of the trace-id index reads only the levels it merges: the levels above a full one
 * hold most of a shard's entries, and a merge that read them every time cost as much as the
 * whole shard, more with every hour of trail. What it merges is still merged whole, and a
 * lookup still finds every entry.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERGE_AT, mergeShard } from '../../src/audit/indexer.js';
import { readShard, readTraceIndex } from '../../src/audit/shard-reader.js';
import { Shards } from '../../src/audit/shards.js';
import { type StreamMessage, StreamStore } from '../../src/bus/stream-store.js';
import { StreamWriter } from '../../src/bus/stream-writer.js';
import { indexShardFilter, indexShardSubject, indexStreamName, indexSubjects } from '../../src/bus/subjects.js';
import { testConnection } from '../harness/bus.js';

const STREAM = `MERGE_READ_${process.pid}`;
const INDEX = indexStreamName(STREAM);

/** The stream store, telling which subjects each read asked for. */
class ReadsTold {
  readonly filters: string[] = [];
  constructor(readonly store: StreamStore) {
    const readAll = store.readAll.bind(store);
    store.readAll = (stream: string, filter: string, options?: { timeoutMs?: number }): Promise<StreamMessage[]> => {
      this.filters.push(filter);
      return readAll(stream, filter, options);
    };
  }
}

describe('merging a shard of the trace-id index', () => {
  let nc: NatsConnection;
  let writer: StreamWriter;
  const shards = Shards.fromDescription(undefined);
  const shard = 7;
  /** Trace ids of `shard`, the first `i` of them listed under batch i + 1. */
  const ids: string[] = [];

  beforeAll(async () => {
    nc = await testConnection();
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: INDEX, subjects: [indexSubjects(STREAM)] });
    writer = new StreamWriter(nc);
    for (let n = 0; ids.length < 3 * MERGE_AT; n++) {
      const id = n.toString(16).padStart(32, '0');
      if (shards.of(id) === shard) ids.push(id);
    }
  });
  afterAll(async () => {
    writer.close();
    await (await jetstreamManager(nc)).streams.delete(INDEX);
  });

  it('reads only the full level, not the levels above it, and leaves every entry findable', async () => {
    // Level 1 already holds a merged message; level 0 fills up with one entry a flush.
    await writer.append(indexShardSubject(STREAM, shard, 1), Buffer.from(`{"${ids[0]}":[1]}`));
    for (let i = 1; i <= MERGE_AT; i++) {
      await writer.append(indexShardSubject(STREAM, shard), Buffer.from(`{"${ids[i]}":[${i + 1}]}`));
    }
    const told = new ReadsTold(await StreamStore.open(nc));
    await mergeShard(told.store, writer, STREAM, shard, 1);
    expect(told.filters).toEqual([indexShardSubject(STREAM, shard, 0)]);
    expect(told.filters).not.toContain(indexShardFilter(STREAM, shard));
    const levels = (await readShard(told.store, STREAM, shard)).map((m) => m.level);
    expect(levels.sort()).toEqual([1, 1]);
    for (let i = 0; i <= MERGE_AT; i++) {
      expect(await readTraceIndex(told.store, STREAM, shards, ids[i] as string)).toEqual([i + 1]);
    }
  });

  it('reads nothing but the counts when no level is full', async () => {
    await writer.append(indexShardSubject(STREAM, shard), Buffer.from(`{"${ids[MERGE_AT + 1]}":[99]}`));
    const told = new ReadsTold(await StreamStore.open(nc));
    await mergeShard(told.store, writer, STREAM, shard, 1);
    expect(told.filters).toEqual([]);
    expect(await readTraceIndex(told.store, STREAM, shards, ids[MERGE_AT + 1] as string)).toEqual([99]);
  });
});
