/**
 * `system.traces`: the recent audit events of the dispatcher, kept in memory by each
 * instance (every instance hears every event), queried by trace id, tool, outcome and time.
 * Target of the built-in `trace_query`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { decodeBody } from '../bus/codec.js';
import { traceIdOf } from '../bus/context.js';
import { subscribeEventData } from '../bus/events.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import { CALL_EVENTS } from '../dispatcher/audit.js';
import type { CallEvent } from '../dispatcher/types.js';

/** A `$query` request. */
export interface TraceQuery {
  traceId?: string;
  tool?: string;
  outcome?: 'ok' | 'error';
  /** ISO 8601; events at or after it. */
  since?: string;
  /** ISO 8601; events before it. */
  until?: string;
  /** Default 50. */
  limit?: number;
}

/** Events as they arrived: one batch's MessagePack bytes, decoded on the first query that reads them. */
interface Segment {
  bytes?: Uint8Array;
  events?: CallEvent[];
  /** Events in the batch (read from its array header). */
  count: number;
}

/**
 * The last `capacity` events, oldest dropped first. Batches are kept as the bytes they came
 * in and decoded only when a query reads them: events arrive tens of thousands a second and
 * are read rarely, and decoding each one on arrival (then keeping it as objects until it is
 * overwritten) cost the process ~6 µs of CPU per call, most of it garbage collection.
 */
export class TraceBuffer {
  private segments: Segment[] = [];
  /** Index of the oldest live segment. */
  private head = 0;
  /** Events of the oldest segment already dropped. */
  private skip = 0;
  private live = 0;

  constructor(readonly capacity = 10_000) {}

  /** Adds one decoded event. */
  add(event: CallEvent): void {
    this.push({ events: [event], count: 1 });
  }

  /**
   * Adds a message of `system.dispatcher.events.call` as it came: a MessagePack array of
   * events, or one event. Returns false, keeping nothing, when it is neither.
   */
  addEncoded(bytes: Uint8Array): boolean {
    const count = eventsIn(bytes);
    if (count === undefined) return false;
    if (count > 0) this.push({ bytes: bytes.slice(), count });
    return true;
  }

  get size(): number {
    return this.live;
  }

  /** Matching events, newest first. */
  query(q: TraceQuery): { events: CallEvent[]; matched: number; kept: number } {
    const since = q.since === undefined ? undefined : Date.parse(q.since);
    const until = q.until === undefined ? undefined : Date.parse(q.until);
    const matches: CallEvent[] = [];
    for (let s = this.segments.length - 1; s >= this.head; s--) {
      const events = decoded(this.segments[s] as Segment);
      const first = s === this.head ? this.skip : 0;
      for (let i = events.length - 1; i >= first; i--) {
        const e = events[i] as CallEvent;
        if (e === NOT_AN_EVENT) continue;
        if (q.tool !== undefined && e.name !== q.tool) continue;
        if (q.outcome !== undefined && e.outcome !== q.outcome) continue;
        if (q.traceId !== undefined && traceIdOf(e.traceparent) !== q.traceId) continue;
        const at = Date.parse(e.at);
        if (since !== undefined && !(at >= since)) continue;
        if (until !== undefined && !(at < until)) continue;
        matches.push(e);
      }
    }
    return { events: matches.slice(0, q.limit ?? 50), matched: matches.length, kept: this.live };
  }

  private push(segment: Segment): void {
    this.segments.push(segment);
    this.live += segment.count;
    while (this.live > this.capacity) {
      const oldest = this.segments[this.head] as Segment;
      const excess = this.live - this.capacity;
      const left = oldest.count - this.skip;
      if (excess < left) {
        this.skip += excess;
        this.live -= excess;
      } else {
        this.segments[this.head] = { count: 0 };
        this.head++;
        this.skip = 0;
        this.live -= left;
      }
    }
    if (this.head > 1024 && this.head * 2 > this.segments.length) {
      this.segments = this.segments.slice(this.head);
      this.head = 0;
    }
  }
}

/** The events of a segment, decoded once; entries that are not events are dropped as `watchCalls` drops them. */
function decoded(segment: Segment): CallEvent[] {
  if (segment.events === undefined) {
    let value: unknown;
    try {
      value = decodeBody(segment.bytes as Uint8Array);
    } catch {
      value = [];
    }
    const list = Array.isArray(value) ? value : [value];
    // Dropped entries keep their place, so the live window over the batch stays aligned.
    segment.events = list.slice(0, segment.count).map((e) => (e !== null && typeof e === 'object' ? (e as CallEvent) : NOT_AN_EVENT));
    while (segment.events.length < segment.count) segment.events.push(NOT_AN_EVENT);
    segment.bytes = undefined;
  }
  return segment.events;
}

/** The place of an entry that was not an event; queries skip it. */
const NOT_AN_EVENT: CallEvent = { callId: '', name: '', outcome: 'error', durationMs: 0, at: '' };

/**
 * How many events a message holds, from its MessagePack header: an array's length, 1 for a map.
 * Undefined when it is neither, or claims more events than it has bytes (each takes at least one).
 */
export function eventsIn(bytes: Uint8Array): number | undefined {
  const first = bytes[0];
  if (first === undefined) return undefined;
  if ((first >= 0x80 && first <= 0x8f) || first === 0xde || first === 0xdf) return 1; // one event, a map
  let count: number;
  let header: number;
  if (first >= 0x90 && first <= 0x9f)
    [count, header] = [first - 0x90, 1]; // fixarray
  else if (first === 0xdc && bytes.length >= 3)
    [count, header] = [(bytes[1] as number) * 0x100 + (bytes[2] as number), 3]; // array 16
  else if (first === 0xdd && bytes.length >= 5)
    [count, header] = [new DataView(bytes.buffer, bytes.byteOffset, 5).getUint32(1), 5]; // array 32
  else return undefined;
  return count <= bytes.length - header ? count : undefined;
}

/** Builds the `system.traces` mount; it starts listening at once. */
export function tracesMount(nc: NatsConnection, options: { capacity?: number } = {}): { mount: Mount; stop(): void } {
  const buffer = new TraceBuffer(options.capacity);
  const stop = subscribeEventData(nc, CALL_EVENTS, (data) => buffer.addEncoded(data));
  const mount = new Mount(nc, {
    name: Mounts.Traces,
    version: '0.1.0',
    description: 'Recent tool calls made through the dispatcher.',
    ops: {
      $query: {
        description: 'Recent tool calls, newest first, by trace id, tool, outcome or time.',
        request: SchemaId.TraceQueryRequest,
        response: SchemaId.TraceQueryReply,
        handle: (q: TraceQuery) => buffer.query(q),
      },
    },
  });
  return { mount, stop };
}
