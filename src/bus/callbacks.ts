/**
 * Subscription callbacks that cannot throw into nats.js. An exception thrown in a callback ends
 * the connection's reader: the socket stays open, so nothing reconnects, and the connection
 * reads nothing more until it is dropped as stale minutes later: one discovery answer with a
 * header block nats.js cannot decode would wedge the whole service.
 */
import type { Msg, MsgCallback } from '@nats-io/nats-core';

/** A subscription's callback. */
export type Callback = MsgCallback<Msg>;

/** `callback`, with whatever it throws dropped: one bad message costs itself, not the connection. */
export function guarded(callback: Callback): Callback {
  return (err, msg) => {
    try {
      callback(err, msg);
    } catch {
      // The message could not be handled; the next one can be.
    }
  };
}
