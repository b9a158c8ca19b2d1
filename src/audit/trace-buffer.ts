/**
 * The recent call events one instance heard, kept in memory: what `system.traces` answers from
 * when there is no JetStream.
 */
import { type CallEvent, decodeCallEvents, eventsIn } from './events.js';
import { filterOf, limitOf, matches, type TraceQuery, type TraceQueryReply } from './query.js';

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
    return { events: found.slice(0, limitOf(q)), matched: found.length, kept: this.live };
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
