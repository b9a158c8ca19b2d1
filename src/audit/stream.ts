/**
 * The durable audit trail: a JetStream stream that stores every message of
 * `system.dispatcher.events.call` as it is published (batches stay batches: the dispatcher
 * publishes exactly as before), and a trace-id index on a second stream (`indexer.ts`),
 * written per flush by a durable consumer all instances share. Queries by trace id read one
 * shard of the index and the batches it names, however long the stream is.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { UnavailableError } from '../bus/errors.js';
import type { Logger } from '../bus/log.js';
import { type StreamBounds, type StreamLimits, StreamStore } from '../bus/stream-store.js';
import { StreamWriter } from '../bus/stream-writer.js';
import { indexStreamName, indexSubjects, overflowStreamName } from '../bus/subjects.js';
import { type CallEvent, decodeCallEvents } from './events.js';
import { ensureIndexer, INDEXER, TraceIndexer } from './indexer.js';
import { CALL_EVENTS, OVERFLOW_CALL_EVENTS } from './log.js';
import type { BatchSource } from './query.js';
import { readTraceIndex } from './shard-reader.js';
import { Shards } from './shards.js';

/** Where and how long the trail is kept. */
export interface AuditStreamOptions {
  /** Stream name; default `MATRIX_AUDIT`. Its trace-id index is the stream `<name>_INDEX`. */
  stream?: string;
  /** Age past which events are dropped, in ms; default 7 days. */
  maxAgeMs?: number;
  /** Size past which the oldest events are dropped, in bytes; default 1 GiB (the index has the same limits). */
  maxBytes?: number;
  /** Copies kept by a JetStream cluster; default 1. */
  replicas?: number;
  /**
   * Size of the overflow stream `<name>_OVERFLOW` (the events of principals past their share of
   * the trail, `share.ts`), oldest dropped first, in bytes; default a quarter of `maxBytes`. Same age.
   */
  overflowBytes?: number;
}

/** One stored batch of events. */
export interface StoredBatch {
  seq: number;
  /** When the stream stored it, ms since the epoch (no earlier than any of its events' `at`). */
  time: number;
  /** Its events in order; entries that are not events are undefined, keeping their places. */
  events: (CallEvent | undefined)[];
}

const DAY_MS = 86_400_000;

/** The stream and its index, opened (and created when missing) by `open`. */
export class AuditStream {
  private constructor(
    private readonly store: StreamStore,
    readonly name: string,
    private readonly shards: Shards,
    private readonly limits: StreamLimits,
    private readonly overflowLimits: StreamLimits,
  ) {
    this.overflow = new OverflowStream(store, overflowStreamName(name));
  }

  /**
   * The overflow stream, read as a query reads the trail: it has no index, a lookup by trace id
   * scans it a page at a time.
   */
  readonly overflow: OverflowStream;

  /** The stream holding the trace-id index. */
  get indexName(): string {
    return indexStreamName(this.name);
  }

  /**
   * Opens the trail, creating the stream, its index and the indexer's consumer when missing;
   * `UnavailableError` without JetStream.
   */
  static async open(nc: NatsConnection, options: AuditStreamOptions = {}): Promise<AuditStream> {
    const name = options.stream ?? 'MATRIX_AUDIT';
    const limits = {
      maxAgeMs: options.maxAgeMs ?? 7 * DAY_MS,
      maxBytes: options.maxBytes ?? 2 ** 30,
      replicas: options.replicas ?? 1,
    };
    const overflowLimits = { ...limits, maxBytes: options.overflowBytes ?? Math.floor(limits.maxBytes / 4) };
    try {
      const store = await StreamStore.open(nc);
      const description = await ensureTrail(store, name, limits, Shards.create().describe(name), overflowLimits);
      return new AuditStream(store, name, Shards.fromDescription(description), limits, overflowLimits);
    } catch (err) {
      throw new UnavailableError(
        `cannot open the audit stream ${name} (is JetStream enabled?): ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /** The stream's first and last sequence and how many batches it keeps. */
  bounds(): Promise<StreamBounds> {
    return boundsOf(this.store, this.name);
  }

  /** One stored batch, or null when it is gone (aged out) or never was. */
  batch(seq: number): Promise<StoredBatch | null> {
    return batchOf(this.store, this.name, seq);
  }

  /**
   * The sequences of the batches that hold events of a trace, as indexed so far, ascending. A
   * lookup that fails has what is missing made again (an index deleted while no call came would
   * otherwise wait for the next call's write) and fails `unavailable`; a later one finds it.
   */
  batchesOf(traceId: string): Promise<number[]> {
    return readTraceIndex(this.store, this.name, this.shards, traceId).catch((err: Error) => this.unreadableIndex(err));
  }

  /**
   * The sequence up to which every batch is indexed (the shared consumer's ack floor). A read
   * that fails has what is missing made again and fails `unavailable`: taking 0 for it would
   * have a lookup read the whole trail as if nothing were indexed.
   */
  indexedThrough(): Promise<number> {
    return this.store.ackFloor(this.name, INDEXER).catch((err: Error) => this.unreadableIndex(err));
  }

  /** A failed read of the index or its consumer: has what is missing made again, and fails `unavailable`. */
  private unreadableIndex(err: Error): never {
    void this.restore().catch(() => undefined);
    return unreadable(err);
  }

  /**
   * Indexes batches as they are stored, sharing one durable consumer with every other
   * instance; returns a function that stops. Resumes where the consumer left off.
   */
  async startIndexer(logger?: Logger): Promise<() => void> {
    await ensureIndexer(this.store, this.name);
    const writer = new StreamWriter(this.store.nc);
    const indexer = new TraceIndexer({
      store: this.store,
      writer,
      stream: this.name,
      shards: this.shards,
      logger,
      restore: () => this.restore(),
    });
    indexer.start();
    return () => {
      indexer.stop();
      writer.close();
    };
  }

  /**
   * Creates again what is missing, when a write or a read of the indexer failed: the streams
   * (the index with the key this instance shards by, so every instance still agrees) and the
   * indexer's consumer, from the first batch when the index was gone. Someone deleted them;
   * nothing else removes them.
   */
  private async restore(): Promise<void> {
    const indexGone = !(await this.store.exists(this.indexName));
    // A new index is empty: the consumer starts again from the trail's first batch.
    if (indexGone) await this.store.deleteConsumer(this.name, INDEXER);
    await ensureTrail(this.store, this.name, this.limits, this.shards.describe(this.name), this.overflowLimits);
  }
}

/**
 * The overflow stream as a query's `BatchSource`. Without an index (its index floor is 0), a
 * lookup by trace id reads its batches newest first, at most 1,024 a page (`TRACE_BUDGET`), and
 * hands back a cursor for the rest: bounded by the overflow's size, not the flood's length.
 */
export class OverflowStream implements BatchSource {
  constructor(
    private readonly store: StreamStore,
    readonly name: string,
  ) {}

  /** Its bounds; empty when it is missing (another stream holds its subject, see `ensureTrail`). */
  bounds(): Promise<StreamBounds> {
    return boundsOf(this.store, this.name).catch(async (err: Error) => {
      if (await this.store.exists(this.name)) throw err;
      return { first: 0, last: 0, messages: 0 };
    });
  }

  batch(seq: number): Promise<StoredBatch | null> {
    return batchOf(this.store, this.name, seq);
  }

  /** None: the overflow has no index. */
  async batchesOf(): Promise<number[]> {
    return [];
  }

  /** 0: nothing of the overflow is indexed, a lookup reads it. */
  async indexedThrough(): Promise<number> {
    return 0;
  }
}

/**
 * The trail, its index (created with `indexDescription`) and the indexer's consumer, each
 * created when missing; the index's description back (another instance's, when it made it first).
 */
async function ensureTrail(
  store: StreamStore,
  name: string,
  limits: StreamLimits,
  indexDescription: string,
  overflowLimits: StreamLimits,
): Promise<string | undefined> {
  await store.ensure(name, CALL_EVENTS, limits);
  // Another stream holding the overflow's subject (an overflow left by a trail since renamed or
  // deleted) stores the overflow instead: the trail itself opens, and its queries read no overflow.
  await store.ensure(overflowStreamName(name), OVERFLOW_CALL_EVENTS, overflowLimits).catch(async (err: Error) => {
    if (!/overlap/i.test(err.message)) throw err;
  });
  const description = await store.ensure(indexStreamName(name), indexSubjects(name), limits, indexDescription);
  await ensureIndexer(store, name);
  return description;
}

function boundsOf(store: StreamStore, name: string): Promise<StreamBounds> {
  return store.bounds(name).catch(unreadable);
}

async function batchOf(store: StreamStore, name: string, seq: number): Promise<StoredBatch | null> {
  const m = await store.message(name, seq).catch(unreadable);
  if (m === null) return null;
  return { seq, time: m.time, events: decodeCallEvents(m.data) };
}

/** A failed read of the stream, as the error a `$query` answers with: the trail is there, the server is not. */
function unreadable(err: Error): never {
  throw new UnavailableError(`the audit stream cannot be read now: ${err.message}`, { cause: err });
}
