/**
 * `system.traces`: the recent audit events of the dispatcher, kept in memory by each
 * instance (every instance hears every event), queried by trace id, tool, outcome and time.
 * Target of the built-in `trace_query`.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { traceIdOf } from '../bus/context.js';
import { Mount } from '../bus/mount.js';
import { Mounts } from '../bus/subjects.js';
import { SchemaId } from '../contracts/schemas.js';
import { watchCalls } from '../dispatcher/audit.js';
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

/** The last `capacity` events, oldest overwritten first. */
export class TraceBuffer {
  private readonly events: CallEvent[] = [];
  private next = 0;

  constructor(readonly capacity = 10_000) {}

  add(event: CallEvent): void {
    if (this.events.length < this.capacity) this.events.push(event);
    else this.events[this.next] = event;
    this.next = (this.next + 1) % this.capacity;
  }

  get size(): number {
    return this.events.length;
  }

  /** Matching events, newest first. */
  query(q: TraceQuery): { events: CallEvent[]; matched: number; kept: number } {
    const since = q.since === undefined ? undefined : Date.parse(q.since);
    const until = q.until === undefined ? undefined : Date.parse(q.until);
    const matches: CallEvent[] = [];
    const n = this.events.length;
    for (let i = 1; i <= n; i++) {
      const e = this.events[(this.next - i + n) % n] as CallEvent;
      if (q.tool !== undefined && e.name !== q.tool) continue;
      if (q.outcome !== undefined && e.outcome !== q.outcome) continue;
      if (q.traceId !== undefined && traceIdOf(e.traceparent) !== q.traceId) continue;
      const at = Date.parse(e.at);
      if (since !== undefined && !(at >= since)) continue;
      if (until !== undefined && !(at < until)) continue;
      matches.push(e);
    }
    return { events: matches.slice(0, q.limit ?? 50), matched: matches.length, kept: n };
  }
}

/** Builds the `system.traces` mount; it starts listening at once. */
export function tracesMount(nc: NatsConnection, options: { capacity?: number } = {}): { mount: Mount; stop(): void } {
  const buffer = new TraceBuffer(options.capacity);
  const stop = watchCalls(nc, (e) => buffer.add(e));
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
