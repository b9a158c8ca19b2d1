/** Events on the bus: MessagePack bodies published to `<mount>.events.<name>`, read by plain subscriptions. */

import type { NatsConnection } from '@nats-io/nats-core';
import { decodeBody } from './codec.js';
import { guarded } from './subjects.js';

/**
 * Calls `onEvent` with each decoded event on `subject`; returns a function that stops. Unreadable
 * events are skipped.
 */
export function subscribeEvents<T>(nc: NatsConnection, subject: string, onEvent: (event: T) => void): () => void {
  return subscribeEventData(nc, subject, (data) => {
    let event: T;
    try {
      event = decodeBody(data) as T;
    } catch {
      return;
    }
    onEvent(event);
  });
}

/**
 * Calls `onData` with each event message's body, undecoded: for consumers that keep events
 * and read few of them (decoding on arrival would cost more than the reads).
 */
export function subscribeEventData(
  nc: NatsConnection,
  subject: string,
  onData: (data: Uint8Array) => void,
): () => void {
  const sub = nc.subscribe(subject, {
    callback: guarded((err, msg) => {
      if (err === null) onData(msg.data);
    }),
  });
  return () => sub.unsubscribe();
}
