/**
 * The durable audit trail: a JetStream stream that stores every message of
 * `system.dispatcher.events.call` as it is published (batches stay batches: the dispatcher
 * publishes exactly as before), and a trace-id index on a second stream (`audit-index.ts`),
 * written per flush by a durable consumer all instances share. Queries by trace id read one
 * shard of the index and the batches it names, however long the stream is.
 */
import {
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { type NatsConnection, nanos } from '@nats-io/nats-core';
import { UnavailableError } from '../bus/errors.js';
import type { Logger } from '../bus/log.js';
import { StreamWriter } from '../bus/stream-writer.js';
import type { CallEvent } from '../dispatcher/types.js';
import { CALL_EVENTS } from './log.js';
import {
  ensureIndexer,
  eventsOfBatch,
  INDEXER,
  indexSubjects,
  readTraceIndex,
  Shards,
  TraceIndexer,
} from './trace-index.js';

export { eventsOfBatch } from './trace-index.js';

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
/** The consumer of the KV index this one replaced; removed when found, so it holds nothing back. */
const OLD_INDEXER = 'audit-index';

interface StreamLimits {
  max_age: number;
  max_bytes: number;
  num_replicas: number;
}

/** The stream and its index, opened (and created when missing) by `open`. */
export class AuditStream {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly name: string,
    private readonly shards: Shards,
    private readonly limits: StreamLimits,
  ) {}

  /** The stream holding the trace-id index. */
  get indexName(): string {
    return `${this.name}_INDEX`;
  }

  /** Opens the trail, creating the stream, its index and the indexer's consumer when missing; `UnavailableError` without JetStream. */
  static async open(nc: NatsConnection, options: AuditStreamOptions = {}): Promise<AuditStream> {
    const name = options.stream ?? 'MATRIX_AUDIT';
    const limits = {
      max_age: nanos(options.maxAgeMs ?? 7 * DAY_MS),
      max_bytes: options.maxBytes ?? 2 ** 30,
      num_replicas: options.replicas ?? 1,
    };
    try {
      const jsm = await jetstreamManager(nc);
      const index = await ensureTrail(jsm, name, limits, Shards.create().describe(name));
      await jsm.consumers.delete(name, OLD_INDEXER).catch(() => undefined);
      return new AuditStream(nc, jetstream(nc), jsm, name, Shards.fromDescription(index.description), limits);
    } catch (err) {
      throw new UnavailableError(
        `cannot open the audit stream ${name} (is JetStream enabled?): ${(err as Error).message}`,
        { cause: err },
      );
    }
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

  /**
   * The sequences of the batches that hold events of a trace, as indexed so far, ascending. A
   * lookup that fails has what is missing made again (an index deleted while no call came would
   * otherwise wait for the next call's write) and fails `unavailable`; a later one finds it.
   */
  batchesOf(traceId: string): Promise<number[]> {
    return readTraceIndex(this.nc, this.jsm, this.name, this.shards, traceId).catch((err) => {
      void this.restore().catch(() => undefined);
      return unreadable(err);
    });
  }

  /**
   * The sequence up to which every batch is indexed (the shared consumer's ack floor). A read
   * that fails has what is missing made again and fails `unavailable`: taking 0 for it would
   * have a lookup read the whole trail as if nothing were indexed.
   */
  async indexedThrough(): Promise<number> {
    const info = await this.jsm.consumers.info(this.name, INDEXER).catch((err: Error) => {
      void this.restore().catch(() => undefined);
      return unreadable(err);
    });
    return info.ack_floor.stream_seq;
  }

  /**
   * Indexes batches as they are stored, sharing one durable consumer with every other
   * instance; returns a function that stops. Resumes where the consumer left off.
   */
  async startIndexer(logger?: Logger): Promise<() => void> {
    await ensureIndexer(this.jsm, this.name);
    const writer = new StreamWriter(this.nc);
    const indexer = new TraceIndexer(this.nc, this.js, this.jsm, writer, this.name, this.shards, logger, () =>
      this.restore(),
    );
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
    const indexGone = await this.jsm.streams.info(this.indexName).then(
      () => false,
      () => true,
    );
    // A new index is empty: the consumer starts again from the trail's first batch.
    if (indexGone) await this.jsm.consumers.delete(this.name, INDEXER).catch(() => undefined);
    await ensureTrail(this.jsm, this.name, this.limits, this.shards.describe(this.name));
  }
}

/** The trail, its index (created with `indexDescription`) and the indexer's consumer, each created when missing; the index's config back. */
async function ensureTrail(
  jsm: JetStreamManager,
  name: string,
  limits: StreamLimits,
  indexDescription: string,
): Promise<StreamConfig> {
  await ensureStream(jsm, name, CALL_EVENTS, limits);
  const index = await ensureStream(jsm, `${name}_INDEX`, indexSubjects(name), limits, indexDescription);
  await ensureIndexer(jsm, name);
  return index;
}

/**
 * Creates a stream with these limits (and description) when missing, and brings an existing
 * one's age and size to them; its config back, the description another instance gave it when
 * that one created it first.
 */
async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subject: string,
  limits: StreamLimits,
  description?: string,
): Promise<StreamConfig> {
  const info = await jsm.streams.info(name).catch(() => undefined);
  if (info === undefined) {
    const config = {
      name,
      subjects: [subject],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      allow_direct: true,
      ...limits,
      ...(description === undefined ? {} : { description }),
    };
    try {
      return (await jsm.streams.add(config)).config;
    } catch (err) {
      const raced = await jsm.streams.info(name).catch(() => undefined);
      if (raced === undefined) throw err;
      return raced.config;
    }
  }
  if (info.config.max_age !== limits.max_age || info.config.max_bytes !== limits.max_bytes) {
    return (await jsm.streams.update(name, { ...info.config, max_age: limits.max_age, max_bytes: limits.max_bytes }))
      .config;
  }
  return info.config;
}

/** A failed read of the stream, as the error a `$query` answers with: the trail is there, the server is not. */
function unreadable(err: Error): never {
  throw new UnavailableError(`the audit stream cannot be read now: ${err.message}`, { cause: err });
}
