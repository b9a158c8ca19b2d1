/**
 * The durable audit trail at scale (not part of `npm test` or `npm run bench`; CPU-heavy):
 * stores EVENTS call events in a nats-server of its own, in batches of BATCH as a loaded
 * dispatcher sends them, lets one instance index them, then times `system.traces` queries by
 * trace id (and, for comparison, a page by tool and a time window). Then the index's worst
 * case: WORST index messages of one trace each (what a trail of one call per flush leaves
 * after WORST calls), merged as the indexer merges them, and lookups by trace id over them.
 *
 *   npm run build && node dist/bench/audit-scale.js [events=1000000] [worst=300000]
 */

import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { CallEvent } from '../src/audit/events.js';
import { MERGE_AT, mergeShard } from '../src/audit/indexer.js';
import { AuditLog } from '../src/audit/log.js';
import { queryBatches, type TraceQuery } from '../src/audit/query.js';
import { SHARDS, Shards } from '../src/audit/shards.js';
import { AuditStream } from '../src/audit/stream.js';
import { connectBus } from '../src/bus/connect.js';
import { StreamStore } from '../src/bus/stream-store.js';
import { StreamWriter } from '../src/bus/stream-writer.js';
import { indexStreamName, indexShardSubject as shardSubject } from '../src/bus/subjects.js';
import { startNatsProcess } from '../test/harness/nats-server.js';

const EVENTS = Number(process.argv[2]) || 1_000_000;
/** Events per published message: 20,000 calls a second batched by 5 ms. */
const BATCH = 100;
/** Traces in progress at once; each makes CALLS calls, one per batch, so its events spread over CALLS batches. */
const ACTIVE = 100;
const CALLS = 5;
const QUERIES = 1000;
const WORST = Number(process.argv[3]) || 300_000;

const traceIdOfEvent = (k: number) =>
  (Math.floor(k / (ACTIVE * CALLS)) * ACTIVE + (k % ACTIVE) + 1).toString(16).padStart(32, '0');

function event(k: number, at: string): CallEvent {
  return {
    callId: `call_${k}`,
    name: k % 3 === 0 ? 'search' : 'read_file',
    target: 'app.things',
    op: '$do',
    session: `session-${k % 1000}`,
    principal: 'agent@example',
    traceparent: `00-${traceIdOfEvent(k)}-${(k % 0xffffffff).toString(16).padStart(16, '0')}-01`,
    outcome: k % 50 === 0 ? 'error' : 'ok',
    ...(k % 50 === 0 ? { code: 'timeout' } : {}),
    durationMs: 1.25,
    attempts: 1,
    argumentsDigest: 'a1b2c3d4e5f60718',
    argumentsBytes: 42,
    at,
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] as number;
}

async function timeQueries(
  audit: AuditStream,
  label: string,
  queries: TraceQuery[],
  check: (n: number) => boolean,
): Promise<void> {
  const times: number[] = [];
  for (const q of queries) {
    const started = performance.now();
    const reply = await queryBatches(audit, q);
    times.push(performance.now() - started);
    if (!check(reply.events.length))
      throw new Error(`${label}: ${reply.events.length} events for ${JSON.stringify(q)}`);
  }
  times.sort((a, b) => a - b);
  console.log(
    `${label}: ${queries.length} queries, p50 ${percentile(times, 50).toFixed(2)} ms, p90 ${percentile(times, 90).toFixed(2)} ms, p99 ${percentile(times, 99).toFixed(2)} ms`,
  );
}

async function main(): Promise<void> {
  const server = await startNatsProcess();
  const nc = await connectBus({ servers: server.url });
  try {
    const audit = await AuditStream.open(nc, { stream: 'BENCH_AUDIT' });
    const log = new AuditLog(nc);
    const started = performance.now();
    const at = new Date().toISOString();
    for (let k = 0; k < EVENTS; k++) {
      log.record(event(k, at));
      if (k % BATCH === BATCH - 1) log.flush();
      if (k % 100_000 === 99_999) await nc.flush();
    }
    log.flush();
    await nc.flush();
    const bounds = await audit.bounds();
    console.log(
      `stored ${EVENTS} events in ${bounds.messages} messages in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );

    const indexing = performance.now();
    const stop = await audit.startIndexer();
    while ((await audit.indexedThrough()) < bounds.last) await new Promise((r) => setTimeout(r, 500));
    stop();
    const indexSeconds = (performance.now() - indexing) / 1000;
    console.log(
      `indexed ${bounds.messages} batches (${EVENTS / CALLS} traces) in ${indexSeconds.toFixed(1)} s: ${(EVENTS / indexSeconds).toFixed(0)} events/s`,
    );

    // Trace ids of random events: each trace has CALLS events.
    const randomTraces = Array.from({ length: QUERIES }, () => ({
      traceId: traceIdOfEvent(Math.floor(Math.random() * EVENTS)),
    }));
    await timeQueries(audit, 'by trace id', randomTraces, (n) => n === CALLS);
    await timeQueries(
      audit,
      'by tool, newest page of 50',
      Array.from({ length: 100 }, () => ({ tool: 'search' })),
      (n) => n === 50,
    );
    await timeQueries(
      audit,
      'by trace id and a time window',
      randomTraces.slice(0, 100).map((q) => ({ ...q, since: at, until: new Date(Date.now() + 60_000).toISOString() })),
      (n) => n === CALLS,
    );
    // The audit stream's subject is fixed: one trail at a time on a server.
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete('BENCH_AUDIT');
    await jsm.streams.delete(indexStreamName('BENCH_AUDIT'));
    await worstCase(nc);
  } finally {
    await nc.close();
    await server.stop();
  }
}

/**
 * Lookups where every index message lists one trace (a trail of one call per flush), merged as
 * the indexer merges them (a shard's level once it holds MERGE_AT messages).
 */
async function worstCase(nc: NatsConnection): Promise<void> {
  const audit = await AuditStream.open(nc, { stream: 'BENCH_WORST' });
  const jsm = await jetstreamManager(nc);
  const writer = new StreamWriter(nc, 60_000);
  const store = await StreamStore.open(nc);
  const shards = Shards.fromDescription((await jsm.streams.info(indexStreamName('BENCH_WORST'))).config.description);
  const id = (k: number) => ((k * 2654435761) % 2 ** 32).toString(16).padStart(8, '0').repeat(4);
  const written = new Array<number>(SHARDS).fill(0);
  const started = performance.now();
  for (let from = 0; from < WORST; from += 10_000) {
    const writes: Promise<number>[] = [];
    for (let k = from; k < Math.min(WORST, from + 10_000); k++) {
      const shard = shards.of(id(k));
      written[shard] = (written[shard] ?? 0) + 1;
      writes.push(writer.append(shardSubject('BENCH_WORST', shard), Buffer.from(`{"${id(k)}":[${k + 1}]}`)));
    }
    await Promise.all(writes);
    for (let shard = 0; shard < SHARDS; shard++) {
      if ((written[shard] ?? 0) < MERGE_AT) continue;
      written[shard] = 0;
      await mergeShard(store, writer, 'BENCH_WORST', shard, 1);
    }
  }
  writer.close();
  const { state } = await jsm.streams.info(indexStreamName('BENCH_WORST'));
  console.log(
    `worst case: ${WORST} index messages of one trace each, merged into ${state.messages} (~${Math.round(state.messages / SHARDS)} a shard), in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  const times: number[] = [];
  for (let q = 0; q < 200; q++) {
    const k = Math.floor(Math.random() * WORST);
    const t = performance.now();
    const seqs = await audit.batchesOf(id(k));
    times.push(performance.now() - t);
    if (!seqs.includes(k + 1)) throw new Error(`worst case: ${id(k)} not found`);
  }
  times.sort((a, b) => a - b);
  console.log(
    `worst case, index lookup by trace id: 200 lookups, p50 ${percentile(times, 50).toFixed(2)} ms, p90 ${percentile(times, 90).toFixed(2)} ms, p99 ${percentile(times, 99).toFixed(2)} ms`,
  );
}

await main();
