/**
 * The entries of the trace-id index: trace id → the sequences of the batches that hold its
 * events, stored as JSON objects `{"<trace id>": [seq, …], …}`, one or a few per shard and flush.
 */
import { indexShardSubject } from '../bus/subjects.js';
import { isTraceId, type Shards } from './shards.js';

/** Largest index message: a shard's entries of one flush are split past it. */
const MAX_INDEX_MESSAGE = 256 * 1024;

/** Entries collected since the last flush: per shard, trace id → its batch's sequence, or sequences. */
export class PendingEntries {
  private readonly shards = new Map<number, Map<string, number | number[]>>();

  constructor(private readonly sharding: Shards) {}

  get size(): number {
    return this.shards.size;
  }

  /** The shards that have entries. */
  touched(): Iterable<number> {
    return this.shards.keys();
  }

  /**
   * Lists `seq` under each trace id. Nearly every trace of a flush is in one batch: its entry is
   * that batch's number, an array only once a second batch names it.
   */
  add(traceIds: Iterable<string>, seq: number): void {
    for (const id of traceIds) {
      const shard = this.sharding.of(id);
      let traces = this.shards.get(shard);
      if (traces === undefined) this.shards.set(shard, (traces = new Map()));
      const seqs = traces.get(id);
      if (seqs === undefined) traces.set(id, seq);
      else if (typeof seqs === 'number') {
        if (seqs !== seq) traces.set(id, [seqs, seq]);
      } else if (!seqs.includes(seq)) seqs.push(seq);
    }
  }

  /** The index messages: one JSON object `{"<trace id>": [seq, …], …}` per shard, split past `maxBytes`. */
  messages(stream: string, maxBytes = MAX_INDEX_MESSAGE): { subject: string; data: Uint8Array }[] {
    const out: { subject: string; data: Uint8Array }[] = [];
    for (const [shard, traces] of this.shards) {
      const subject = indexShardSubject(stream, shard);
      for (const data of encodeEntries(traces, maxBytes)) out.push({ subject, data });
    }
    return out;
  }
}

/** Entries as index messages: `{"<trace id>": [seq, …], …}`, a new message past `maxBytes`. */
export function encodeEntries(
  entries: Map<string, number | Iterable<number>>,
  maxBytes = MAX_INDEX_MESSAGE,
): Uint8Array[] {
  const out: Uint8Array[] = [];
  let parts: string[] = [];
  let length = 2;
  for (const [id, seqs] of entries) {
    const part = typeof seqs === 'number' ? `"${id}":[${seqs}]` : `"${id}":[${[...seqs].join(',')}]`;
    if (parts.length > 0 && length + part.length + 1 > maxBytes) {
      out.push(Buffer.from(`{${parts.join(',')}}`));
      parts = [];
      length = 2;
    }
    parts.push(part);
    length += part.length + 1;
  }
  if (parts.length > 0) out.push(Buffer.from(`{${parts.join(',')}}`));
  return out;
}

/** Every entry of index messages, without sequences below `floor` (batches aged out of the trail). */
export function mergeEntries(messages: Iterable<Uint8Array>, floor: number): Map<string, Set<number>> {
  const merged = new Map<string, Set<number>>();
  for (const data of messages) {
    const entries = entriesOf(data);
    if (entries === undefined) continue;
    for (const [id, seqs] of Object.entries(entries)) {
      if (!isTraceId(id) || !Array.isArray(seqs)) continue;
      let set = merged.get(id);
      for (const seq of seqs) {
        if (!isListed(seq, floor)) continue;
        if (set === undefined) merged.set(id, (set = new Set()));
        set.add(seq);
      }
    }
  }
  return merged;
}

/** The batch sequences an index message lists under a trace id (positive whole numbers only). */
export function seqsIn(data: Uint8Array, traceId: string): number[] {
  // Most messages of a shard do not name the trace: look before parsing.
  if (bufferOf(data).indexOf(`"${traceId}"`) < 0) return [];
  const seqs = entriesOf(data)?.[traceId];
  return Array.isArray(seqs) ? seqs.filter((n): n is number => isListed(n, 1)) : [];
}

/**
 * An index message's entries, `{"<trace id>": [seq, …], …}`, parsed but not checked (the
 * reader checks what it takes); undefined when it is no JSON object. Merges and lookups both
 * read a message by it.
 */
function entriesOf(data: Uint8Array): Record<string, unknown> | undefined {
  let entries: unknown;
  try {
    entries = JSON.parse(bufferOf(data).toString());
  } catch {
    return undefined;
  }
  return entries !== null && typeof entries === 'object' && !Array.isArray(entries)
    ? (entries as Record<string, unknown>)
    : undefined;
}

/** May an entry list `seq`: a whole number, at least 1 and at least `floor`? */
function isListed(seq: unknown, floor: number): seq is number {
  return Number.isSafeInteger(seq) && (seq as number) >= floor && (seq as number) >= 1;
}

/** The bytes of a message as a `Buffer`, without a copy. */
function bufferOf(data: Uint8Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}
