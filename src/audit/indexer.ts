/**
 * The trace-id index of the audit trail, written per flush, not per trace: the indexer reads
 * stored batches from a durable consumer, collects trace id → batch sequences for a moment (up
 * to 512 batches or 2 s), and stores them as one message per touched shard on a stream of
 * its own (`<stream>_INDEX`, 256 shards). Like an LSM tree, a shard's messages are merged
 * level by level: once a level holds 32 messages the indexer writes their entries as one
 * message of the next level and purges them, so a lookup reads a few dozen messages however
 * long the trail, and keeps the sequences listed under its trace id. Every batch is listed (no
 * cap per trace), so flooding a trace id makes its lookups longer but hides no batch; and the
 * shard of a trace id is a keyed hash (the key is made with the index stream and kept in its
 * description), so a caller who picks trace ids cannot aim that flood at the shard of somebody
 * else's trace. A batch is acknowledged only once its entries are stored, so a crash or a
 * failed write indexes it again; a merge writes before it purges, so a lookup never misses.
 */
import type { Logger } from '../bus/log.js';
import type { Acknowledgement, Deliveries, JsMsg, StreamStore } from '../bus/stream-store.js';
import type { StreamWriter } from '../bus/stream-writer.js';
import { indexLevelOf, indexShardFilter, indexShardSubject, indexStreamName } from '../bus/subjects.js';
import { encodeEntries, mergeEntries, PendingEntries } from './index-entries.js';
import { SHARDS, type Shards } from './shards.js';

/** The durable consumer every instance shares to index the trail: each batch is indexed once. */
export const INDEXER = 'audit-trace-index';
/** How long a delivered batch may wait for its entries to be stored before it is delivered again. */
const INDEX_ACK_WAIT_MS = 30_000;
/** Batches delivered and not yet acknowledged, at most (a stalled writer stalls the indexer there). */
const INDEX_MAX_ACK_PENDING = 2048;
/**
 * A flush after this many batches, or after `INDEX_FLUSH_MS`, whichever comes first. A flush
 * writes a message to every shard it touched (at more than a few hundred calls a second, all
 * 256), so below the batch bound the flush interval sets what the index costs per call: one call
 * in flight (520–660 calls a second), 500 ms cost ~330 µs of CPU a call summed over processes,
 * 2 s ~40.
 */
const FLUSH_BATCHES = 512;
export const INDEX_FLUSH_MS = 2000;
/** A shard's messages of one level merge into one of the next level once it holds this many. */
export const MERGE_AT = 32;

/**
 * Merges a shard's full levels: each level with MERGE_AT messages or more becomes one message
 * (or a few, past the size bound) of the next level, written first, then the merged ones are
 * purged. Entries of batches gone from the trail (below `floor`) are left out. Only the levels
 * that are full are read (the server counts each level's messages): the levels above hold most
 * of the shard's entries, and reading them at every merge made a merge cost as much as the
 * whole shard, ever more as the trail grew.
 */
export async function mergeShard(
  store: StreamStore,
  writer: StreamWriter,
  stream: string,
  shard: number,
  floor: number,
): Promise<void> {
  const index = indexStreamName(stream);
  const counts = await store.subjectCounts(index, indexShardFilter(stream, shard));
  const top = Math.max(0, ...[...counts.keys()].map((subject) => indexLevelOf(subject) ?? 0));
  for (let level = 0; level <= top; level++) {
    const subject = indexShardSubject(stream, shard, level);
    if ((counts.get(subject) ?? 0) < MERGE_AT) continue;
    const full = await store.readAll(index, subject);
    if (full.length < MERGE_AT) continue;
    const encoded = encodeEntries(
      mergeEntries(
        full.map((m) => m.data),
        floor,
      ),
    );
    const next = indexShardSubject(stream, shard, level + 1);
    await Promise.all(encoded.map((data) => writer.append(next, data)));
    const through = Math.max(...full.map((m) => m.seq));
    await store.purge(index, subject, through + 1);
    counts.set(next, (counts.get(next) ?? 0) + encoded.length);
  }
}

/** Creates the shared durable consumer of the trail when it is missing (every instance calls this). */
export function ensureIndexer(store: StreamStore, stream: string): Promise<void> {
  return store.ensureDurable(stream, INDEXER, {
    ackWaitMs: INDEX_ACK_WAIT_MS,
    maxAckPending: INDEX_MAX_ACK_PENDING,
  });
}

/** What a `TraceIndexer` indexes, and with what. */
export interface TraceIndexerOptions {
  /** The streams: the trail it reads, the index it merges. */
  store: StreamStore;
  /** Writes the index's messages. */
  writer: StreamWriter;
  /** The trail's stream name; its index is `indexStreamName(stream)`. */
  stream: string;
  /** The trail's shard key. */
  shards: Shards;
  /** Where failures are told; default none. */
  logger?: Logger;
  /** Creates the index stream and the consumer again where a failure says they are gone; default nothing. */
  restore?: () => Promise<void>;
}

/** Indexes stored batches as they come, in flushes; `stop()` ends it (what was not flushed is delivered again). */
export class TraceIndexer {
  private pending: PendingEntries;
  private held: Acknowledgement[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private messages: Deliveries | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /**
   * Level-0 messages this instance wrote per shard since it last merged it; started at random so
   * merges spread over flushes.
   */
  private readonly written = Array.from({ length: SHARDS }, () => Math.floor(Math.random() * MERGE_AT));

  private readonly store: StreamStore;
  private readonly writer: StreamWriter;
  private readonly stream: string;
  private readonly shards: Shards;
  private readonly logger: Logger | undefined;
  private readonly restore: () => Promise<void>;

  constructor(options: TraceIndexerOptions) {
    this.store = options.store;
    this.writer = options.writer;
    this.stream = options.stream;
    this.shards = options.shards;
    this.logger = options.logger;
    this.restore = options.restore ?? (async () => {});
    this.pending = new PendingEntries(this.shards);
  }

  /** Starts consuming; resumes where the shared consumer left off. */
  start(): void {
    this.timer = setInterval(() => this.flush(), INDEX_FLUSH_MS).unref();
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.messages?.stop();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const messages = await this.store.consume(this.stream, INDEXER, 256);
        this.messages = messages;
        if (this.stopped) messages.stop();
        void this.watch(messages);
        for await (const m of messages) this.take(m);
      } catch (err) {
        // Batches not acknowledged are delivered again; a new subscription takes the old one's place.
        this.messages?.stop();
        if (!this.stopped) this.logger?.error(`audit index: ${(err as Error).message}; retrying`);
        await new Promise((resolve) => setTimeout(resolve, 500));
        await this.restoreQuietly();
      }
    }
  }

  /**
   * Lists a batch's trace ids and holds its acknowledgement (not the batch: at 13,000 calls a
   * second a batch is ~300 KB, and holding each until the flush, up to 2 s, kept tens of MB of
   * them alive, off the heap, for the collector to reckon with).
   */
  private take(m: JsMsg): void {
    this.pending.addBatch(m.data, m.seq);
    this.held.push(this.store.acknowledgementOf(m));
    if (this.held.length >= FLUSH_BATCHES) this.flush();
  }

  /** Stores what was collected, then acknowledges its batches; one flush at a time. */
  private flush(): void {
    if (this.held.length === 0) return;
    const pending = this.pending;
    const held = this.held;
    this.pending = new PendingEntries(this.shards);
    this.held = [];
    this.flushing = this.flushing.then(() => this.write(pending, held));
  }

  private async write(pending: PendingEntries, held: Acknowledgement[]): Promise<void> {
    if (this.stopped) return;
    try {
      await Promise.all(pending.messages(this.stream).map((m) => this.writer.append(m.subject, m.data)));
      for (const m of held) m.ack();
    } catch (err) {
      // Left unacknowledged: the server delivers these batches again after the ack wait.
      this.logger?.error(`audit index: ${held.length} batches not indexed yet: ${(err as Error).message}`);
      await this.restoreQuietly();
      return;
    }
    await this.mergeFull(
      [...pending.touched()].filter((shard) => (this.written[shard] = (this.written[shard] ?? 0) + 1) >= MERGE_AT),
    );
  }

  /** The client keeps pulling from a consumer or stream someone deleted: restore them and consume anew. */
  private async watch(messages: Deliveries): Promise<void> {
    if (!(await messages.gone)) return;
    await this.restoreQuietly();
    messages.stop();
  }

  private async restoreQuietly(): Promise<void> {
    if (this.stopped) return;
    await this.restore().catch((err: Error) =>
      this.logger?.error(`audit index: cannot restore its streams: ${err.message}`),
    );
  }

  /** Merges the shards that may have a full level; a failed merge leaves the index as it was (longer to read). */
  private async mergeFull(shards: number[]): Promise<void> {
    if (shards.length === 0 || this.stopped) return;
    try {
      const floor = (await this.store.bounds(this.stream)).first;
      for (const shard of shards) {
        this.written[shard] = 0;
        await mergeShard(this.store, this.writer, this.stream, shard, floor);
      }
    } catch (err) {
      this.logger?.error(`audit index: merging shards failed: ${(err as Error).message}`);
    }
  }
}
