/** The registry's change events: `system.tools.events.changed`, one per registration change. */
import type { NatsConnection } from '@nats-io/nats-core';
import { subscribeEvents } from '../bus/events.js';
import { eventSubject, Mounts } from '../bus/subjects.js';
import type { ChangedEvent } from './types.js';

/** Subject of the registry's change events. */
export const CHANGED_EVENTS = eventSubject(Mounts.Tools, 'changed');

/**
 * Calls `onChange` for every change of the registry; returns a function that stops watching.
 * A message that is no `{key, change, revision}` is passed over: where agents import these events
 * (deploy/nats.conf's AGENTS account), one agent may name this subject as the reply subject of its
 * own request, and the service's answer lands here for every agent of that account.
 */
export function watchRegistry(nc: NatsConnection, onChange: (event: ChangedEvent) => void): () => void {
  return subscribeEvents<unknown>(nc, CHANGED_EVENTS, (event) => {
    if (isChangedEvent(event)) onChange(event);
  });
}

const CHANGES: ReadonlySet<unknown> = new Set<ChangedEvent['change']>(['registered', 'updated', 'unregistered']);

/** Is it a change event, `{key: string, change, revision: number}`? */
function isChangedEvent(event: unknown): event is ChangedEvent {
  if (event === null || typeof event !== 'object') return false;
  const { key, change, revision } = event as Record<string, unknown>;
  return typeof key === 'string' && CHANGES.has(change) && Number.isSafeInteger(revision);
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
