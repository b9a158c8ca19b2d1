/** The registry's change events: `system.tools.events.changed`, one per registration change. */
import type { NatsConnection } from '@nats-io/nats-core';
import { subscribeEvents } from '../bus/events.js';
import { eventSubject, Mounts } from '../bus/subjects.js';
import type { ChangedEvent } from './types.js';

/** Subject of the registry's change events. */
export const CHANGED_EVENTS = eventSubject(Mounts.Tools, 'changed');

/** Calls `onChange` for every change of the registry; returns a function that stops watching. */
export function watchRegistry(nc: NatsConnection, onChange: (event: ChangedEvent) => void): () => void {
  return subscribeEvents(nc, CHANGED_EVENTS, onChange);
}

/**
 * Runs `check` after each change of the registry, one at a time: changes that come while a check
 * runs fold into one more check after it. Returns a function that stops watching.
 */
export function recheckOnChange(nc: NatsConnection, check: () => Promise<void>): () => void {
  let running = false;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        await check();
      } while (again);
    } finally {
      running = false;
    }
  };
  return watchRegistry(nc, () => void run());
}
