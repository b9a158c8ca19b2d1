/**
 * The trace-id index of the audit trail, written per flush, not per trace: the indexer reads
 * stored batches from a durable consumer, collects trace id → batch sequences for a moment (up
 * to 512 batches or 500 ms), and stores them as one message per touched shard on a stream of
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

import { randomBytes } from 'node:crypto';
import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { createInbox, type NatsConnection, nanos } from '@nats-io/nats-core';
import { guarded } from '../bus/callbacks.js';
import { decodeBody } from '../bus/codec.js';
import { traceIdOf } from '../bus/context.js';
import { UnavailableError } from '../bus/errors.js';
import type { Logger } from '../bus/log.js';
import type { StreamWriter } from '../bus/stream-writer.js';
import type { CallEvent } from '../dispatcher/types.js';

/** Shards of the index: a lookup reads one, a flush writes at most one message to each. */
const SHARD_BITS = 8;
export const SHARDS = 2 ** SHARD_BITS;
/** The durable consumer every instance shares to index the trail: each batch is indexed once. */
export const INDEXER = 'audit-trace-index';
/** How long a delivered batch may wait for its entries to be stored before it is delivered again. */
const INDEX_ACK_WAIT_MS = 30_000;
/** Batches delivered and not yet acknowledged, at most (a stalled writer stalls the indexer there). */
const INDEX_MAX_ACK_PENDING = 2048;
/** A flush after this many batches, or after `FLUSH_MS`, whichever comes first. */
const FLUSH_BATCHES = 512;
const FLUSH_MS = 500;
/** Largest index message: a shard's entries of one flush are split past it. */
const MAX_INDEX_MESSAGE = 256 * 1024;
const TRACE_ID = /^[0-9a-f]{32}$/;

/**
 * Which shard lists a trace id: the trace id's four 32-bit words, each multiplied by a random
 * odd word of the trail's key and folded in through murmur3's finaliser (an avalanche: every
 * input bit moves every output bit). Plain multiply-shift kept the structure of ids that differ
 * only in their last digits: under some keys 2,000 of them met half the shards. Without the key,
 * where a chosen trace id lands is a guess; with it (every instance reads it from the index
 * stream's description), the same everywhere. Not a cryptographic hash: a tenth of SHA-256's cost.
 */
export class Shards {
  private readonly multipliers: number[];

  private constructor(readonly key: string) {
    const words = /^[0-9a-f]{32}$/.test(key) ? key : '0'.repeat(32);
    this.multipliers = [0, 8, 16, 24].map((at) => Number.parseInt(words.slice(at, at + 8), 16) | 1);
  }

  /** A new random key. */
  static create(): Shards {
    return new Shards(randomBytes(16).toString('hex'));
  }

  /** The key an index stream's description names (`shard key <32 hex>`); none: a fixed one. */
  static fromDescription(description: string | undefined): Shards {
    return new Shards(/shard key ([0-9a-f]{32})/.exec(description ?? '')?.[1] ?? '');
  }

  /** The description an index stream is created with. */
  describe(stream: string): string {
    return `Trace-id index of the audit trail ${stream} (shard key ${this.key})`;
  }

  /** The shard of a trace id (32 hex digits; see `isTraceId`). */
  of(traceId: string): number {
    const [a, b, c, d] = this.multipliers as [number, number, number, number];
    let h = fmix32(Math.imul(a, Number.parseInt(traceId.slice(0, 8), 16)));
    h = fmix32(h ^ Math.imul(b, Number.parseInt(traceId.slice(8, 16), 16)));
    h = fmix32(h ^ Math.imul(c, Number.parseInt(traceId.slice(16, 24), 16)));
    h = fmix32(h ^ Math.imul(d, Number.parseInt(traceId.slice(24, 32), 16)));
    return h >>> (32 - SHARD_BITS);
  }
}

/** murmur3's 32-bit finaliser: a bijection in which every input bit flips each output bit about half the time. */
function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A shard's messages of one level merge into one of the next level once it holds this many. */
export const MERGE_AT = 32;

/** The subject of one level of one shard of a trail's index (level 0: what a flush writes). */
export function shardSubject(stream: string, shard: number, level = 0): string {
  return `system.dispatcher.audit.${stream}.${shard}.${level}`;
}

/** Every level of one shard. */
function shardFilter(stream: string, shard: number): string {
  return `system.dispatcher.audit.${stream}.${shard}.*`;
}

/** Every subject of a trail's index (the index stream's subjects). */
export function indexSubjects(stream: string): string {
  return `system.dispatcher.audit.${stream}.>`;
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

/** `traceparent` as MessagePack writes a key of 11 bytes (fixstr), the needle of `traceIdsOfBatch`. */
const TRACEPARENT_KEY = Buffer.from([0xab, ...Buffer.from('traceparent')]);

/**
 * The distinct trace ids of a batch's events. A MessagePack batch is not decoded: every
 * `traceparent` key is found in its bytes and the string after it read (a tenth of decoding
 * the events). A key-like run of bytes inside some other string can only add a trace id, which
 * costs a lookup a batch to read and filter out; a real key is never skipped. A body that does
 * not start as an array or a map is decoded, as the queries decode it.
 */
export function traceIdsOfBatch(data: Uint8Array): Set<string> {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (!startsMessagePackArray(bytes)) return traceIdsDecoded(data);
  const ids = new Set<string>();
  for (let at = bytes.indexOf(TRACEPARENT_KEY); at >= 0; at = bytes.indexOf(TRACEPARENT_KEY, at + 1)) {
    const id = traceIdOf(shortStringAt(bytes, at + TRACEPARENT_KEY.length));
    if (id !== undefined) ids.add(id);
  }
  return ids;
}

/** An array (or a single event: a map) in MessagePack, as the dispatcher publishes. */
function startsMessagePackArray(bytes: Buffer): boolean {
  const first = bytes[0];
  return (
    first !== undefined &&
    ((first & 0xf0) === 0x90 ||
      (first & 0xf0) === 0x80 ||
      first === 0xdc ||
      first === 0xdd ||
      first === 0xde ||
      first === 0xdf)
  );
}

/** The MessagePack string at `at` if it is one of at most 255 bytes (a traceparent is 55). */
function shortStringAt(bytes: Buffer, at: number): string | undefined {
  const header = bytes[at];
  if (header === undefined) return undefined;
  const [start, length] =
    (header & 0xe0) === 0xa0 ? [at + 1, header & 0x1f] : header === 0xd9 ? [at + 2, bytes[at + 1]] : [0, undefined];
  if (length === undefined || start + length > bytes.length) return undefined;
  return bytes.toString('latin1', start, start + length);
}

function traceIdsDecoded(data: Uint8Array): Set<string> {
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

  /** The shards that have entries. */
  touched(): Iterable<number> {
    return this.shards.keys();
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
      for (const data of encodeEntries(traces, maxBytes)) out.push({ subject, data });
    }
    return out;
  }
}

/** Entries as index messages: `{"<trace id>": [seq, …], …}`, a new message past `maxBytes`. */
export function encodeEntries(entries: Map<string, Iterable<number>>, maxBytes = MAX_INDEX_MESSAGE): Uint8Array[] {
  const out: Uint8Array[] = [];
  let parts: string[] = [];
  let length = 2;
  for (const [id, seqs] of entries) {
    const part = `"${id}":[${[...seqs].join(',')}]`;
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
    let entries: unknown;
    try {
      entries = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString());
    } catch {
      continue;
    }
    if (entries === null || typeof entries !== 'object') continue;
    for (const [id, seqs] of Object.entries(entries)) {
      if (!isTraceId(id) || !Array.isArray(seqs)) continue;
      let set = merged.get(id);
      for (const seq of seqs) {
        if (!Number.isSafeInteger(seq) || seq < floor || seq < 1) continue;
        if (set === undefined) merged.set(id, (set = new Set()));
        set.add(seq);
      }
    }
  }
  return merged;
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
  const seqs =
    entries !== null && typeof entries === 'object' ? (entries as Record<string, unknown>)[traceId] : undefined;
  return Array.isArray(seqs) ? seqs.filter((n): n is number => Number.isSafeInteger(n) && n > 0) : [];
}

/** One stored message of the index. */
export interface IndexMessage {
  seq: number;
  level: number;
  data: Uint8Array;
}

/** Longest a shard read waits for the server to deliver what it counted. */
const READ_TIMEOUT_MS = 5_000;

/**
 * Reads every message of one shard, oldest first, as many as there were when it began (a merge
 * writes its message before it purges what it merged, so nothing is skipped). An ephemeral push
 * consumer with no acks delivers them to a plain subscription: a JetStream client's per-message
 * objects cost ~100 µs of CPU each, a plain delivery a few. All or nothing: a read that runs out
 * of time, or misses a delivery, fails `UnavailableError` (a lookup or a merge that took part of
 * a shard for all of it would miss batches, and a merge would purge what it never read).
 */
export async function readShard(
  nc: NatsConnection,
  jsm: JetStreamManager,
  stream: string,
  shard: number,
  { timeoutMs = READ_TIMEOUT_MS }: { timeoutMs?: number } = {},
): Promise<IndexMessage[]> {
  const index = `${stream}_INDEX`;
  const inbox = createInbox();
  const out: IndexMessage[] = [];
  let lastDelivered = 0;
  let finish: (whole: boolean) => void = () => {};
  const finished = new Promise<boolean>((resolve) => {
    finish = resolve;
  });
  // Named here, so a delivery can be told from a message someone else sent to the inbox.
  const name = `audit-shard-${randomBytes(8).toString('hex')}`;
  const subjects = `system.dispatcher.audit.${stream}.${shard}.`;
  const sub = nc.subscribe(inbox, {
    callback: guarded((err, m) => {
      const delivery = err === null ? deliveryOf(m.reply) : undefined;
      if (
        delivery === undefined ||
        delivery.stream !== index ||
        delivery.consumer !== name ||
        !m.subject.startsWith(subjects)
      )
        return;
      out.push({
        seq: delivery.seq,
        level: Number(m.subject.slice(m.subject.lastIndexOf('.') + 1)),
        data: m.data.slice(),
      });
      lastDelivered = Math.max(lastDelivered, delivery.consumerSeq);
      if (delivery.pending === 0) finish(true);
    }),
  });
  let consumer: string | undefined;
  const timer = setTimeout(() => finish(false), timeoutMs);
  try {
    const info = await jsm.consumers.add(index, {
      name,
      deliver_subject: inbox,
      filter_subject: shardFilter(stream, shard),
      deliver_policy: DeliverPolicy.All,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
    });
    consumer = info.name;
    if (info.num_pending === 0) finish(true);
    // Every delivery, numbered 1… by the consumer, came: none was dropped on the way.
    if (!(await finished) || out.length !== lastDelivered) {
      throw new UnavailableError(
        `the trace index ${index} could not be read whole (shard ${shard}: ${out.length} messages by ${timeoutMs} ms); try again`,
      );
    }
    return out.sort((a, b) => a.seq - b.seq);
  } finally {
    clearTimeout(timer);
    sub.unsubscribe();
    if (consumer !== undefined) void jsm.consumers.delete(index, consumer).catch(() => undefined);
  }
}

/** A JetStream delivery's stream sequence and the messages still to come, from its `$JS.ACK…` reply subject. */
function deliveryOf(
  reply: string | undefined,
): { stream: string; consumer: string; seq: number; consumerSeq: number; pending: number } | undefined {
  if (reply === undefined || !reply.startsWith('$JS.ACK.')) return undefined;
  const tokens = reply.split('.');
  // $JS.ACK.<stream>.<consumer>.<delivered>.<seq>.<consumer seq>.<time>.<pending>, or with
  // <domain>.<account hash> after ACK and a random token at the end (servers 2.10 on).
  const at = tokens.length === 9 ? 2 : 4;
  const seq = Number(tokens[at + 3]);
  const consumerSeq = Number(tokens[at + 4]);
  const pending = Number(tokens[at + 6]);
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(consumerSeq) || !Number.isSafeInteger(pending))
    return undefined;
  return { stream: tokens[at] ?? '', consumer: tokens[at + 1] ?? '', seq, consumerSeq, pending };
}

/** The batch sequences the index lists for a trace id, ascending and distinct. */
export async function readTraceIndex(
  nc: NatsConnection,
  jsm: JetStreamManager,
  stream: string,
  shards: Shards,
  traceId: string,
): Promise<number[]> {
  if (!isTraceId(traceId)) return [];
  const seqs = new Set<number>();
  for (const m of await readShard(nc, jsm, stream, shards.of(traceId))) {
    for (const seq of seqsIn(m.data, traceId)) seqs.add(seq);
  }
  return [...seqs].sort((a, b) => a - b);
}

/**
 * Merges a shard's full levels: each level with MERGE_AT messages or more becomes one message
 * (or a few, past the size bound) of the next level, written first, then the merged ones are
 * purged. Entries of batches gone from the trail (below `floor`) are left out.
 */
export async function mergeShard(
  nc: NatsConnection,
  jsm: JetStreamManager,
  writer: StreamWriter,
  stream: string,
  shard: number,
  floor: number,
) {
  const messages = await readShard(nc, jsm, stream, shard);
  for (let level = 0; messages.some((m) => m.level >= level); level++) {
    const full = messages.filter((m) => m.level === level);
    if (full.length < MERGE_AT) continue;
    const encoded = encodeEntries(
      mergeEntries(
        full.map((m) => m.data),
        floor,
      ),
    );
    const seqs = await Promise.all(encoded.map((data) => writer.append(shardSubject(stream, shard, level + 1), data)));
    const through = Math.max(...full.map((m) => m.seq));
    await jsm.streams.purge(`${stream}_INDEX`, { filter: shardSubject(stream, shard, level), seq: through + 1 });
    for (const [i, data] of encoded.entries()) messages.push({ seq: seqs[i] as number, level: level + 1, data });
  }
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
  /** Level-0 messages this instance wrote per shard since it last merged it; started at random so merges spread over flushes. */
  private readonly written = Array.from({ length: SHARDS }, () => Math.floor(Math.random() * MERGE_AT));

  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly writer: StreamWriter,
    private readonly stream: string,
    private readonly shards: Shards,
    private readonly logger?: Logger,
    /** Creates the index stream and the consumer again where a failure says they are gone. */
    private readonly restore: () => Promise<void> = async () => {},
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
        const messages = await (await this.js.consumers.get(this.stream, INDEXER)).consume({ max_messages: 256 });
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
      await this.restoreQuietly();
      return;
    }
    await this.mergeFull(
      [...pending.touched()].filter((shard) => (this.written[shard] = (this.written[shard] ?? 0) + 1) >= MERGE_AT),
    );
  }

  /** The client keeps pulling from a consumer or stream someone deleted: restore them and consume anew. */
  private async watch(messages: ConsumerMessages): Promise<void> {
    for await (const status of messages.status()) {
      if (status.type !== 'consumer_deleted' && status.type !== 'consumer_not_found') continue;
      await this.restoreQuietly();
      messages.stop();
      return;
    }
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
      const floor = (await this.jsm.streams.info(this.stream)).state.first_seq;
      for (const shard of shards) {
        this.written[shard] = 0;
        await mergeShard(this.nc, this.jsm, this.writer, this.stream, shard, floor);
      }
    } catch (err) {
      this.logger?.error(`audit index: merging shards failed: ${(err as Error).message}`);
    }
  }
}
