/** Helpers for tests that talk to the shared server: connections that close themselves, unique names. */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, inject } from 'vitest';
import { type ConnectOptions, connectBus } from '../../src/bus/connect.js';

let counter = 0;

/** Where the run's server is and the credentials it demands (a NATS container demands some). */
export function sharedNats(): ConnectOptions {
  return { servers: inject('natsUrl'), ...inject('natsAuth') };
}

/** `NATS_USER`/`NATS_PASSWORD` for a process spawned against `url` when that is the run's server. */
export function sharedNatsEnv(url: string): Record<string, string> {
  if (url !== inject('natsUrl')) return {};
  const { user, pass } = inject('natsAuth') ?? {};
  return { ...(user !== undefined && { NATS_USER: user }), ...(pass !== undefined && { NATS_PASSWORD: pass }) };
}

/** A connection to the run's server, drained after the file's tests. */
export async function testConnection(): Promise<NatsConnection> {
  const nc = await connectBus({ ...sharedNats(), name: 'test' });
  afterAll(async () => {
    if (!nc.isClosed()) await nc.drain();
  });
  return nc;
}

/** A mount name no other test uses, for tests that mount their own targets. */
export function uniqueMount(prefix = 'test'): string {
  return `${prefix}.m${process.pid}x${counter++}`;
}
