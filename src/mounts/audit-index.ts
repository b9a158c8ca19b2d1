/**
 * The trace-id index of the audit trail, written per flush, not per trace: the indexer reads
 * stored batches from a durable consumer, collects trace id → batch sequences for a moment (up
 * to 512 batches or 200 ms), and stores them as one message per touched shard on a stream of
 * its own (`<stream>_INDEX`, subject `system.dispatcher.audit.<stream>.<shard>`, 1,024 shards).
 * A lookup reads its shard's messages and keeps the sequences listed under its trace id. Every
 * batch is listed (no cap per trace), so flooding a trace id with calls makes its lookups
 * longer but hides no batch; and the shard of a trace id is a keyed hash (the key is made when
 * the index stream is, and kept in its description), so a caller who picks trace ids cannot
 * aim that flood at the shard of somebody else's trace. A batch is acknowledged only once its
 * entries are stored, so a crash or a failed write indexes it again.
 */

import { createHash, randomBytes } from 'node:crypto';
import { AckPolicy, type ConsumerMessages, DeliverPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { decodeBody } from '../bus/codec.js';
import { traceIdOf } from '../bus/context.js';
import type { Logger } from '../bus/log.js';
import type { StreamWriter } from '../bus/stream-writer.js';
import type { CallEvent } from '../dispatcher/types.js';

/** Shards of the index: a lookup reads one, a flush writes at most one message to each. */
export const SHARDS = 1024;
/** The durable consumer every instance shares to index the trail: each batch is indexed once. */
export const INDEXER = 'audit-trace-index';
/** How long a delivered batch may wait for its entries to be stored before it is delivered again. */
const INDEX_ACK_WAIT_MS = 30_000;
/** Batches delivered and not yet acknowledged, at most (a stalled writer stalls the indexer there). */
const INDEX_MAX_ACK_PENDING = 2048;
/** A flush after this many batches, or after `FLUSH_MS`, whichever comes first. */
const FLUSH_BATCHES = 512;
const FLUSH_MS = 200;
/** Largest index message: a shard's entries of one flush are split past it. */
const MAX_INDEX_MESSAGE = 256 * 1024;
const TRACE_ID = /^[0-9a-f]{32}$/;

/** Which shard lists a trace id: a hash keyed by a secret of the trail, the same in every instance. */
export class Shards {
  private constructor(readonly key: string) {}

  /** A new random key. */
  static create(): Shards {
    return new Shards(randomBytes(16).toString('hex'));
  }

  /** The key an index stream's description names (`shard key <32 hex>`); none: an unkeyed hash. */
  static fromDescription(description: string | undefined): Shards {
    return new Shards(/shard key ([0-9a-f]{32})/.exec(description ?? '')?.[1] ?? '');
  }

  /** The description an index stream is created with. */
  describe(stream: string): string {
    return `Trace-id index of the audit trail ${stream} (shard key ${this.key})`;
  }

  of(traceId: string): number {
    const digest = createHash('sha256').update(this.key).update(traceId).digest();
    return ((digest[0] as number) * 256 + (digest[1] as number)) % SHARDS;
  }
}

/** The subject of one shard of a trail's index. */
export function shardSubject(stream: string, shard: number): string {
  return `system.dispatcher.audit.${stream}.${shard}`;
}

/** Every subject of a trail's index (the index stream's subjects). */
export function indexSubjects(stream: string): string {
  return `system.dispatcher.audit.${stream}.*`;
}

/** Is this a trace id as W3C writes them (32 lowercase hex digits)? */
export function isTraceId(id: string): boolean {
  return TRACE_ID.test(id);
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

/** The distinct trace ids of a batch's events. */
export function traceIdsOfBatch(data: Uint8Array): Set<string> {
  const ids = new Set<string>();
  for (const e of eventsOfBatch(data)) {
    const id = traceIdOf(e?.traceparent);
    if (id !== undefined) ids.add(id);
  }
  return ids;
}

/** Entries collected since the last flush: per shard, trace id → batch sequences. */
export class PendingEntries {
  private readonly shards = new Map<number, Map<string, number[]>>();

  constructor(private readonly sharding: Shards) {}

  get size(): number {
    return this.shards.size;
  }

  add(traceIds: Iterable<string>, seq: number): void {
    for (const id of traceIds) {
      const shard = this.sharding.of(id);
      let traces = this.shards.get(shard);
      if (traces === undefined) this.shards.set(shard, (traces = new Map()));
      const seqs = traces.get(id);
      if (seqs === undefined) traces.set(id, [seq]);
      else if (!seqs.includes(seq)) seqs.push(seq);
    }
  }

  /** The index messages: one JSON object `{"<trace id>": [seq, …], …}` per shard, split past `maxBytes`. */
  messages(stream: string, maxBytes = MAX_INDEX_MESSAGE): { subject: string; data: Uint8Array }[] {
    const out: { subject: string; data: Uint8Array }[] = [];
    for (const [shard, traces] of this.shards) {
      const subject = shardSubject(stream, shard);
      let parts: string[] = [];
      let length = 2;
      for (const [id, seqs] of traces) {
        const part = `"${id}":[${seqs.join(',')}]`;
        if (parts.length > 0 && length + part.length + 1 > maxBytes) {
          out.push({ subject, data: Buffer.from(`{${parts.join(',')}}`) });
          parts = [];
          length = 2;
        }
        parts.push(part);
        length += part.length + 1;
      }
      out.push({ subject, data: Buffer.from(`{${parts.join(',')}}`) });
    }
    return out;
  }
}

/** The batch sequences an index message lists under a trace id (positive whole numbers only). */
export function seqsIn(data: Uint8Array, traceId: string): number[] {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // Most messages of a shard do not name the trace: look before parsing.
  if (bytes.indexOf(`"${traceId}"`) < 0) return [];
  let entries: unknown;
  try {
    entries = JSON.parse(bytes.toString());
  } catch {
    return [];
  }
  const seqs = entries !== null && typeof entries === 'object' ? (entries as Record<string, unknown>)[traceId] : undefined;
  return Array.isArray(seqs) ? seqs.filter((n): n is number => Number.isSafeInteger(n) && n > 0) : [];
}

/** Reads every message of one subject of a stream, oldest first: the last one's sequence bounds the read. */
async function messagesOf(js: JetStreamClient, jsm: JetStreamManager, stream: string, subject: string): Promise<Uint8Array[]> {
  const last = await jsm.direct.getMessage(stream, { last_by_subj: subject });
  if (last === null) return [];
  const consumer = await js.consumers.get(stream, { filter_subjects: subject });
  const messages = await consumer.consume({ max_messages: 256 });
  const out: Uint8Array[] = [];
  try {
    for await (const m of messages) {
      out.push(m.data);
      if (m.seq >= last.seq || m.info.pending === 0) break;
    }
  } finally {
    messages.stop();
  }
  return out;
}

/** The batch sequences the index lists for a trace id, ascending and distinct. */
export async function readTraceIndex(js: JetStreamClient, jsm: JetStreamManager, stream: string, shards: Shards, traceId: string): Promise<number[]> {
  if (!isTraceId(traceId)) return [];
  const seqs = new Set<number>();
  for (const data of await messagesOf(js, jsm, `${stream}_INDEX`, shardSubject(stream, shards.of(traceId)))) {
    for (const seq of seqsIn(data, traceId)) seqs.add(seq);
  }
  return [...seqs].sort((a, b) => a - b);
}

/** Creates the shared durable consumer of the trail when it is missing (every instance calls this). */
export async function ensureIndexer(jsm: JetStreamManager, stream: string): Promise<void> {
  const existing = await jsm.consumers.info(stream, INDEXER).catch(() => undefined);
  if (existing !== undefined) return;
  await jsm.consumers.add(stream, {
    durable_name: INDEXER,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(INDEX_ACK_WAIT_MS),
    max_ack_pending: INDEX_MAX_ACK_PENDING,
  });
}

/** Indexes stored batches as they come, in flushes; `stop()` ends it (what was not flushed is delivered again). */
export class TraceIndexer {
  private pending: PendingEntries;
  private held: JsMsg[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private messages: ConsumerMessages | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly js: JetStreamClient,
    private readonly writer: StreamWriter,
    private readonly stream: string,
    private readonly shards: Shards,
    private readonly logger?: Logger,
  ) {
    this.pending = new PendingEntries(shards);
  }

  /** Starts consuming; resumes where the shared consumer left off. */
  start(): void {
    this.timer = setInterval(() => this.flush(), FLUSH_MS).unref();
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
        this.messages = await (await this.js.consumers.get(this.stream, INDEXER)).consume({ max_messages: 256 });
        if (this.stopped) this.messages.stop();
        for await (const m of this.messages) this.take(m);
      } catch (err) {
        // Batches not acknowledged are delivered again; a new subscription takes the old one's place.
        this.messages?.stop();
        if (!this.stopped) this.logger?.error(`audit index: ${(err as Error).message}; retrying`);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  private take(m: JsMsg): void {
    this.pending.add(traceIdsOfBatch(m.data), m.seq);
    this.held.push(m);
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

  private async write(pending: PendingEntries, held: JsMsg[]): Promise<void> {
    if (this.stopped) return;
    try {
      await Promise.all(pending.messages(this.stream).map((m) => this.writer.append(m.subject, m.data)));
      for (const m of held) m.ack();
    } catch (err) {
      // Left unacknowledged: the server delivers these batches again after the ack wait.
      this.logger?.error(`audit index: ${held.length} batches not indexed yet: ${(err as Error).message}`);
    }
  }
}
