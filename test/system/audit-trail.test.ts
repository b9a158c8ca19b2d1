import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallEvent } from '../../src/audit/events.js';
import { MERGE_AT, mergeShard } from '../../src/audit/indexer.js';
import { AuditLog } from '../../src/audit/log.js';
import { queryBatches, type TraceQuery, type TraceQueryReply } from '../../src/audit/query.js';
import { readShard } from '../../src/audit/shard-reader.js';
import { Shards } from '../../src/audit/shards.js';
import type { AuditStream } from '../../src/audit/stream.js';
import { BusClient } from '../../src/bus/client.js';
import { connectBus } from '../../src/bus/connect.js';
import { UnavailableError } from '../../src/bus/errors.js';
import { newTraceparent, traceIdOf } from '../../src/bus/headers.js';
import { StreamStore } from '../../src/bus/stream-store.js';
import { StreamWriter } from '../../src/bus/stream-writer.js';
import { indexStreamName, indexSubjects, indexShardSubject as shardSubject } from '../../src/bus/subjects.js';
import type { ToolResult } from '../../src/dispatcher/types.js';
import { durableTracesMount } from '../../src/reference-mounts/traces.js';
import { eventually } from '../harness/eventually.js';
import { type ProcessNats, startNatsProcess } from '../harness/nats-server.js';
import { type ServiceProcess, startService } from '../harness/service.js';

/** `count` events over `traces` trace ids, two tools, two sessions, two principals, alternating outcomes, 1 ms apart from `start`. */
function makeEvents(count: number, traces: string[], start: number): CallEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    callId: `call-${start}-${i}`,
    name: i % 3 === 0 ? 'alpha' : 'beta',
    target: 'app.things',
    op: '$do',
    session: `s${i % 2}`,
    principal: i % 5 === 0 ? 'alice' : 'bob',
    traceparent: `00-${traces[i % traces.length]}-00000000000000${String(10 + (i % 90))}-01`,
    outcome: i % 4 === 0 ? 'error' : 'ok',
    ...(i % 4 === 0 ? { code: 'timeout' } : {}),
    durationMs: i / 10,
    attempts: 1,
    at: new Date(start + i).toISOString(),
  }));
}

/** What a query must answer, from the events themselves: the matching ones, newest first. */
function expected(events: CallEvent[], q: TraceQuery): CallEvent[] {
  return events
    .filter(
      (e) =>
        (q.traceId === undefined || traceIdOf(e.traceparent) === q.traceId) &&
        (q.tool === undefined || e.name === q.tool) &&
        (q.session === undefined || e.session === q.session) &&
        (q.principal === undefined || e.principal === q.principal) &&
        (q.outcome === undefined || e.outcome === q.outcome) &&
        (q.since === undefined || e.at >= q.since) &&
        (q.until === undefined || e.at < q.until),
    )
    .reverse();
}

/** Every page of a query, followed by its cursors. */
async function allPages(audit: AuditStream, q: TraceQuery): Promise<{ events: CallEvent[]; pages: number }> {
  const events: CallEvent[] = [];
  let pages = 0;
  let reply: TraceQueryReply | undefined;
  do {
    reply = await queryBatches(audit, { ...q, ...(reply?.next === undefined ? {} : { cursor: reply.next }) });
    events.push(...reply.events);
    pages++;
  } while (reply.next !== undefined);
  return { events, pages };
}

const traceIds = Array.from({ length: 7 }, () => traceIdOf(newTraceparent()) as string);

describe('the durable audit trail', () => {
  let server: ProcessNats;
  const connections: NatsConnection[] = [];
  const stops: Array<() => void> = [];
  const connect = async () => {
    const nc = await connectBus({ servers: server.url });
    connections.push(nc);
    return nc;
  };
  const open = async () => {
    const traces = await durableTracesMount(await connect(), { stream: 'AUDIT_TEST' });
    await traces.mount.start();
    stops.push(traces.stop, () => void traces.mount.stop());
    return traces.audit as AuditStream;
  };

  beforeAll(async () => {
    server = await startNatsProcess();
  });
  afterAll(async () => {
    for (const stop of stops) stop();
    for (const nc of connections) await nc.close();
    await server.stop();
  });

  it('answers every query the same from two instances: by trace id, tool, session, principal, outcome and time, newest first, paged', async () => {
    const [a, b] = [await open(), await open()];
    const log = new AuditLog(await connect());
    // Times as a dispatcher stamps them: each event ends before its batch is stored.
    const events = makeEvents(300, traceIds, Date.now() - 400);
    // Batches of 7, as a dispatcher under load sends them.
    events.forEach((e, i) => {
      log.record(e);
      if (i % 7 === 6) log.flush();
    });
    log.flush();
    await eventually(async () =>
      expect((await queryBatches(a, { traceId: traceIds[3], limit: 500 })).events).toHaveLength(
        expected(events, { traceId: traceIds[3] }).length,
      ),
    );

    const t = (i: number) => (events[i] as CallEvent).at;
    const queries: TraceQuery[] = [
      { traceId: traceIds[3], limit: 500 },
      { traceId: traceIds[0], tool: 'alpha', outcome: 'error' },
      { tool: 'beta', session: 's1', limit: 500 },
      { principal: 'alice', outcome: 'ok', limit: 500 },
      { since: t(100), until: t(150), limit: 500 },
      { traceId: traceIds[5], since: t(20), until: t(250), limit: 500 },
      { limit: 10 },
    ];
    for (const q of queries) {
      const [fromA, fromB] = [await queryBatches(a, q), await queryBatches(b, q)];
      expect(fromB).toEqual(fromA);
      expect(fromA.events).toEqual(expected(events, q).slice(0, q.limit ?? 50));
    }
    // Pages of 13 follow one another without a gap or a repeat.
    for (const q of [
      { traceId: traceIds[2], limit: 13 },
      { tool: 'alpha', limit: 13 },
    ]) {
      const { events: paged, pages } = await allPages(b, q);
      expect(paged).toEqual(expected(events, q));
      expect(pages).toBeGreaterThan(2);
    }
    // Over the bus, as trace_query asks.
    const client = new BusClient(await connect());
    const reply = await client.request<TraceQueryReply>('system.traces', '$query', { traceId: traceIds[1], limit: 5 });
    expect(reply.events).toEqual(expected(events, { traceId: traceIds[1] }).slice(0, 5));
    client.close();
  });

  it("keeps a session's batch findable by trace id however often another session floods that trace id", async () => {
    const audit = await open();
    const log = new AuditLog(await connect());
    const traceId = traceIdOf(newTraceparent()) as string;
    const at = Date.now() - 5_000;
    const call = (session: string, i: number): CallEvent => ({
      ...(makeEvents(1, [traceId], at + i)[0] as CallEvent),
      callId: `${session}-${i}`,
      session,
    });
    log.record(call('victim', 0));
    log.flush();
    // The KV index kept the newest 1,000 batches per trace id: these pushed the victim's out.
    for (let i = 1; i <= 1_100; i++) {
      log.record(call('attacker', i));
      log.flush();
    }
    const last = await eventually(async () => {
      const { last } = await audit.bounds();
      expect((await audit.batch(last))?.events[0]?.callId).toBe('attacker-1100');
      return last;
    });
    await eventually(async () => expect(await audit.indexedThrough()).toBeGreaterThanOrEqual(last), {
      timeoutMs: 20_000,
    });
    // A page reads at most TRACE_BUDGET batches: the victim's call is on a later page, not gone.
    const { events: found } = await allPages(audit, { traceId, session: 'victim' });
    expect(found.map((e) => e.callId)).toEqual(['victim-0']);
    expect((await audit.batchesOf(traceId)).length).toBeGreaterThanOrEqual(1_101);
  });
});

describe('the trace-id index', () => {
  let server: ProcessNats;
  let nc: NatsConnection;
  let stop: () => void = () => {};

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url });
  });
  afterAll(async () => {
    stop();
    await nc.close();
    await server.stop();
  });

  it('creates its index again when someone deletes it, at the next lookup or write, and indexes the whole trail again', async () => {
    stop();
    const jsm = await jetstreamManager(nc);
    for await (const info of jsm.streams.list()) await jsm.streams.delete(info.config.name);
    const traces = await durableTracesMount(nc, { stream: 'RESTORE_TEST' });
    stop = traces.stop;
    const audit = traces.audit as AuditStream;
    const log = new AuditLog(nc);
    const [a, b] = [traceIdOf(newTraceparent()) as string, traceIdOf(newTraceparent()) as string];
    log.record(makeEvents(1, [a], Date.now())[0] as CallEvent);
    log.flush();
    await eventually(async () => expect(await audit.indexedThrough()).toBe(1));
    expect(await audit.batchesOf(a)).toEqual([1]);
    await jsm.streams.delete(audit.indexName);
    // No call comes: the lookup that finds the index gone has it made again and indexed anew.
    await eventually(async () => expect(await audit.batchesOf(a)).toEqual([1]), { timeoutMs: 20_000 });
    log.record(makeEvents(1, [b], Date.now())[0] as CallEvent);
    log.flush();
    await eventually(async () => expect(await audit.indexedThrough()).toBe(2), { timeoutMs: 20_000 });
    expect(await audit.batchesOf(a)).toEqual([1]);
    expect(await audit.batchesOf(b)).toEqual([2]);
    stop();
    for await (const info of jsm.streams.list()) await jsm.streams.delete(info.config.name);
  }, 60_000);

  it('merges a shard level by level, so a lookup reads a few messages however many flushes wrote to it, and loses no entry', async () => {
    const traces = await durableTracesMount(nc, { stream: 'MERGE_TEST' });
    const audit = traces.audit as AuditStream;
    const jsm = await jetstreamManager(nc);
    const store = await StreamStore.open(nc);
    const shards = Shards.fromDescription((await jsm.streams.info(audit.indexName)).config.description);
    const writer = new StreamWriter(nc);
    // 400 trace ids of one shard, each written by a flush of its own (a trail of one call per flush).
    const shard = shards.of(traceIdOf(newTraceparent()) as string);
    const ids: string[] = [];
    while (ids.length < 400) {
      const id = traceIdOf(newTraceparent()) as string;
      if (shards.of(id) === shard) ids.push(id);
    }
    for (const [i, id] of ids.entries()) {
      await writer.append(shardSubject('MERGE_TEST', shard), Buffer.from(`{"${id}":[${i + 1}]}`));
      // As the indexer does after each 32 flushes to a shard.
      if (i % MERGE_AT === MERGE_AT - 1) await mergeShard(store, writer, 'MERGE_TEST', shard, 1);
    }
    const stored = await readShard(store, 'MERGE_TEST', shard);
    expect(stored.length).toBeLessThanOrEqual(3 * MERGE_AT);
    expect(new Set(stored.map((m) => m.level)).size).toBeGreaterThan(1);
    for (let from = 0; from < ids.length; from += 50) {
      const found = await Promise.all(ids.slice(from, from + 50).map((id) => audit.batchesOf(id)));
      for (const [k, seqs] of found.entries()) expect(seqs, ids[from + k]).toEqual([from + k + 1]);
    }
    writer.close();
    traces.stop();
    // The trail's subject is one per server: make way for the next test's.
    await jsm.streams.delete('MERGE_TEST');
    await jsm.streams.delete(audit.indexName);
  }, 60_000);

  it('fails a shard read that runs out of time instead of answering with the part it read', async () => {
    // A lookup or a merge that took part of a shard for all of it would miss batches (and a
    // merge would purge what it never read).
    const jsm = await jetstreamManager(nc);
    const store = await StreamStore.open(nc);
    await jsm.streams.add({ name: indexStreamName('SLOW_READ'), subjects: [indexSubjects('SLOW_READ')] });
    const writer = new StreamWriter(nc);
    for (let from = 0; from < 3_000; from += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, i) =>
          writer.append(shardSubject('SLOW_READ', 9), Buffer.from(`{"x":[${from + i + 1}]}`)),
        ),
      );
    }
    expect(await readShard(store, 'SLOW_READ', 9)).toHaveLength(3_000);
    await expect(readShard(store, 'SLOW_READ', 9, { timeoutMs: 1 })).rejects.toBeInstanceOf(UnavailableError);
    writer.close();
    await jsm.streams.delete(indexStreamName('SLOW_READ'));
  }, 60_000);

  it('writes a message per shard and flush, not one per trace, and finds every trace', async () => {
    const traces = await durableTracesMount(nc, { stream: 'INDEX_TEST' });
    stop = traces.stop;
    const audit = traces.audit as AuditStream;
    const log = new AuditLog(nc);
    const ids = Array.from({ length: 6_000 }, () => traceIdOf(newTraceparent()) as string);
    const events = makeEvents(6_000, ids, Date.now() - 10_000);
    events.forEach((e, i) => {
      log.record(e);
      if (i % 100 === 99) log.flush();
    });
    const { last } = await eventually(async () => {
      const bounds = await audit.bounds();
      expect(bounds.messages).toBe(60);
      return bounds;
    });
    await eventually(async () => expect(await audit.indexedThrough()).toBe(last), { timeoutMs: 20_000 });
    const index = await (await jetstreamManager(nc)).streams.info(audit.indexName);
    expect(index.state.messages).toBeGreaterThan(0);
    expect(index.state.messages).toBeLessThan(3_000);
    // Every 5th trace, 50 lookups at a time.
    const sample = ids.map((id, i) => ({ id, seq: Math.floor(i / 100) + 1 })).filter((_, i) => i % 5 === 0);
    for (let from = 0; from < sample.length; from += 50) {
      const part = sample.slice(from, from + 50);
      const found = await Promise.all(part.map(({ id }) => audit.batchesOf(id)));
      for (const [k, seqs] of found.entries()) expect(seqs, part[k]?.id).toEqual([part[k]?.seq]);
    }
  }, 60_000);
});

describe('the audit trail across restarts', () => {
  let server: ProcessNats;
  let service: ServiceProcess | undefined;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsProcess();
    nc = await connectBus({ servers: server.url });
  });
  afterAll(async () => {
    await service?.stop();
    await nc.close();
    await server.stop();
  });

  it('loses no event that reached the server when the service or nats-server restarts', async () => {
    const client = new BusClient(nc, { timeoutMs: 5_000 });
    const traceparent = newTraceparent();
    const traceId = traceIdOf(traceparent) as string;
    const call = (id: string) =>
      client.request<ToolResult>(
        'system.dispatcher',
        '$call',
        { session: { profile: 'evaluate' }, call: { id, name: 'trace_query', arguments: { traceId } } },
        { traceparent },
      );
    const callIds = async (): Promise<string[]> =>
      (await client.request<TraceQueryReply>('system.traces', '$query', { traceId, limit: 500 })).events.map(
        (e) => e.callId,
      );

    service = await startService(server.url);
    for (const id of ['c1', 'c2', 'c3']) expect((await call(id)).isError).toBe(false);
    await eventually(async () => expect(await callIds()).toEqual(['c3', 'c2', 'c1']));

    // The service stops; events still reach the server meanwhile (here from another dispatcher's log).
    await service.stop();
    service = undefined;
    const log = new AuditLog(nc);
    log.record({
      callId: 'while-down',
      name: 'trace_query',
      traceparent,
      outcome: 'ok',
      durationMs: 1,
      at: new Date().toISOString(),
    });
    log.flush();
    await nc.flush();
    service = await startService(server.url);
    await eventually(async () => expect(await callIds()).toEqual(['while-down', 'c3', 'c2', 'c1']));

    // nats-server is killed and started again on its store; the service reconnects.
    await server.kill();
    await server.restart();
    await eventually(async () => expect((await call('c4')).isError).toBe(false), { timeoutMs: 20_000 });
    await eventually(async () => expect(await callIds()).toEqual(['c4', 'while-down', 'c3', 'c2', 'c1']), {
      timeoutMs: 20_000,
    });
  });
});
