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
