/**
 * The entries of the trace-id index: trace id → the sequences of the batches that hold its
 * events, stored as JSON objects `{"<trace id>": [seq, …], …}`, one or a few per shard and flush.
 */
import { indexShardSubject } from '../bus/subjects.js';
import { forEachTraceId, TRACE_ID_LENGTH } from './events.js';
import { isTraceId, Shards } from './shards.js';

/** Largest index message: a shard's entries of one flush are split past it. */
const MAX_INDEX_MESSAGE = 256 * 1024;

/**
 * Entries collected since the last flush, per shard, held as bytes (`ShardEntries`). They wait
 * up to a flush interval (2 s) while the collector runs many times: a string and a map entry per
 * trace would outlive those young collections and be copied and promoted, at tens of thousands
 * of traces a second.
 */
export class PendingEntries {
  private readonly shards = new Map<number, ShardEntries>();
  /** Hashes a shard's trace ids for its table: a random key of its own, so no chosen ids collide there. */
  private readonly buckets = Shards.create();

  constructor(private readonly sharding: Shards) {}

  get size(): number {
    return this.shards.size;
  }

  /** The shards that have entries. */
  touched(): Iterable<number> {
    return this.shards.keys();
  }

  /** Lists `seq` under each trace id of a stored batch, read from its bytes (`forEachTraceId`). */
  addBatch(batch: Uint8Array, seq: number): void {
    forEachTraceId(batch, (bytes, at) => this.addAt(bytes, at, seq));
  }

  /** Lists `seq` under each trace id (32 lowercase hex digits); any other string is skipped. */
  add(traceIds: Iterable<string>, seq: number): void {
    // Entries hold exactly TRACE_ID_LENGTH bytes an id: a shorter string would be read past its end.
    for (const id of traceIds) if (isTraceId(id)) this.addAt(Buffer.from(id, 'latin1'), 0, seq);
  }

  /** The index messages: one JSON object `{"<trace id>": [seq, …], …}` per shard, split past `maxBytes`. */
  messages(stream: string, maxBytes = MAX_INDEX_MESSAGE): { subject: string; data: Uint8Array }[] {
    const out: { subject: string; data: Uint8Array }[] = [];
    for (const [shard, entries] of this.shards) {
      const subject = indexShardSubject(stream, shard);
      for (const data of encodeEntries(entries.entries(), maxBytes)) out.push({ subject, data });
    }
    return out;
  }

  private addAt(bytes: Buffer, at: number, seq: number): void {
    const shard = this.sharding.ofAt(bytes, at);
    let entries = this.shards.get(shard);
    if (entries === undefined) this.shards.set(shard, (entries = new ShardEntries()));
    entries.add(bytes, at, this.buckets.hashAt(bytes, at), seq);
  }
}

/**
 * One shard's pending entries, in typed arrays and a buffer (off the heap the collector walks):
 * per trace its 32 hex digits, its bucket's hash and its first batch's sequence, found by an
 * open-addressing table of trace numbers. Nearly every trace of a flush is in one batch; `more`
 * lists the rest of a trace's sequences only once a second batch names it.
 */
class ShardEntries {
  private count = 0;
  private ids = Buffer.allocUnsafeSlow(TRACE_ID_LENGTH * INITIAL_TRACES);
  private hashes = new Uint32Array(INITIAL_TRACES);
  private first = new Float64Array(INITIAL_TRACES);
  /** Slot → trace number + 1 (0: empty); at most half full. */
  private table = new Int32Array(INITIAL_TRACES * 2);
  /** Trace number → its sequences after the first, for the few traces in more than one batch. */
  private more: Map<number, number[]> | undefined;

  add(bytes: Buffer, at: number, hash: number, seq: number): void {
    const mask = this.table.length - 1;
    let slot = hash & mask;
    for (let found = this.table[slot] as number; found !== 0; found = this.table[slot] as number) {
      const i = found - 1;
      if (
        this.hashes[i] === hash &&
        bytes.compare(this.ids, i * TRACE_ID_LENGTH, (i + 1) * TRACE_ID_LENGTH, at, at + TRACE_ID_LENGTH) === 0
      ) {
        this.addSeq(i, seq);
        return;
      }
      slot = (slot + 1) & mask;
    }
    const i = this.count++;
    if (this.count > this.hashes.length) this.grow();
    bytes.copy(this.ids, i * TRACE_ID_LENGTH, at, at + TRACE_ID_LENGTH);
    this.hashes[i] = hash;
    this.first[i] = seq;
    if (this.count * 2 > this.table.length) this.rehash();
    else this.table[slot] = i + 1;
  }

  /** The entries, trace id → its sequences, in the order the traces came (made as they are read). */
  *entries(): Generator<[string, number | number[]]> {
    for (let i = 0; i < this.count; i++) {
      const id = this.ids.toString('latin1', i * TRACE_ID_LENGTH, (i + 1) * TRACE_ID_LENGTH);
      const first = this.first[i] as number;
      const rest = this.more?.get(i);
      yield [id, rest === undefined ? first : [first, ...rest]];
    }
  }

  private addSeq(i: number, seq: number): void {
    if (this.first[i] === seq) return;
    this.more ??= new Map();
    const seqs = this.more.get(i);
    if (seqs === undefined) this.more.set(i, [seq]);
    else if (!seqs.includes(seq)) seqs.push(seq);
  }

  private grow(): void {
    const size = this.hashes.length * 2;
    const ids = Buffer.allocUnsafeSlow(TRACE_ID_LENGTH * size);
    this.ids.copy(ids);
    this.ids = ids;
    const hashes = new Uint32Array(size);
    hashes.set(this.hashes);
    this.hashes = hashes;
    const first = new Float64Array(size);
    first.set(this.first);
    this.first = first;
  }

  private rehash(): void {
    const table = new Int32Array(this.table.length * 2);
    const mask = table.length - 1;
    for (let i = 0; i < this.count; i++) {
      let slot = (this.hashes[i] as number) & mask;
      while (table[slot] !== 0) slot = (slot + 1) & mask;
      table[slot] = i + 1;
    }
    this.table = table;
  }
}

/** Traces a shard's entries first make room for (grown twice over as needed). */
const INITIAL_TRACES = 64;

/** Entries as index messages: `{"<trace id>": [seq, …], …}`, a new message past `maxBytes`. */
export function encodeEntries(
  entries: Iterable<[string, number | Iterable<number>]>,
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
