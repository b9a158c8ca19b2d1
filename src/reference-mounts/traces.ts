/**
 * `system.traces`: the audit events of the dispatcher, queried by trace id, tool, session,
 * principal, outcome and time. Answered from the durable trail (a JetStream stream, the same
 * for every instance) when JetStream is there, else from the recent events this instance
 * heard, kept in memory. Target of the built-in `trace_query`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { type CallEvent, decodeCallEvents, eventsIn } from '../audit/events.js';
import { watchCallBatches } from '../audit/log.js';
import {
  filterOf,
  matches,
  type QueryWatch,
  queryBatches,
  type TraceQuery,
  type TraceQueryReply,
} from '../audit/query.js';
import { AuditStream, type AuditStreamOptions } from '../audit/stream.js';
import { SchemaId } from '../bus/contracts.js';
import type { Logger } from '../bus/log.js';
import { Mount, type OpContext } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { sessionInScope } from './session-scope.js';

export type { TraceQuery, TraceQueryReply } from '../audit/query.js';

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
  query(q: TraceQuery): TraceQueryReply {
    const filter = filterOf(q);
    const found: CallEvent[] = [];
    for (let s = this.segments.length - 1; s >= this.head; s--) {
      const events = decoded(this.segments[s] as Segment);
      const first = s === this.head ? this.skip : 0;
      for (let i = events.length - 1; i >= first; i--) {
        const e = events[i] as CallEvent;
        if (e !== NOT_AN_EVENT && matches(e, filter)) found.push(e);
      }
    }
    return { events: found.slice(0, q.limit ?? 50), matched: found.length, kept: this.live };
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

/** The events of a segment, decoded once (by the parser `watchCalls` uses); entries that are not events are skipped. */
function decoded(segment: Segment): CallEvent[] {
  if (segment.events === undefined) {
    // Dropped entries keep their place, so the live window over the batch stays aligned.
    segment.events = decodeCallEvents(segment.bytes as Uint8Array)
      .slice(0, segment.count)
      .map((e) => e ?? NOT_AN_EVENT);
    while (segment.events.length < segment.count) segment.events.push(NOT_AN_EVENT);
    segment.bytes = undefined;
  }
  return segment.events;
}

/** The place of an entry that was not an event; queries skip it. */
const NOT_AN_EVENT: CallEvent = { callId: '', name: '', outcome: 'error', durationMs: 0, at: '' };

/** Builds the `system.traces` mount over this instance's memory; it starts listening at once. */
export function tracesMount(nc: NatsConnection, options: { capacity?: number } = {}): { mount: Mount; stop(): void } {
  const buffer = new TraceBuffer(options.capacity);
  const stop = watchCallBatches(nc, (data) => buffer.addEncoded(data));
  return {
    mount: tracesMountOver(
      nc,
      (q) => buffer.query(q),
      'Recent tool calls made through the dispatcher, as this instance heard them.',
    ),
    stop,
  };
}

/**
 * Builds the `system.traces` mount over the durable trail, opening (creating) it and
 * indexing it; over memory, said in one logged line, when JetStream does not answer.
 */
export async function durableTracesMount(
  nc: NatsConnection,
  options: AuditStreamOptions & { logger?: Logger; capacity?: number } = {},
): Promise<{ mount: Mount; stop(): void; audit?: AuditStream }> {
  let audit: AuditStream;
  try {
    audit = await AuditStream.open(nc, options);
  } catch (err) {
    options.logger?.error(`system.traces answers from memory only: ${(err as Error).message}`);
    return tracesMount(nc, options);
  }
  const stop = await audit.startIndexer(options.logger);
  return {
    mount: tracesMountOver(
      nc,
      // A scan of the trail reads up to its budget of batches: it reports how far, and stops when cancelled.
      (q, ctx) => queryTrail(audit, q, { signal: ctx.signal, progress: (read, budget) => ctx.progress(read, budget) }),
      'Tool calls made through the dispatcher, from the durable audit trail.',
    ),
    stop,
    audit,
  };
}

/** Cursors of pages of the overflow stream start with this. */
const OVERFLOW_CURSOR = 'o';

/**
 * A page of the trail, then of its overflow stream (the events of principals past their share):
 * the trail's pages first, newest first, then the overflow's; a cursor of the overflow starts `o`.
 */
export async function queryTrail(audit: AuditStream, q: TraceQuery, watch: QueryWatch): Promise<TraceQueryReply> {
  if (q.cursor?.startsWith(OVERFLOW_CURSOR)) return overflowPage(audit, q, q.cursor.slice(1), watch);
  const main = await queryBatches(audit, q, watch);
  const limit = q.limit ?? 50;
  if (main.next !== undefined) return main;
  if (main.events.length >= limit) {
    if ((await audit.overflow.bounds()).messages > 0) main.next = OVERFLOW_CURSOR;
    return main;
  }
  const rest = await overflowPage(audit, { ...q, limit: limit - main.events.length }, undefined, watch);
  const reply: TraceQueryReply = {
    events: main.events.concat(rest.events),
    matched: main.matched + rest.matched,
    kept: main.kept + rest.kept,
  };
  if (rest.next !== undefined) reply.next = rest.next;
  return reply;
}

async function overflowPage(
  audit: AuditStream,
  q: TraceQuery,
  cursor: string | undefined,
  watch: QueryWatch,
): Promise<TraceQueryReply> {
  const page = await queryBatches(
    audit.overflow,
    cursor === undefined || cursor === '' ? { ...q, cursor: undefined } : { ...q, cursor },
    watch,
  );
  if (page.next !== undefined) page.next = OVERFLOW_CURSOR + page.next;
  return page;
}

function tracesMountOver(
  nc: NatsConnection,
  query: (q: TraceQuery, ctx: OpContext) => TraceQueryReply | Promise<TraceQueryReply>,
  description: string,
): Mount {
  return new Mount(nc, {
    name: Mounts.Traces,
    version: '0.2.0',
    description,
    ops: {
      $query: {
        description:
          'Tool calls, newest first, by trace id, tool, session, principal, outcome or time; a page at a time.',
        request: SchemaId.TraceQueryRequest,
        response: SchemaId.TraceQueryReply,
        // A session sees its own calls (and those its grant lets it read); an operator, all.
        handle: (q: TraceQuery, ctx: OpContext) => {
          const session = sessionInScope(q.session, ctx, 'read');
          return query(session === undefined ? q : { ...q, session }, ctx);
        },
      },
    },
  });
}
