/**
 * Audit events of calls, published on `system.dispatcher.events.call`. Events are gathered
 * for one turn of the event loop and sent as one message holding an array: at light load that
 * is one event a message; under load it keeps the audit trail from doubling the message rate.
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { encodeBody } from '../bus/codec.js';
import { eventSubject, Mounts } from '../bus/subjects.js';
import type { CallEvent } from './types.js';

/** Subject of the audit events. */
export const CALL_EVENTS = eventSubject(Mounts.Dispatcher, 'call');

/** Most events in one message. */
const MAX_BATCH = 256;

/** Buffers events for one event-loop turn, then publishes them as one array. */
export class AuditLog {
  private batch: CallEvent[] = [];
  private scheduled = false;

  constructor(private readonly nc: NatsConnection) {}

  record(event: CallEvent): void {
    this.batch.push(event);
    if (this.batch.length >= MAX_BATCH) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Publishes what is buffered now. */
  flush(): void {
    this.scheduled = false;
    if (this.batch.length === 0) return;
    const events = this.batch;
    this.batch = [];
    try {
      this.nc.publish(CALL_EVENTS, encodeBody(events));
    } catch {
      // Events lost to a closed connection must not fail the calls they describe.
    }
  }
}
