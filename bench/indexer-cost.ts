/**
 * What the trace-id indexer costs, alone: a nats-server of its own, batches of call events
 * published at a loaded dispatcher's rate (RATE calls a second, one new trace each) by the
 * `AuditLog` of the build in DIR, flushed every BATCH_MS (default: as that build's `AuditLog`
 * flushes, 20 ms for builds that do not say), the indexer of that build consuming them, and the
 * CPU of this process (the indexer and the publisher) and of nats-server per call, over the run
 * and until the index has caught up and gone quiet. The publisher alone is measured first, on a
 * server with no indexer running, and taken off.
 *
 *   npm run build && node dist/bench/indexer-cost.js [dir=dist] [seconds=10] [rate=13000]
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { NatsConnection } from '@nats-io/nats-core';
import { connectBus } from '../src/bus/connect.js';
import { startNatsProcess } from '../test/harness/nats-server.js';
import { processCpu } from './measure.js';

const DIR = resolve(process.argv[2] ?? 'dist');
const SECONDS = Number(process.argv[3]) || 10;
const RATE = Number(process.argv[4]) || 13_000;

const lib = (path: string) => import(pathToFileURL(`${DIR}/src/${path}`).href);
const { AuditStream } = await lib('audit/stream.js');
const { AuditLog, AUDIT_FLUSH_MS } = await lib('audit/log.js');
const FLUSH_MS = Number(process.env.BATCH_MS) || AUDIT_FLUSH_MS || 20;

let k = 0;
function event() {
  k++;
  const hex = k.toString(16).padStart(8, '0');
  return {
    callId: 'c',
    name: 'echo',
    target: 'bench.echo',
    op: '$echo',
    session: undefined,
    principal: undefined,
    traceparent: `00-${hex}a1b2c3d4e5f60718293a4b5c6d7e-${hex}00112233-01`,
    outcome: 'ok',
    code: undefined,
    durationMs: 1.234,
    attempts: 1,
    argumentsDigest: '3c9f2ad0e3f4c5b6a7980112233445566778899aabbccddeeff00112233445566',
    argumentsBytes: 13,
    at: new Date().toISOString(),
  };
}

/** Publishes RATE events a second in batches of FLUSH_MS for SECONDS; resolves when done. */
async function publish(nc: NatsConnection): Promise<number> {
  const log = new AuditLog(nc);
  const perBatch = Math.max(1, Math.round((RATE * FLUSH_MS) / 1000));
  const end = performance.now() + SECONDS * 1000;
  let events = 0;
  while (performance.now() < end) {
    for (let i = 0; i < perBatch; i++) log.record(event(), false);
    log.flush();
    events += perBatch;
    await new Promise((r) => setTimeout(r, FLUSH_MS));
  }
  await nc.flush();
  return events;
}

const cpuOf = (pid: number | undefined) => {
  const own = process.cpuUsage();
  return { self: own.user + own.system, nats: processCpu(pid) };
};

/** One run: a fresh server, the trail opened, the indexer started unless `indexing` is false. */
async function run(indexing: boolean): Promise<{ self: number; nats: number; events: number }> {
  const nats = await startNatsProcess(['-m', '0']);
  const nc = await connectBus({ servers: nats.url, name: 'indexer-cost' });
  const audit = await AuditStream.open(nc, {});
  const stop = indexing ? await audit.startIndexer() : () => {};
  const before = cpuOf(nats.pid);
  const events = await publish(nc);
  const { last } = await audit.bounds();
  if (indexing) while ((await audit.indexedThrough()) < last) await new Promise((r) => setTimeout(r, 100));
  // The merges a flush starts, and whatever else settles.
  await new Promise((r) => setTimeout(r, 1500));
  const after = cpuOf(nats.pid);
  stop();
  await nc.drain();
  await nats.stop();
  return { self: after.self - before.self, nats: after.nats - before.nats, events };
}

const bare = await run(false);
const indexed = await run(true);
const perCall = (us: number, events: number) => (us / events).toFixed(2);
process.stdout.write(
  `${DIR}: ${indexed.events} calls at ${RATE}/s; indexer µs of CPU a call: process ${perCall(indexed.self, indexed.events)} − ${perCall(bare.self, bare.events)} (publisher), nats-server ${perCall(indexed.nats, indexed.events)} − ${perCall(bare.nats, bare.events)} (storing); indexer total ${(indexed.self / indexed.events - bare.self / bare.events + indexed.nats / indexed.events - bare.nats / bare.events).toFixed(2)}\n`,
);
