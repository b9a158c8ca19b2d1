/**
 * JetStream streams as the audit trail uses them: created with limits when missing, read by
 * sequence, read whole by subject filter, purged, and consumed by a shared durable consumer
 * (whose deliveries are acknowledged here). The only code that drives JetStream's stream and
 * consumer API (writes go through `StreamWriter`).
 */
import { randomBytes } from 'node:crypto';
import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { createInbox, type NatsConnection, nanos } from '@nats-io/nats-core';
import { UnavailableError } from './errors.js';
import { guarded, subjectMatches } from './subjects.js';

export type { JsMsg } from '@nats-io/jetstream';

/**
 * What a durable consumer delivers, as nats.js pulls it, and `gone`: true once the server says
 * the consumer (or its stream) was deleted, after which it delivers nothing more; false when the
 * deliveries stopped first.
 */
export type Deliveries = ConsumerMessages & { readonly gone: Promise<boolean> };

/** Whether `messages` heard that its consumer is deleted or not found before it stopped. */
async function goneOf(messages: ConsumerMessages): Promise<boolean> {
  for await (const status of messages.status()) {
    if (status.type === 'consumer_deleted' || status.type === 'consumer_not_found') return true;
  }
  return false;
}

/** How long and how much a stream keeps; every field is required. */
export interface StreamLimits {
  /** Age past which messages are dropped, in ms. */
  maxAgeMs: number;
  /** Size past which the oldest messages are dropped, in bytes. */
  maxBytes: number;
  /** Copies kept by a JetStream cluster. */
  replicas: number;
}

/** What a stream holds now: its first and last sequence (both 0 when it never held any) and how many messages. */
export interface StreamBounds {
  first: number;
  last: number;
  messages: number;
}

/** One message of a stream as `readAll` delivers it. */
export interface StreamMessage {
  /** Its stream sequence. */
  seq: number;
  subject: string;
  data: Uint8Array;
}

/** A durable consumer's delivery settings. */
export interface DurableOptions {
  /** How long a delivered message may wait for its acknowledgement before it is delivered again, in ms. */
  ackWaitMs: number;
  /** Messages delivered and not yet acknowledged, at most. */
  maxAckPending: number;
}

/** How a delivered message is acknowledged, later, once its consumer has done its work. */
export interface Acknowledgement {
  ack(): void;
}

/** JetStream's acknowledgement, sent on a delivered message's reply subject. */
const ACK = new TextEncoder().encode('+ACK');

/** Longest `readAll` waits for the server to deliver what it counted, in ms; the default. */
const READ_TIMEOUT_MS = 5_000;

/** The streams of one connection. */
export class StreamStore {
  private constructor(
    readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
  ) {}

  /** Opens the JetStream API of `nc`; fails when the server has no JetStream. */
  static async open(nc: NatsConnection): Promise<StreamStore> {
    return new StreamStore(nc, jetstream(nc), await jetstreamManager(nc));
  }

  /**
   * Creates a stream with these limits (and description) when missing, and brings an existing
   * one's age and size to them; its description back, the one another instance gave it when
   * that one created it first.
   */
  async ensure(name: string, subject: string, limits: StreamLimits, description?: string): Promise<string | undefined> {
    const wanted = { max_age: nanos(limits.maxAgeMs), max_bytes: limits.maxBytes };
    const info = await this.jsm.streams.info(name).catch(() => undefined);
    if (info === undefined) {
      const config = {
        name,
        subjects: [subject],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
        allow_direct: true,
        ...wanted,
        num_replicas: limits.replicas,
        ...(description === undefined ? {} : { description }),
      };
      try {
        return (await this.jsm.streams.add(config)).config.description;
      } catch (err) {
        const raced = await this.jsm.streams.info(name).catch(() => undefined);
        if (raced === undefined) throw err;
        return raced.config.description;
      }
    }
    if (info.config.max_age !== wanted.max_age || info.config.max_bytes !== wanted.max_bytes) {
      return (await this.jsm.streams.update(name, { ...info.config, ...wanted })).config.description;
    }
    return info.config.description;
  }

  /** Does the stream exist (false too when the server cannot be asked)? */
  exists(name: string): Promise<boolean> {
    return this.jsm.streams.info(name).then(
      () => true,
      () => false,
    );
  }

  /** The stream's first and last sequence and how many messages it keeps. */
  async bounds(name: string): Promise<StreamBounds> {
    const { state } = await this.jsm.streams.info(name);
    return { first: state.first_seq, last: state.last_seq, messages: state.messages };
  }

  /** How many messages each subject of `filter` holds now (subjects with none are not listed). */
  async subjectCounts(name: string, filter: string): Promise<Map<string, number>> {
    const { state } = await this.jsm.streams.info(name, { subjects_filter: filter });
    return new Map(Object.entries(state.subjects ?? {}));
  }

  /** One stored message (when it was stored, ms since the epoch), or null when it is gone or never was. */
  async message(name: string, seq: number): Promise<{ time: number; data: Uint8Array } | null> {
    const m = await this.jsm.direct.getMessage(name, { seq });
    return m === null ? null : { time: m.time.getTime(), data: m.data };
  }

  /** Removes the messages of `subject` below sequence `below`. */
  async purge(name: string, subject: string, below: number): Promise<void> {
    await this.jsm.streams.purge(name, { filter: subject, seq: below });
  }

  /** Creates a durable consumer of every message of the stream, acknowledged one by one, when it is missing. */
  async ensureDurable(stream: string, durable: string, options: DurableOptions): Promise<void> {
    const existing = await this.jsm.consumers.info(stream, durable).catch(() => undefined);
    if (existing !== undefined) return;
    await this.jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(options.ackWaitMs),
      max_ack_pending: options.maxAckPending,
    });
  }

  /** The stream sequence up to which a durable consumer has every message acknowledged. */
  async ackFloor(stream: string, durable: string): Promise<number> {
    return (await this.jsm.consumers.info(stream, durable)).ack_floor.stream_seq;
  }

  /** Deletes a consumer; one that is gone already is no failure. */
  async deleteConsumer(stream: string, name: string): Promise<void> {
    await this.jsm.consumers.delete(stream, name).catch(() => undefined);
  }

  /**
   * The acknowledgement of a message a durable consumer delivered: `+ACK` on its reply subject,
   * holding that subject and not the message, so a consumer that acknowledges later keeps none
   * of its data alive. A message from a client that gives no reply subject is held as it came.
   */
  acknowledgementOf(m: JsMsg): Acknowledgement {
    const reply = (m as { reply?: unknown }).reply;
    if (typeof reply !== 'string' || reply === '') return m;
    return { ack: () => this.nc.publish(reply, ACK) };
  }

  /** Pulls from a durable consumer, up to `maxMessages` buffered. */
  async consume(stream: string, durable: string, maxMessages: number): Promise<Deliveries> {
    const messages = await (await this.js.consumers.get(stream, durable)).consume({ max_messages: maxMessages });
    return Object.assign(messages, { gone: goneOf(messages) });
  }

  /**
   * Reads every message of `filter`, oldest first, as many as there were when it began. An
   * ephemeral push consumer with no acks delivers them to a plain subscription: a JetStream
   * client's per-message objects cost ~100 µs of CPU each, a plain delivery a few. All or
   * nothing: a read that runs out of time, or misses a delivery, fails `UnavailableError` (a
   * reader that took part of the messages for all of them would act on what it never read).
   */
  async readAll(
    stream: string,
    filter: string,
    { timeoutMs = READ_TIMEOUT_MS }: { timeoutMs?: number } = {},
  ): Promise<StreamMessage[]> {
    const inbox = createInbox();
    const out: StreamMessage[] = [];
    let lastDelivered = 0;
    let finish: (whole: boolean) => void = () => {};
    const finished = new Promise<boolean>((resolve) => {
      finish = resolve;
    });
    // Named here, so a delivery can be told from a message someone else sent to the inbox.
    const name = `read-${randomBytes(8).toString('hex')}`;
    // Checked on every delivery too: a burst handled in one turn of the loop starves the timer.
    const deadline = Date.now() + timeoutMs;
    const sub = this.nc.subscribe(inbox, {
      callback: guarded((err, m) => {
        const delivery = err === null ? deliveryOf(m.reply) : undefined;
        if (
          delivery === undefined ||
          delivery.stream !== stream ||
          delivery.consumer !== name ||
          !subjectMatches(filter, m.subject)
        )
          return;
        if (Date.now() > deadline) return finish(false);
        out.push({ seq: delivery.seq, subject: m.subject, data: m.data.slice() });
        lastDelivered = Math.max(lastDelivered, delivery.consumerSeq);
        if (delivery.pending === 0) finish(true);
      }),
    });
    let consumer: string | undefined;
    const timer = setTimeout(() => finish(false), timeoutMs);
    try {
      const info = await this.jsm.consumers.add(stream, {
        name,
        deliver_subject: inbox,
        filter_subject: filter,
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
          `${stream} could not be read whole (${filter}: ${out.length} messages by ${timeoutMs} ms); try again`,
        );
      }
      return out.sort((a, b) => a.seq - b.seq);
    } finally {
      clearTimeout(timer);
      sub.unsubscribe();
      if (consumer !== undefined) void this.deleteConsumer(stream, consumer);
    }
  }
}

/**
 * A JetStream delivery's stream, consumer, stream sequence, consumer sequence and the messages
 * still to come, from its `$JS.ACK…` reply subject (the JetStream client parses it only for its
 * own consumers' messages).
 */
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
