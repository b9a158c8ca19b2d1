/** Helpers for tests that talk to the shared server: connections that close themselves, unique names. */
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, inject } from 'vitest';
import { type ConnectOptions, connectBus } from '../../src/bus/connect.js';
import type { LaneNats } from './global-setup.js';
import { laneOfWorker } from './lanes.js';

let counter = 0;

/** The shared server of this file's lane: no other file runs on it while this one does. */
function laneNats(): LaneNats {
  const lanes = inject('natsLanes');
  const lane = lanes[laneOfWorker(lanes.length, process.env.VITEST_POOL_ID)];
  if (lane === undefined) throw new Error('no shared NATS server: run this file in the integration or system project');
  return lane;
}

/** The URL of the shared server of this file's lane (what `NATS_URL` of a spawned process says). */
export function sharedNatsUrl(): string {
  return laneNats().url;
}

/** Where this file's shared server is and the credentials it demands (a NATS container demands some). */
export function sharedNats(): ConnectOptions {
  const { url, user, pass } = laneNats();
  return { servers: url, ...(user !== undefined && { user }), ...(pass !== undefined && { pass }) };
}

/** `NATS_USER`/`NATS_PASSWORD` for a process spawned against `url` when that is this file's shared server. */
export function sharedNatsEnv(url: string): Record<string, string> {
  const { url: shared, user, pass } = laneNats();
  if (url !== shared) return {};
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
