/** Helpers for tests that talk to the shared server: connections that close themselves, unique names. */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, inject } from 'vitest';
import { connectBus } from '../../src/bus/connect.js';

let counter = 0;

/** A connection to the run's server, drained after the file's tests. */
export async function testConnection(): Promise<NatsConnection> {
  const nc = await connectBus({ servers: inject('natsUrl'), name: 'test' });
  afterAll(async () => {
    if (!nc.isClosed()) await nc.drain();
  });
  return nc;
}

/** A mount name no other test uses, for tests that mount their own targets. */
export function uniqueMount(prefix = 'test'): string {
  return `${prefix}.m${process.pid}x${counter++}`;
}
