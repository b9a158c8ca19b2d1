/**
 * Audit events of calls, published on `system.dispatcher.events.call`. Events are gathered for
 * at most `AUDIT_FLUSH_MS` (or `MAX_BATCH` events) and sent as one message holding an array, so the
 * audit trail neither doubles the message rate under load nor costs a socket write per call
 * when calls come one at a time (a message per call would cost ~45 µs of CPU per call).
 */
import type { NatsConnection } from '@nats-io/nats-core';
import { subscribeEventData } from '../bus/events.js';
import { eventSubject, Mounts } from '../bus/subjects.js';
import { observeCall } from '../telemetry/calls.js';
import { type CallEvent, decodeCallEvents, EventBatch } from './events.js';
import { TrailShare, type TrailShareOptions } from './share.js';

/** Subject of the audit events. */
export const CALL_EVENTS = eventSubject(Mounts.Dispatcher, 'call');
/**
 * Subject of the audit events of principals past their share of the trail (`share.ts`), stored in
 * the overflow stream.
 */
export const OVERFLOW_CALL_EVENTS = eventSubject(Mounts.Dispatcher, 'call.overflow');

/**
 * Most events in one message (~330 KB). Every message of the trail costs nats-server a store, a
 * delivery to the trace-id indexer and an acknowledgement, and the writer and the indexer a
 * message each, whatever its size: fewer, larger batches make the trail cheaper per call. At
 * 13,000 calls a second (`bench/indexer-cost.ts`, alternated), batches of 100 ms (so of 1,024
 * events and the rest) cost the writer, nats-server and the indexer 11.6–12.4 µs of CPU a call,
 * batches of 20 ms 16.0–18.6. A lookup by trace id decodes every batch the index names, ~3 ms
 * for 1,024 events and ~7 for 2,048: the bound keeps the largest batch a lookup decodes as it was.
 */
const MAX_BATCH = 1024;
/**
 * Longest an event waits to be published, in ms: what a watcher of calls waits at most beyond the
 * call, and what a process killed outright loses (one that stops flushes first).
 */
export const AUDIT_FLUSH_MS = 100;

/** Told of every call as it ends, before its event is batched; must not throw. */
export type CallObserver = (event: CallEvent) => void;

/**
 * What sees each call event in process: none until telemetry is on (`observeWithTelemetry`,
 * which a dispatcher runs when an OpenTelemetry SDK is registered as it is made). Add to it to
 * watch calls without a subscription.
 */
export const callObservers: CallObserver[] = [];

/** Tells every call's event to its OpenTelemetry span and metrics from now on (once, however often called). */
export function observeWithTelemetry(): void {
  if (!callObservers.includes(observeCall)) callObservers.push(observeCall);
}

/**
 * Encodes each event as it comes into the batch of its subject (the trail's, or the overflow's
 * for a principal past its share), and publishes a batch after `AUDIT_FLUSH_MS`, at `MAX_BATCH`
 * events, or before it would pass the server's `max_payload`.
 */
export class AuditLog {
  private readonly trail = new EventBatch();
  private readonly overflow = new EventBatch();
  private timer: NodeJS.Timeout | undefined;
  private readonly share: TrailShare | undefined;

  /** With `share`, each principal's events past its share of the trail go to `OVERFLOW_CALL_EVENTS`. */
  constructor(
    private readonly nc: NatsConnection,
    share?: TrailShareOptions,
  ) {
    this.share = share === undefined ? undefined : new TrailShare(share);
  }

  /** Tells the observers (unless `observed` is false: no call's event), then batches the event for publishing. */
  record(event: CallEvent, observed = true): void {
    if (observed) this.observe(event);
    const bytes = this.trail.add(event);
    if (this.share === undefined || this.share.admit(event.principal, bytes)) this.fit(this.trail, event, CALL_EVENTS);
    else {
      this.trail.dropLast();
      this.overflow.add(event);
      this.fit(this.overflow, event, OVERFLOW_CALL_EVENTS);
    }
    if (this.timer === undefined && (this.trail.count > 0 || this.overflow.count > 0)) {
      this.timer = setTimeout(() => this.flush(), AUDIT_FLUSH_MS);
      this.timer.unref();
    }
  }

  /** Tells the observers of a call whose event is not published (a refusal counted into a summary). */
  observe(event: CallEvent): void {
    for (const observe of callObservers) {
      try {
        observe(event);
      } catch {
        // Telemetry must not fail the call it describes.
      }
    }
  }

  /** Publishes what is buffered now. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.trail.count > 0) this.publish(this.trail.take(), CALL_EVENTS);
    if (this.overflow.count > 0) this.publish(this.overflow.take(), OVERFLOW_CALL_EVENTS);
  }

  /**
   * After an event was added to `batch`: publishes the events before it when with it the batch
   * would pass the server's `max_payload` (a server set lower than the default, or events with
   * long identities: a batch is never lost whole for the size of some of its events), and the
   * batch with it once it holds `MAX_BATCH`.
   */
  private fit(batch: EventBatch, event: CallEvent, subject: string): void {
    const max = this.nc.info?.max_payload ?? Number.POSITIVE_INFINITY;
    if (batch.size > max && batch.count > 1) {
      batch.dropLast();
      this.publish(batch.take(), subject);
      batch.add(event);
    }
    if (batch.count >= MAX_BATCH) this.publish(batch.take(), subject);
  }

  private publish(data: Uint8Array, subject: string): void {
    try {
      this.nc.publish(subject, data);
    } catch {
      // Events lost to a closed connection (or one event over max_payload) must not fail the calls they describe.
    }
  }
}

let lastMs = 0;
let lastIso = '';

/** The time now in ISO 8601: one `Date` a millisecond, however many calls end in it (0.65 µs each). */
export function isoNow(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}

/**
 * Calls `onEvent` for every call event, one at a time, whatever batch it came in, the overflow's
 * (`OVERFLOW_CALL_EVENTS`) included; returns a function that stops.
 */
export function watchCalls(nc: NatsConnection, onEvent: (event: CallEvent) => void): () => void {
  return watchCallBatches(nc, (data) => {
    for (const e of decodeCallEvents(data)) if (e !== undefined) onEvent(e);
  });
}

/** Calls `onBatch` with every message of call events as it came, on the trail's subject and the overflow's. */
export function watchCallBatches(nc: NatsConnection, onBatch: (data: Uint8Array) => void): () => void {
  const stops = [subscribeEventData(nc, CALL_EVENTS, onBatch), subscribeEventData(nc, OVERFLOW_CALL_EVENTS, onBatch)];
  return () => {
    for (const stop of stops) stop();
  };
}
