/**
 * Reading the trace-id index: one shard's messages, whole, and the batch sequences a lookup
 * finds in them.
 */
import type { StreamStore } from '../bus/stream-store.js';
import { indexLevelOf, indexShardFilter, indexStreamName } from '../bus/subjects.js';
import { seqsIn } from './index-entries.js';
import { isTraceId, type Shards } from './shards.js';

/** One stored message of the index. */
export interface IndexMessage {
  seq: number;
  /** Its merge level: 0 as a flush wrote it, one more each time it was merged; undefined on a subject of no level. */
  level: number | undefined;
  data: Uint8Array;
}

/**
 * Every message of one shard, oldest first, as many as there were when the read began (a merge
 * writes its message before it purges what it merged, so nothing is skipped). All or nothing:
 * a read that runs out of time, or misses a delivery, fails `UnavailableError` (a lookup or a
 * merge that took part of a shard for all of it would miss batches, and a merge would purge
 * what it never read).
 */
export async function readShard(
  store: StreamStore,
  stream: string,
  shard: number,
  options: { timeoutMs?: number } = {},
): Promise<IndexMessage[]> {
  const messages = await store.readAll(indexStreamName(stream), indexShardFilter(stream, shard), options);
  return messages.map((m) => ({
    seq: m.seq,
    level: indexLevelOf(m.subject),
    data: m.data,
  }));
}

/** The batch sequences the index lists for a trace id, ascending and distinct. */
export async function readTraceIndex(
  store: StreamStore,
  stream: string,
  shards: Shards,
  traceId: string,
): Promise<number[]> {
  if (!isTraceId(traceId)) return [];
  const seqs = new Set<number>();
  for (const m of await readShard(store, stream, shards.of(traceId))) {
    for (const seq of seqsIn(m.data, traceId)) seqs.add(seq);
  }
  return [...seqs].sort((a, b) => a - b);
}
