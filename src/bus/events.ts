/** Events on the bus: MessagePack bodies published to `<mount>.events.<name>`, read by plain subscriptions. */
import type { NatsConnection } from '@nats-io/nats-core';
import { decodeBody } from './codec.js';

/** Calls `onEvent` with each decoded event on `subject`; returns a function that stops. Unreadable events are skipped. */
export function subscribeEvents<T>(nc: NatsConnection, subject: string, onEvent: (event: T) => void): () => void {
  const sub = nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err !== null) return;
      let event: T;
      try {
        event = decodeBody(msg.data) as T;
      } catch {
        return;
      }
      onEvent(event);
    },
  });
  return () => sub.unsubscribe();
}
