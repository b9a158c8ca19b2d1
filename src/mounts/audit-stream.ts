/**
 * The durable audit trail: a JetStream stream that stores every message of
 * `system.dispatcher.events.call` as it is published (batches stay batches: the dispatcher
 * publishes exactly as before), and an index from trace id to the stream sequences of the
 * batches that hold the trace's events, kept in a KV bucket by a shared durable consumer.
 * Queries by trace id read one index key and those batches, however long the stream is.
 */
import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { type NatsConnection, nanos } from '@nats-io/nats-core';
import { decodeBody } from '../bus/codec.js';
import { traceIdOf } from '../bus/context.js';
import { ConflictError, UnavailableError } from '../bus/errors.js';
import { Bucket } from '../bus/kv.js';
import type { Logger } from '../bus/log.js';
import { StreamWriter } from '../bus/stream-writer.js';
import { CALL_EVENTS } from '../dispatcher/audit.js';
import type { CallEvent } from '../dispatcher/types.js';

/** Where and how long the trail is kept. */
export interface AuditStreamOptions {
  /** Stream name; default `MATRIX_AUDIT`. */
  stream?: string;
  /** KV bucket of the trace-id index; default `matrix-audit-index`. */
  indexBucket?: string;
  /** Age past which events are dropped, in ms; default 7 days. */
  maxAgeMs?: number;
  /** Size past which the oldest events are dropped, in bytes; default 1 GiB. */
  maxBytes?: number;
  /** Copies kept by a JetStream cluster; default 1. */
  replicas?: number;
}

/** One stored batch of events. */
export interface StoredBatch {
  seq: number;
  /** When the stream stored it, ms since the epoch (no earlier than any of its events' `at`). */
  time: number;
  /** Its events in order; entries that are not events are undefined, keeping their places. */
  events: (CallEvent | undefined)[];
}

/** The durable consumer every instance shares to build the index: each batch is indexed once. */
const INDEXER = 'audit-index';
/** Most batch sequences kept per trace id (the newest). */
const MAX_BATCHES_PER_TRACE = 1000;
/** Index entries remembered per instance, to write without reading first. */
const INDEX_CACHE = 10_000;
const DAY_MS = 86_400_000;
/** The index entry of a trace with no batch indexed yet. */
const NEW_TRACE: { readonly seqs: readonly number[]; readonly revision: number } = { seqs: [], revision: 0 };

/** The stream and its index, opened (and created when missing) by `open`. */
export class AuditStream {
  private readonly cache = new TwoGenerations<string, { seqs: number[]; revision: number }>(INDEX_CACHE);
  /** Writes the index entries of new traces: one publish each, acknowledged on one inbox. */
  private readonly writer: StreamWriter;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly index: Bucket,
    readonly name: string,
  ) {
    this.writer = new StreamWriter(nc);
  }

  /** Opens the trail, creating the stream and the index when missing; `UnavailableError` without JetStream. */
  static async open(nc: NatsConnection, options: AuditStreamOptions = {}): Promise<AuditStream> {
    const name = options.stream ?? 'MATRIX_AUDIT';
    const maxAgeMs = options.maxAgeMs ?? 7 * DAY_MS;
    const maxBytes = options.maxBytes ?? 2 ** 30;
    const replicas = options.replicas ?? 1;
    let jsm: JetStreamManager;
    try {
      jsm = await jetstreamManager(nc);
      const limits = { max_age: nanos(maxAgeMs), max_bytes: maxBytes };
      const info = await jsm.streams.info(name).catch(() => undefined);
      if (info === undefined) {
        await jsm.streams.add({
          name,
          subjects: [CALL_EVENTS],
          retention: RetentionPolicy.Limits,
          storage: StorageType.File,
          discard: DiscardPolicy.Old,
          num_replicas: replicas,
          allow_direct: true,
          ...limits,
        });
      } else if (info.config.max_age !== limits.max_age || info.config.max_bytes !== limits.max_bytes) {
        await jsm.streams.update(name, { ...info.config, ...limits });
      }
    } catch (err) {
      throw new UnavailableError(`cannot open the audit stream ${name} (is JetStream enabled?): ${(err as Error).message}`, { cause: err });
    }
    const index = await Bucket.open(nc, options.indexBucket ?? 'matrix-audit-index', { replicas, history: 1, maxAgeMs });
    return new AuditStream(nc, jsm, index, name);
  }

  /** The stream's first and last sequence and how many batches it keeps. */
  async bounds(): Promise<{ first: number; last: number; messages: number }> {
    const { state } = await this.jsm.streams.info(this.name).catch(unreadable);
    return { first: state.first_seq, last: state.last_seq, messages: state.messages };
  }

  /** One stored batch, or null when it is gone (aged out) or never was. */
  async batch(seq: number): Promise<StoredBatch | null> {
    const m = await this.jsm.direct.getMessage(this.name, { seq }).catch(unreadable);
    if (m === null) return null;
    return { seq, time: m.time.getTime(), events: eventsOfBatch(m.data) };
  }

  /** The sequences of the batches that hold events of a trace, as indexed so far. */
  async batchesOf(traceId: string): Promise<number[]> {
    return (await this.readIndex(traceId)).seqs;
  }

  /** The sequence up to which every batch is indexed (the shared consumer's ack floor). */
  async indexedThrough(): Promise<number> {
    const info = await this.jsm.consumers.info(this.name, INDEXER).catch(() => undefined);
    return info?.ack_floor.stream_seq ?? 0;
  }

  /**
   * Indexes batches as they are stored, sharing one durable consumer with every other
   * instance; returns a function that stops. Resumes where the consumer left off.
   */
  async startIndexer(logger?: Logger): Promise<() => void> {
    await this.jsm.consumers.add(this.name, {
      durable_name: INDEXER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(30_000),
    });
    let stopped = false;
    let messages: ConsumerMessages | undefined;
    void (async () => {
      while (!stopped) {
        try {
          messages = await (await jetstream(this.nc).consumers.get(this.name, INDEXER)).consume({ max_messages: 64 });
          if (stopped) messages.stop();
          for await (const m of messages) {
            await this.indexBatch(m.seq, m.data);
            m.ack();
          }
        } catch (err) {
          // The batch not acknowledged is delivered again; a new subscription takes the old one's place.
          messages?.stop();
          if (!stopped) logger?.error(`audit index: ${(err as Error).message}; retrying`);
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    })();
    return () => {
      stopped = true;
      messages?.stop();
      this.writer.close();
    };
  }

  /** Adds a batch's sequence to the index entry of every trace it holds events of. */
  async indexBatch(seq: number, data: Uint8Array): Promise<void> {
    const traces = new Set<string>();
    for (const e of eventsOfBatch(data)) {
      const id = traceIdOf(e?.traceparent);
      if (id !== undefined) traces.add(id);
    }
    await Promise.all([...traces].map((id) => this.addToIndex(id, seq)));
  }

  private async addToIndex(traceId: string, seq: number): Promise<void> {
    // A trace not remembered is taken as new (most traces are one call in one batch): the
    // create is the one request, and only a conflict reads what another batch wrote first.
    let known = this.cache.get(traceId) ?? NEW_TRACE;
    let conflicts = 0;
    // Compare-and-set: instances index different batches of one trace at once.
    for (;;) {
      if (known.seqs.includes(seq)) return;
      const seqs = [...known.seqs, seq].sort((a, b) => a - b).slice(-MAX_BATCHES_PER_TRACE);
      const value = Buffer.from(JSON.stringify(seqs));
      try {
        this.remember(traceId, { seqs, revision: await this.write(traceId, value, known.revision, conflicts) });
        return;
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        this.cache.delete(traceId);
        known = await this.readIndex(traceId);
        conflicts++;
      }
    }
  }

  /**
   * Writes a trace's entry where it is at `revision` (0: where it has none). A first create is
   * a plain publish; after a conflict the KV client's own create, which also takes the place
   * of a deleted entry.
   */
  private write(traceId: string, value: Uint8Array, revision: number, conflicts: number): Promise<number> {
    if (revision !== 0) return this.index.update(traceId, value, revision);
    return conflicts === 0 ? this.writer.create(`$KV.${this.index.name}.${traceId}`, value) : this.index.create(traceId, value);
  }

  private async readIndex(traceId: string): Promise<{ seqs: number[]; revision: number }> {
    const entry = await this.index.get(traceId);
    if (entry === null) return { seqs: [], revision: 0 };
    let seqs: unknown;
    try {
      seqs = JSON.parse(Buffer.from(entry.value).toString());
    } catch {
      seqs = [];
    }
    return { seqs: Array.isArray(seqs) ? seqs.filter((n): n is number => Number.isInteger(n)) : [], revision: entry.revision };
  }

  private remember(traceId: string, entry: { seqs: number[]; revision: number }): void {
    this.cache.set(traceId, entry);
  }
}

/**
 * A bounded map that forgets in generations: when the young one is full it becomes the old
 * one, and the old one goes. Dropping a Map's oldest key one at a time costs V8 a scan over
 * every slot deleted before it (the table is compacted only when it grows), which at one new
 * key per call made the audit index's cache its most expensive line.
 */
class TwoGenerations<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();

  constructor(private readonly perGeneration: number) {}

  get(key: K): V | undefined {
    return this.young.get(key) ?? this.old.get(key);
  }

  set(key: K, value: V): void {
    this.old.delete(key);
    this.young.set(key, value);
    if (this.young.size < this.perGeneration) return;
    this.old = this.young;
    this.young = new Map();
  }

  delete(key: K): void {
    this.young.delete(key);
    this.old.delete(key);
  }
}

/** A failed read of the stream, as the error a `$query` answers with: the trail is there, the server is not. */
function unreadable(err: Error): never {
  throw new UnavailableError(`the audit stream cannot be read now: ${err.message}`, { cause: err });
}

/** The events of one message of `system.dispatcher.events.call` (an array of events, or one), in order; non-events are undefined. */
export function eventsOfBatch(data: Uint8Array): (CallEvent | undefined)[] {
  let value: unknown;
  try {
    value = decodeBody(data);
  } catch {
    return [];
  }
  const list = Array.isArray(value) ? value : [value];
  return list.map((e) => (e !== null && typeof e === 'object' && !Array.isArray(e) ? (e as CallEvent) : undefined));
}
